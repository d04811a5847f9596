"""Tensor and pipeline parallelism in the roofline step time: scene tests (issue 15 item 4).

PP stages run in series for one step, TP pays two all-reduces per layer over its link; the
scenes are the ones an engineer asks about, the published numbers are in
tests/validation/test_parallelism_published.py."""

from __future__ import annotations

import pytest

from tailtriage.errors import ConfigError
from tailtriage.simulator.steptime import GPUS, LINKS, MODELS, RooflineStepTime

L70 = MODELS["llama-3.1-70b"]
H100 = GPUS["H100"]
BATCHES = (1, 16, 64)  # decode batches: latency-bound to throughput-bound


def tpot(model: RooflineStepTime, batch: int, context: int = 2048) -> float:
    return model.step_time(0, batch, batch * context)


@pytest.mark.parametrize("batch", BATCHES)
def test_one_nvlink_node_tp8_decodes_faster_than_pp8_and_tp4_pp2(batch: int) -> None:
    tp8 = RooflineStepTime(L70, H100, tp=8)
    pp8 = RooflineStepTime(L70, H100, pp=8)
    tp4pp2 = RooflineStepTime(L70, H100, tp=4, pp=2)
    assert tpot(tp8, batch) < tpot(tp4pp2, batch) < tpot(pp8, batch)


@pytest.mark.parametrize("batch", BATCHES)
def test_pipeline_stages_never_shorten_a_step(batch: int) -> None:
    # the wrong model multiplied bandwidth by tp x pp: PP4 looked faster than TP1
    for tp in (1, 2, 4):
        alone = RooflineStepTime(L70, H100, tp=tp)
        for pp in (2, 4):
            assert tpot(RooflineStepTime(L70, H100, tp=tp, pp=pp), batch) >= tpot(alone, batch)


@pytest.mark.parametrize("fabric", ["pcie", "ethernet"])
@pytest.mark.parametrize("batch", BATCHES)
def test_across_two_nodes_pp_between_them_beats_tp_across_them(fabric: str, batch: int) -> None:
    # 16 GPUs in two 8-GPU NVLink nodes: TP16 sends every all-reduce over the slow link,
    # TP8 x PP2 sends one activation hand-off per step over it
    tp16 = RooflineStepTime(L70, H100, tp=16, interconnect=fabric)  # type: ignore[arg-type]
    tp8pp2 = RooflineStepTime(L70, H100, tp=8, pp=2, pp_links=(fabric,))  # type: ignore[arg-type]
    assert tpot(tp8pp2, batch) < tpot(tp16, batch)
    # and clearly: the slow link sits on 160 all-reduces instead of one hand-off
    assert tpot(tp16, batch) > 1.2 * tpot(tp8pp2, batch)


def test_pipeline_hand_offs_cost_more_over_slower_links() -> None:
    kw = {"shape": L70, "gpu": H100, "tp": 4, "pp": 2}
    times = [
        tpot(RooflineStepTime(**kw, pp_links=(name,)), 64)  # type: ignore[arg-type]
        for name in ("nvlink", "ib", "ethernet")
    ]
    assert times == sorted(times) and times[0] < times[-1]


def test_all_reduce_cost_follows_the_ring_formula_shape() -> None:
    pcie = LINKS["pcie"]
    small = [pcie.all_reduce_s(n, 0.0, H100) for n in (2, 4, 8)]
    assert small == sorted(small) and small[0] < small[-1]  # one more hop per extra GPU
    nvlink = LINKS["nvlink"]  # NVSwitch: flat in the GPU count at small messages
    assert nvlink.all_reduce_s(2, 0.0, H100) == nvlink.all_reduce_s(8, 0.0, H100)
    assert nvlink.all_reduce_s(1, 1e9, H100) == 0.0
    big = 64 * 2**20  # bandwidth term grows towards 2 x bytes / bandwidth with more GPUs
    assert nvlink.all_reduce_s(8, big, H100) > nvlink.all_reduce_s(2, big, H100)


def test_pipeline_links_must_match_the_stage_boundaries() -> None:
    with pytest.raises(ConfigError, match="stage boundaries"):
        RooflineStepTime(L70, H100, tp=2, pp=4, pp_links=("ib",))
    with pytest.raises(ConfigError, match="unknown interconnect"):
        RooflineStepTime(L70, H100, tp=2, interconnect="carrier-pigeon")  # type: ignore[arg-type]


def test_tp1_pp1_has_no_communication() -> None:
    model = RooflineStepTime(L70, H100, interconnect="ethernet")
    assert model.split(512, 8, 4096)[2] == 0.0
