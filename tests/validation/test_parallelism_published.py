"""Tensor vs pipeline parallelism in the roofline against published measurements.

Sources (docs/advise.md "Validation" lists them with what each measured):
* NVIDIA technical blog, "Boosting Llama 3.1 405B Throughput by Another 1.5x on NVIDIA H200
  Tensor Core GPUs and NVLink Switch" (Oct 2024): 8 x H200 HGX, TensorRT-LLM, FP8; at minimum
  latency TP8 gives 5.6x the tokens/s/user of PP8.
* Databricks "LLM Inference Performance Engineering" (2023): Llama-2-70B TTFT 4 -> 8 x A100
  0.74x (already in test_steptime_published.py; here through PP).
* Sarathi-Serve (Agrawal et al., OSDI'24): Falcon-180B on two 4-GPU A100 nodes, TP4 x PP2 has
  more than 2x lower median TBT than TP8 across the nodes (analysis-anchors.md 2.4, secondary
  summary; the exact inter-node link is not verified, we take 100 GbE).
"""

from __future__ import annotations

from tailtriage.simulator.steptime import GPUS, MODELS, ModelShape, RooflineStepTime

# config.json of meta-llama/Llama-3.1-405B: 126 layers, hidden 16384, 128 heads, 8 KV heads
L405 = ModelShape("llama-3.1-405b", 405.85, 126, 16384, 128, 8)
# config.json of tiiuae/falcon-180B: 80 layers, hidden 14848, 232 heads, 8 KV groups
FALCON_180B = ModelShape("falcon-180b", 179.5, 80, 14848, 232, 8)


def test_405b_on_h200_tp8_min_latency_is_several_times_pp8() -> None:
    tp8 = RooflineStepTime(L405, GPUS["H200"], tp=8, dtype="fp8")
    pp8 = RooflineStepTime(L405, GPUS["H200"], pp=8, dtype="fp8")
    ratio = pp8.step_time(0, 1, 2048) / tp8.step_time(0, 1, 2048)
    # published 5.6x; ours is lower (~4.1x) because NCCL-sized all-reduce floors (30 us) are
    # slower than TensorRT-LLM's custom all-reduce.  Within 40 % below, never above the
    # bandwidth-only ceiling of 8x.
    assert 0.6 * 5.6 <= ratio <= 8.0


def test_70b_prefill_on_a100_pipeline_does_not_speed_up_one_prompt() -> None:
    # Databricks: 4 -> 8 GPUs of TP cut a 512-token TTFT to 0.74x; adding the 4 GPUs as a
    # second pipeline stage instead cannot cut it at all (one prompt walks both stages)
    gpu, shape = GPUS["A100-40GB"], MODELS["llama-2-70b"]
    tp4 = RooflineStepTime(shape, gpu, tp=4).step_time(512, 0, 512)
    tp8 = RooflineStepTime(shape, gpu, tp=8).step_time(512, 0, 512)
    tp4pp2 = RooflineStepTime(shape, gpu, tp=4, pp=2).step_time(512, 0, 512)
    assert 0.5 < tp8 / tp4 < 0.9
    assert tp4pp2 >= tp4


def test_falcon_180b_tp4_pp2_beats_cross_node_tp8_by_the_published_order() -> None:
    a100 = GPUS["A100"]
    tp8 = RooflineStepTime(FALCON_180B, a100, tp=8, interconnect="ethernet")
    hybrid = RooflineStepTime(FALCON_180B, a100, tp=4, pp=2, pp_links=("ethernet",))
    for batch, low in ((1, 1.3), (64, 1.8)):
        ratio = tp8.step_time(0, batch, batch * 1500) / hybrid.step_time(0, batch, batch * 1500)
        # published: > 2x at serving load; ours 1.5x at batch 1, 2.0x at batch 64
        assert low < ratio < 4.0, (batch, ratio)
