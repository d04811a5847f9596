"""Advice on a deployment's shape: which parallelism layout to run a model with.

``parallelism.advise_parallelism(model, gpu, cluster, workload, slos)`` ranks every layout of a
GPU budget (tensor, pipeline, tensor x pipeline, data-parallel replicas, expert parallel for
mixture-of-experts models) by predicted TTFT, TPOT and throughput per GPU under the SLO; its
parts:

* ``catalog``     models by Hugging Face name (config.json numbers, cited) or by architecture
                  numbers; GPUs by the names people use (``H100-SXM-80GB``)
* ``workload``    the request shape that sizes the KV cache and the steps: from a capture or a
                  ``prompt=2048,output=256`` spec
* ``layouts``     the layouts a cluster allows and where each one's links run (NVLink inside a
                  node, the fabric between nodes)
* ``memory``      weights + KV cache per GPU, with the arithmetic shown
* ``parallelism`` the prediction per layout and the ranking, as frozen results

Everything is built on :mod:`tailtriage.simulator.steptime`, the same roofline the simulator
steps with, so ``advise`` and ``whatif`` never disagree about a layout.
"""
