"""The accuracy gate for quantization: is a quantized endpoint as accurate as the original?

``gate.quantgate(baseline, candidate, items, budget)`` asks both endpoints every item of an
evaluation set with the load generator's client, scores the answers, and decides against the
user's accuracy budget; its parts:

* ``ask``     one endpoint, every item, through ``loadgen`` (answers and latency records)
* ``paired``  the paired statistics: accuracy change, McNemar's exact test, paired bootstrap CI
* ``gate``    the verdict, per task type and risk area, with the speed gain measured in the run

The evaluation set format and the scoring live in :mod:`tailtriage.loadgen.evalset`, shared
with ``serve-sim --eval`` (which answers a set with a known error rate)."""
