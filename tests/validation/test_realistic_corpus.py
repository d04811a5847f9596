"""The independent realistic corpus (tests/realistic, issue 14): its files are what tailtriage's
sources read, its truth is consistent, it is deterministic, its sampling is head sampling; and
a small fixed subset is triaged and must not score below the floor measured on the code it was
written against (bench/diagnosis_corpus.py runs the whole corpus)."""

from __future__ import annotations

import collections
from pathlib import Path

import numpy as np
import orjson
import pytest

from realistic import Case, case_by_name, read_truth, simulate, write_case
from realistic.corpus import read_requests
from realistic.truth import TTFT_STAGES, Window, breakdown_in, served, stage_seconds, ttft
from realistic.variants import build
from tailtriage.pipeline.triage import triage
from tailtriage.store.input import load_capture

#: one case per platform, each a different cause (fast to generate)
PLATFORM_CASES = (
    "ingress_network-istio-s1",
    "gateway_queue-knative_activator-s1001",
    "rollout-knative_direct-s1001",
    "cold_start-kserve-s1001",
)
#: the subset triaged against the floor: held-out and tuning cases of different causes
FLOOR_CASES = (
    "ingress_network-istio-s1",
    "gateway_queue-istio-s1",
    "load_imbalance-knative_direct-s1001",
    "compute_saturation-kserve-s1001",
    "rollout-knative_direct-s1001",
)
#: top-2 hits on FLOOR_CASES measured on the code this test was written against, minus one
#: (the rules are being repaired: the lead raises this floor when they land; 2026-12-04: 4 of
#: 5 on b1b481c, only gateway_queue-istio-s1 missed)
FLOOR_TOP2 = 3


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("realistic")
    out = {}
    for name in dict.fromkeys(PLATFORM_CASES + FLOOR_CASES):
        write_case(case_by_name(name), root / name, derived=("metrics_only",))
        out[name] = root / name
    return out


@pytest.mark.slow
@pytest.mark.parametrize("name", PLATFORM_CASES)
def test_every_file_is_read_without_skips(written: dict[str, Path], name: str) -> None:
    cap = load_capture(written[name] / "bundle")
    truth = read_truth(written[name])
    # the one file tailtriage skips today: `kubectl get events -o json` of a quiet hour, an
    # empty List (nothing to read either way; reported to the tracker)
    for skipped in cap.metadata.skipped_files:
        doc = orjson.loads(Path(skipped.path).read_bytes())
        assert Path(skipped.path).name == "events.json" and doc["items"] == [], skipped
    assert cap.requests.num_rows > 0
    # every sampled trace carries an inference span: the requests are the sampled traces
    # (orphan engine spans of a sampled trace stay in it, so they add no request)
    assert (
        abs(cap.requests.num_rows - truth["sampled_requests"])
        <= 0.01 * truth["sampled_requests"] + 2
    )
    kinds = set(cap.events.column("kind").to_pylist())
    assert {"pod_scheduled", "pod_ready"} <= kinds or "image_pulled" in kinds
    names = set(cap.series.column("metric").to_pylist())
    assert any(n.startswith("vllm:") for n in names)
    assert any(n.startswith("DCGM_FI_") for n in names)


@pytest.mark.slow
def test_metrics_only_copy_has_no_traces_and_every_metric(written: dict[str, Path]) -> None:
    folder = written[PLATFORM_CASES[0]]
    full = {p.name for p in (folder / "bundle").iterdir()}
    bare = {p.name for p in (folder / "metrics_only").iterdir()}
    assert bare == {n for n in full if not n.startswith("traces-")}
    assert any(n.startswith("traces-") for n in full)


def test_truth_breakdown_sums_to_the_true_p95() -> None:
    case = case_by_name("gateway_queue-istio-s1")
    sc = build(case)
    o = simulate(sc.spec, case.seed)
    inc = served(o, Window(*sc.incident))
    per_request = stage_seconds(o)
    # stages are contiguous along each request's path: they add up to its TTFT
    total = sum(per_request[s][inc] for s in TTFT_STAGES)
    np.testing.assert_allclose(total, ttft(o)[inc], atol=1e-9)


@pytest.mark.slow
def test_truth_json_breakdown_adds_up_to_its_p95(written: dict[str, Path]) -> None:
    for folder in written.values():
        t = read_truth(folder)
        assert sum(t["breakdown_ms"].values()) == pytest.approx(t["true_p95_ms"]["ttft"], abs=0.05)
        assert t["primary"] in t["causes"]
        assert t["windows"]["incident"][0] < t["windows"]["incident"][1]


@pytest.mark.slow
def test_per_request_truth_gives_the_truth_json_breakdown(written: dict[str, Path]) -> None:
    """``requests.npz`` (what the runner scores a report's own window with) holds the same
    requests as the truth: over the generator's window it gives ``truth.json``'s breakdown,
    and over a window of no requests nothing."""
    for folder in written.values():
        t, cols = read_truth(folder), read_requests(folder)
        assert cols is not None
        got = breakdown_in(cols, *t["windows"]["incident"])
        assert got == pytest.approx(t["breakdown_ms"], abs=1e-3)
        assert sum(breakdown_in(cols, 0.0, 1.0).values()) == 0.0


def test_same_case_same_bytes(tmp_path: Path) -> None:
    case = Case(("tensor_parallel_overhead",), "knative_activator", 2)
    a, b = tmp_path / "a", tmp_path / "b"
    write_case(case, a, derived=())
    write_case(case, b, derived=())
    files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
    assert len(files) > 10
    for f in files:
        assert (a / f).read_bytes() == (b / f).read_bytes(), f


