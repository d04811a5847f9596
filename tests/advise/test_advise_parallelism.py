"""`advise parallelism`: the ranking holds the scenes the issue names, and its parts behave."""

from __future__ import annotations

import pyarrow as pa
import pytest

from tailtriage.advise.catalog import resolve_gpu, resolve_model, shape_from_numbers
from tailtriage.advise.layouts import Cluster, Layout, default_cluster, enumerate_layouts, place
from tailtriage.advise.parallelism import LayoutPrediction, advise_parallelism, predict_layout
from tailtriage.advise.workload import default_workload, from_capture, parse_spec
from tailtriage.analyses.slo import parse_slos
from tailtriage.errors import ConfigError, InsufficientDataError
from tailtriage.model.capture import Capture

L70 = resolve_model("meta-llama/Llama-3.1-70B")
H100 = resolve_gpu("H100-SXM-80GB")
SLO = parse_slos("p95 ttft < 2s, p95 tpot < 60ms")


def by_label(preds: tuple[LayoutPrediction, ...]) -> dict[str, LayoutPrediction]:
    return {p.layout.label: p for p in preds}


def test_one_nvlink_node_70b_tp8_is_not_beaten_on_tpot_by_any_pipeline() -> None:
    advice = advise_parallelism(L70, H100, default_cluster(H100, 8, 1, None), default_workload(),
                                SLO)  # fmt: skip
    fitting = [p for p in advice.layouts if p.memory.fits]
    tp8 = by_label(advice.layouts)["TP8"]
    assert tp8.tpot_s is not None
    for p in fitting:
        if p.layout.pp > 1:
            assert p.tpot_s is not None and tp8.tpot_s < p.tpot_s, p.layout.label
    assert tp8.tpot_s == min(p.tpot_s for p in fitting if p.tpot_s is not None)


def test_two_ethernet_nodes_prefer_pp_between_them_to_tp_across_them() -> None:
    cluster = default_cluster(H100, 16, 2, "ethernet")
    advice = advise_parallelism(L70, H100, cluster, default_workload(), SLO)
    order = [p.layout.label for p in advice.layouts]
    assert order.index("TP8×PP2") < order.index("TP16")
    pp = by_label(advice.layouts)["TP8×PP2"]
    assert pp.placement.tp_link == "nvlink" and pp.placement.pp_links == ("ethernet",)
    tp16 = by_label(advice.layouts)["TP16"]
    assert tp16.placement.tp_crosses_nodes and tp16.placement.tp_link == "ethernet"
    assert tp16.meets_slo is False and pp.meets_slo is True
    assert any("across nodes" in line for line in tp16.why)


def test_a_model_that_does_not_fit_is_rejected_with_the_arithmetic() -> None:
    l405 = resolve_model("meta-llama/Llama-3.1-405B")
    advice = advise_parallelism(l405, H100, default_cluster(H100, 8, 1, None), default_workload())
    assert advice.best is None
    assert all(not p.memory.fits and p.ttft_s is None for p in advice.layouts)
    tp8 = by_label(advice.layouts)["TP8"]
    assert "do not fit" in tp8.memory.arithmetic and "GB/GPU" in tp8.memory.arithmetic
    # in FP8 on H200 it fits, and the same layout gets a prediction
    h200 = resolve_gpu("H200")
    fp8 = predict_layout(l405, h200, default_cluster(h200, 8, 1, None), Layout(8, 1, 1),
                         default_workload(), dtype="fp8")  # fmt: skip
    assert fp8.memory.fits and fp8.tpot_s is not None


def test_longer_context_needs_more_memory_and_can_push_a_layout_out() -> None:
    cluster = default_cluster(H100, 8, 1, None)
    short = predict_layout(
        L70, H100, cluster, Layout(2, 2, 2), parse_spec("prompt=1000,output=200")
    )
    long = predict_layout(L70, H100, cluster, Layout(2, 2, 2),
                          parse_spec("prompt=1000,output=200,context=500000"))  # fmt: skip
    assert short.memory.fits and not long.memory.fits
    assert "not one sequence fits" in long.memory.arithmetic