def test_head_sampling_drops_whole_traces(tmp_path: Path) -> None:
    case = Case(("tensor_parallel_overhead",), "knative_activator", 2)
    truth = write_case(case, tmp_path, derived=("traces_5pct",))
    for copy, ratio in (("bundle", truth["sampling"]), ("traces_5pct", truth["sampling"] * 0.05)):
        spans_of = collections.defaultdict(set)
        for f in (tmp_path / copy).glob("traces-*.json"):
            for line in f.read_bytes().splitlines():
                for rs in orjson.loads(line)["resourceSpans"]:
                    for ss in rs["scopeSpans"]:
                        for sp in ss["spans"]:
                            spans_of[sp["traceId"]].add(sp["name"])
        # every kept trace is whole: its gateway root and its engine span are both there
        assert spans_of
        assert all("llm_request" in names or len(names) == 1 for names in spans_of.values())
        assert all(any(n.endswith("/*") for n in names) for names in spans_of.values())
        kept, n = len(spans_of), truth["exported_requests"]
        assert abs(kept - ratio * n) < 5 * np.sqrt(ratio * n) + 0.1 * ratio * n


@pytest.mark.slow
def test_triage_floor_on_a_fixed_subset(written: dict[str, Path]) -> None:
    hits = 0
    for name in FLOOR_CASES:
        truth = read_truth(written[name])
        report = triage(load_capture(written[name] / "bundle"), truth["slo"], whatif=False)
        ranked = list(dict.fromkeys(f.category for f in report.findings))
        hits += truth["primary"] in ranked[:2]
    assert hits >= FLOOR_TOP2


@pytest.mark.slow
def test_capacity_probe_counts_long_prompt_completions() -> None:
    """A saturated 70B replica with 2,500-token prompts takes over 30 s per request: the probe
    must run long enough to count its completions, near the roofline's estimate, or such a
    stack is sized at a fraction of its capacity (a 45 s probe gave its 0.05 floor)."""
    from dataclasses import replace

    from realistic.calibrate import capacity_rps, measure_capacity
    from realistic.variants import base_spec

    case = case_by_name("kv_cache_pressure-knative_direct-s2")
    rng = np.random.default_rng([case.seed, *(ord(c) for c in case.name)])
    spec, _, _ = base_spec(case, rng, False)
    ph = replace(spec.workload.phases[0], prompt_median=2500.0, output_median=170.0)
    spec = replace(spec, workload=replace(spec.workload, phases=(ph,)))
    est = capacity_rps(spec, ph.prompt_median, ph.output_median)
    assert 0.4 * est < measure_capacity(spec, case.seed) < 1.5 * est


@pytest.mark.slow
def test_a_kv_case_is_driven_by_its_cache() -> None:
    """A single-cause KV case's label is what drove it: giving the engine 8x the cache takes
    away at least half of the p95 excess (the generator shrinks the cache until it does), and
    the cache really filled."""
    from realistic.corpus import MIN_EXPLAINED, explained, tuned

    for name in ("kv_cache_pressure-istio-s1", "kv_cache_pressure-knative_activator-s1"):
        sc, o = tuned(build(case_by_name(name)))
        assert sc.baseline is not None
        inc = np.nanpercentile(ttft(o)[served(o, Window(*sc.incident))], 95)
        base = np.nanpercentile(ttft(o)[served(o, Window(*sc.baseline))], 95)
        gone = explained(sc, o)["kv_cache_pressure"] / 1e3
        assert gone >= MIN_EXPLAINED * (inc - base), name


@pytest.mark.slow
def test_a_cold_start_case_is_driven_by_its_pods() -> None:
    """The surge scales the fleet out at once, and the new pods' start-up is what keeps
    capacity away: instant pods take away most of the p95 excess.  With a queue-depth HPA the
    engine's batch absorbed the surge, no pod started, and the label explained nothing."""
    from realistic.corpus import MIN_EXPLAINED, explained, tuned

    sc, o = tuned(build(case_by_name("cold_start-istio-s1")))
    assert sc.baseline is not None
    inc = np.nanpercentile(ttft(o)[served(o, Window(*sc.incident))], 95)
    base = np.nanpercentile(ttft(o)[served(o, Window(*sc.baseline))], 95)
    assert explained(sc, o)["cold_start"] / 1e3 >= MIN_EXPLAINED * (inc - base)


def test_a_compound_whose_causes_tie_has_no_primary() -> None:
    from realistic.corpus import _undecided

    # either removal cures it: a tie
    assert _undecided(["a", "b"], {"a": 35.0, "b": 33.0}, 47.0)
    # the two act only together: neither removal explains anything
    assert _undecided(["a", "b"], {"a": 0.0, "b": 0.0}, 90_000.0)
    # the first explains most and clearly more than the second
    assert not _undecided(["a", "b"], {"a": 5125.0, "b": 0.0}, 6530.0)
    assert not _undecided(["a", "b"], {"a": 3569.0, "b": 3083.0}, 5565.0)


@pytest.mark.slow
def test_a_scaling_lag_removal_is_an_autoscaler_that_sees_the_load() -> None:
    """On Istio the removal scales on in-flight requests at once; a queue-depth target (the old
    removal) never fired on an engine whose batch absorbed the surge, and took away only 40 %
    of the excess its label names."""
    from realistic.corpus import MIN_EXPLAINED, explained, tuned

    sc, o = tuned(build(case_by_name("scaling_lag-istio-s1")))
    assert sc.baseline is not None
    inc = np.nanpercentile(ttft(o)[served(o, Window(*sc.incident))], 95)
    base = np.nanpercentile(ttft(o)[served(o, Window(*sc.baseline))], 95)
    assert explained(sc, o)["scaling_lag"] / 1e3 >= MIN_EXPLAINED * (inc - base)