def test_405b_h200_pipeline_trades_latency_for_throughput_as_published() -> None:
    # NVIDIA (Oct 2024, 8 x H200, FP8): TP8 5.6x faster per user at minimum latency; PP8 1.5x
    # the throughput at maximum throughput.  Without an SLO the ranking is by throughput.
    l405, h200 = resolve_model("meta-llama/Llama-3.1-405B"), resolve_gpu("H200")
    advice = advise_parallelism(l405, h200, default_cluster(h200, 8, 1, None),
                                default_workload(), dtype="fp8")  # fmt: skip
    got = by_label(advice.layouts)
    tp8, pp8 = got["TP8"], got["TP1×PP8"]
    assert tp8.tpot_s is not None and pp8.tpot_s is not None
    assert pp8.tpot_s > 3 * tp8.tpot_s
    assert pp8.throughput_per_gpu > tp8.throughput_per_gpu


def test_moe_layouts_include_expert_parallel_and_read_only_routed_experts() -> None:
    mixtral = resolve_model("mistralai/Mixtral-8x7B-v0.1")
    cluster = default_cluster(H100, 4, 1, None)
    labels = {p.layout.label for p in advise_parallelism(mixtral, H100, cluster,
                                                         default_workload()).layouts}  # fmt: skip
    assert {"EP4", "TP4", "2 × EP2"} <= labels
    dense = shape_from_numbers("dense-46.7b", params_b=46.7, layers=32, hidden=4096, heads=32,
                               kv_heads=8)  # fmt: skip
    moe = predict_layout(mixtral, H100, cluster, Layout(4, 1, 1), default_workload())
    same = predict_layout(dense, H100, cluster, Layout(4, 1, 1), default_workload())
    assert moe.tpot_s is not None and same.tpot_s is not None
    assert moe.tpot_s < same.tpot_s  # batch 1 reads 2 of 8 experts
    ep = predict_layout(mixtral, H100, cluster, Layout(4, 1, 1, expert_parallel=True),
                        default_workload())  # fmt: skip
    assert ep.memory.weights_gb_per_gpu > moe.memory.weights_gb_per_gpu  # attention copied


def test_layouts_respect_heads_layers_and_nodes() -> None:
    odd = shape_from_numbers("odd", params_b=7.0, layers=2, hidden=1536, heads=12, kv_heads=4)
    cluster = Cluster(8, 2, "nvlink", "ib")
    layouts = enumerate_layouts(odd.shape, cluster)
    assert all(12 % lay.tp == 0 and lay.pp <= 2 for lay in layouts)
    assert Layout(8, 1, 1) not in layouts  # 8 does not divide 12 heads
    # an engine of 2 GPUs per node boundary: stage 2 of TP2 x PP4 starts on node 2
    placement = place(Layout(2, 4, 1), cluster)
    assert placement.pp_links == ("nvlink", "ib", "nvlink")
    assert placement.pp_cross_node_boundaries == 1


def test_workload_from_spec_and_capture() -> None:
    assert parse_spec("prompt=2000,output=100").max_context == 2100
    for bad in ("prompt=1", "prompt=a,output=2", "tokens=5,output=3", "prompt=0,output=4"):
        with pytest.raises(ConfigError, match="--workload"):
            parse_spec(bad)
    n = 200
    requests = pa.table({
        "request_id": [str(i) for i in range(n)],
        "arrival": [float(i) for i in range(n)],
        "prompt_tokens": [100 + 10 * (i % 10) for i in range(n)],
        "output_tokens": [50] * n,
        "status": ["ok"] * n,
    })  # fmt: skip
    shape = from_capture(Capture(requests=_full(requests)), "cap")
    assert 100 < shape.prompt_tokens < 200 and shape.output_tokens == 50
    assert shape.max_context >= 240
    empty = Capture(requests=_full(requests.drop(["prompt_tokens"])))
    with pytest.raises(InsufficientDataError, match="--workload"):
        from_capture(empty, "cap")


def _full(table: pa.Table) -> pa.Table:
    from tailtriage.model.schema import REQUESTS

    cols = {f.name: table[f.name] if f.name in table.column_names
            else pa.nulls(table.num_rows, f.type) for f in REQUESTS}  # fmt: skip
    return pa.table(cols).cast(REQUESTS)


def test_unknown_names_and_bad_clusters_are_one_line_errors() -> None:
    with pytest.raises(ConfigError, match="unknown model"):
        resolve_model("nobody/none-1B")
    with pytest.raises(ConfigError, match="unknown GPU"):
        resolve_gpu("Voodoo-5")
    with pytest.raises(ConfigError, match="multiple of --nodes"):
        default_cluster(H100, 9, 2, "ib")
    with pytest.raises(ConfigError, match="joins nodes"):
        default_cluster(H100, 8, 1, "ethernet")
