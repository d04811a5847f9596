"""The incident bundle writer: real formats, no ground truth, and timings that survive the trip."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tailtriage.model import Capture
from tailtriage.model.schema import EVENTS, REQUESTS, SERIES, STAGES, make_table
from tailtriage.model.vocabulary import STAGES as STAGE_NAMES
from tailtriage.simulator.bundle import write_bundle

T0 = 1_764_000_000.0
ORDER = ("ingress", "gateway_queue", "pending", "api_server", "engine_queue", "prefill", "decode")


def build_capture(durations: list[dict[str, float]], *, failed: tuple[int, ...] = ()) -> Capture:
    """A hand-built simulated capture: one request per dict of stage -> seconds."""
    req: dict[str, list[Any]] = {k: [] for k in REQUESTS.names}
    stg: dict[str, list[Any]] = {k: [] for k in ("request_id", "stage", "start", "duration")}
    for i, d in enumerate(durations):
        rid = f"sim-{i}"
        arrival = T0 + 0.25 * i
        t = arrival
        first = None
        for stage in ORDER:
            if stage not in d:
                continue
            stg["request_id"].append(rid)
            stg["stage"].append(stage)
            stg["start"].append(t)
            stg["duration"].append(d[stage])
            t += d[stage]
            if stage == "prefill":
                first = t
        ok = i not in failed
        req["request_id"].append(rid)
        req["trace_id"].append(None)
        req["arrival"].append(arrival)
        req["first_token"].append(first if ok else None)
        req["finish"].append(t)
        req["ttft"].append(first - arrival if ok and first else None)
        req["e2e"].append(t - arrival)
        req["prompt_tokens"].append(100 + i)
        req["output_tokens"].append(50 + i)
        req["status"].append("ok" if ok else "error")
        req["error"].append(None if ok else "http_503")
        req["http_status"].append(200 if ok else 503)
        req["model"].append("meta-llama/Llama-3.1-8B-Instruct")
        req["replica"].append(f"vllm-7f9c6b5d8-{'abcde'[i % 3]}x9z2")
        req["node"].append(f"gpu-node-{i % 3}")
        req["source"].append("simulator")
    series = make_table(
        SERIES,
        {
            "metric": ["vllm:num_requests_waiting"] * 3 + ["DCGM_FI_DEV_GPU_UTIL"] * 2,
            "labels": [
                json.dumps({"model_name": "m", "pod": "vllm-a"}, sort_keys=True),
                json.dumps({"model_name": "m", "pod": "vllm-a"}, sort_keys=True),
                json.dumps({"model_name": "m", "pod": "vllm-b"}, sort_keys=True),
                json.dumps({"gpu": "0"}),
                json.dumps({"gpu": "0"}),
            ],
            "time": [T0, T0 + 15, T0, T0, T0 + 15],
            "value": [3.0, 7.0, 0.0, 97.5, 99.0],
        },
    )
    events = make_table(
        EVENTS,
        {
            "time": [T0 + 1, T0 + 2, T0 + 3, T0 + 40, T0 + 80],
            "kind": [
                "hpa_rescale",
                "pod_created",
                "pod_scheduled",
                "container_started",
                "pod_ready",
            ],
            "object_kind": ["HorizontalPodAutoscaler", "Pod", "Pod", "Pod", "Pod"],
            "object_name": ["vllm", "vllm-new", "vllm-new", "vllm-new", "vllm-new"],
            "namespace": ["llm"] * 5,
            "attributes": [
                '{"replicas": 4}',
                '{"pod": "vllm-new"}',
                '{"pod": "vllm-new", "node": "gpu-node-9"}',
                '{"pod": "vllm-new"}',
                '{"pod": "vllm-new"}',
            ],
        },
    )
    return Capture(
        requests=make_table(REQUESTS, req),
        stages=make_table(STAGES, stg),
        series=series,
        events=events,
    )


CANONICAL = {
    "ingress": 0.05,
    "gateway_queue": 0.004,
    "pending": 0.2,
    "api_server": 0.003,
    "engine_queue": 0.12,
    "prefill": 0.43,
    "decode": 2.5,
}


def read_spans(path: Path) -> list[dict[str, Any]]:
    """Flatten every span of an OTLP/JSON-lines file, with its resource attributes."""
    spans = []
    for line in path.read_bytes().splitlines():
        doc = orjson.loads(line)
        for rs in doc["resourceSpans"]:
            res = {a["key"]: a["value"]["stringValue"] for a in rs["resource"]["attributes"]}
            for ss in rs["scopeSpans"]:
                for sp in ss["spans"]:
                    spans.append({**sp, "resource": res, "scope": ss["scope"]["name"]})
    return spans


def attr_value(v: dict[str, Any]) -> Any:
    ((kind, val),) = v.items()
    return int(val) if kind == "intValue" else val


def attributes(span: dict[str, Any]) -> dict[str, Any]:
    return {a["key"]: attr_value(a["value"]) for a in span.get("attributes", [])}


@pytest.fixture
def bundle(tmp_path: Path) -> tuple[Capture, Path]:
    cap = build_capture([CANONICAL] * 4 + [dict(CANONICAL, pending=0.0)], failed=())
    write_bundle(cap, tmp_path)
    return cap, tmp_path


def test_files_are_the_real_formats(bundle: tuple[Capture, Path]) -> None:
    _, d = bundle
    names = sorted(p.name for p in d.iterdir())
    assert "traces.otlp.jsonl" in names
    assert "kubectl-events.json" in names and "kubectl-pods.json" in names
    # Collector file exporter: every line is one ExportTraceServiceRequest
    for line in (d / "traces.otlp.jsonl").read_bytes().splitlines():
        assert set(orjson.loads(line)) == {"resourceSpans"}
    prom = orjson.loads((d / "prometheus-vllm_num_requests_waiting.json").read_bytes())
    assert prom["status"] == "success" and prom["data"]["resultType"] == "matrix"
    series = {json.dumps(r["metric"], sort_keys=True): r["values"] for r in prom["data"]["result"]}
    key = json.dumps({"__name__": "vllm:num_requests_waiting", "model_name": "m", "pod": "vllm-a"})
    assert series[key] == [[T0, "3"], [T0 + 15, "7"]]  # values are strings, as Prometheus writes
    events = orjson.loads((d / "kubectl-events.json").read_bytes())
    assert events["kind"] == "List" and events["apiVersion"] == "v1"
    reasons = [e["reason"] for e in events["items"]]
    assert reasons == ["SuccessfulRescale", "SuccessfulCreate", "Scheduled", "Started"]
    assert events["items"][0]["message"].startswith("New size: 4;")
    assert events["items"][2]["message"] == "Successfully assigned llm/vllm-new to gpu-node-9"


def test_spans_look_like_the_real_systems(bundle: tuple[Capture, Path]) -> None:
    cap, d = bundle
    spans = read_spans(d / "traces.otlp.jsonl")
    by_trace: dict[str, list[dict[str, Any]]] = {}
    for s in spans:
        by_trace.setdefault(s["traceId"], []).append(s)
    assert len(by_trace) == cap.requests.num_rows
    for trace in by_trace.values():
        names = {s["name"]: s for s in trace}
        root = [s for s in trace if "parentSpanId" not in s]
        assert len(root) == 1 and root[0]["kind"] == 2  # the gateway's SERVER span
        assert root[0]["resource"]["service.name"] == "istio-ingressgateway"
        egress = [n for n in names if n.startswith("router outbound|") and n.endswith(" egress")]
        assert len(egress) == 1 and names[egress[0]]["kind"] == 3
        assert {"throttler_try", "queue_wait", "POST /v1/chat/completions", "llm_request"} <= set(
            names
        )
        llm = names["llm_request"]
        assert llm["kind"] == 2 and llm["resource"]["service.name"] == "vllm"
        assert llm["resource"]["k8s.pod.name"].startswith("vllm-")
        assert llm["resource"]["k8s.node.name"].startswith("gpu-node-")
        a = attributes(llm)
        assert a["gen_ai.latency.time_in_queue"] == pytest.approx(CANONICAL["engine_queue"])
        assert a["gen_ai.latency.time_in_model_prefill"] == pytest.approx(CANONICAL["prefill"])
        assert a["gen_ai.latency.time_in_model_decode"] == pytest.approx(CANONICAL["decode"])
        assert a["gen_ai.usage.prompt_tokens"] >= 100
        # children lie inside their parents
        ids = {s["spanId"]: s for s in trace}
        for s in trace:
            if "parentSpanId" in s:
                p = ids[s["parentSpanId"]]
                assert int(p["startTimeUnixNano"]) <= int(s["startTimeUnixNano"])
                assert int(s["endTimeUnixNano"]) <= int(p["endTimeUnixNano"])


def test_no_ground_truth_leaks(bundle: tuple[Capture, Path]) -> None:
    _, d = bundle
    text = b"".join(p.read_bytes() for p in d.iterdir()).decode()
    for span in read_spans(d / "traces.otlp.jsonl"):
        for key, value in attributes(span).items():
            assert key not in STAGE_NAMES and value not in STAGE_NAMES
    for word in ("scenario", "root_cause", "ground_truth", "simulat", "scaling_lag"):
        assert word not in text.lower()


def _stage_seconds_from_spans(trace: list[dict[str, Any]]) -> dict[str, float]:
    """Read the stages back as the reference says a reader should (independent of the writer)."""
    by_name = {s["name"]: s for s in trace}
    t = lambda s, k: int(s[k]) / 1e9  # noqa: E731
    root = next(s for s in trace if "parentSpanId" not in s)
    egress = next(s for s in trace if s["name"].startswith("router "))
    http = by_name["POST /v1/chat/completions"]
    llm = by_name["llm_request"]
    a = attributes(llm)
    return {
        "ingress": t(egress, "startTimeUnixNano") - t(root, "startTimeUnixNano"),
        "pending": t(by_name["throttler_try"], "endTimeUnixNano")
        - t(by_name["throttler_try"], "startTimeUnixNano"),
        "gateway_queue": t(by_name["queue_wait"], "endTimeUnixNano")
        - t(by_name["queue_wait"], "startTimeUnixNano"),
        "api_server": t(llm, "startTimeUnixNano") - t(http, "startTimeUnixNano"),
        "engine_queue": a["gen_ai.latency.time_in_queue"],
        "prefill": a["gen_ai.latency.time_in_model_prefill"],
        "decode": a["gen_ai.latency.time_in_model_decode"],
        "arrival": t(root, "startTimeUnixNano"),
        "ttft": next(
            int(e["timeUnixNano"]) / 1e9
            for e in root["events"]
            if e["name"] == "first_downstream_tx_byte_sent"
        )
        - t(root, "startTimeUnixNano"),
    }


durations = st.fixed_dictionaries(
    {s: st.floats(min_value=0.0, max_value=5.0, allow_nan=False) for s in ORDER}
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(durations, min_size=1, max_size=5))
def test_stage_times_survive_the_formats(tmp_path: Path, reqs: list[dict[str, float]]) -> None:
    cap = build_capture(reqs)
    out = tmp_path / f"b{abs(hash(str(reqs)))}"
    write_bundle(cap, out)
    traces: dict[str, list[dict[str, Any]]] = {}
    for s in read_spans(out / "traces.otlp.jsonl"):
        traces.setdefault(s["traceId"], []).append(s)
    got = sorted(
        (_stage_seconds_from_spans(tr) for tr in traces.values()), key=lambda d: d["arrival"]
    )
    want = [
        {**r, "arrival": T0 + 0.25 * i, "ttft": sum(r[s] for s in ORDER if s != "decode")}
        for i, r in enumerate(reqs)
    ]
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        for k in w:
            assert g[k] == pytest.approx(w[k], abs=1e-6), k


def test_failed_request_has_no_engine_span(tmp_path: Path) -> None:
    cap = build_capture([{"ingress": 0.05, "pending": 3.0}], failed=(0,))
    write_bundle(cap, tmp_path)
    spans = read_spans(tmp_path / "traces.otlp.jsonl")
    names = {s["name"] for s in spans}
    assert "llm_request" not in names
    root = next(s for s in spans if "parentSpanId" not in s)
    assert root["status"] == {"code": 2}
    assert attributes(root)["http.status_code"] == "503"


def test_pods_document(bundle: tuple[Capture, Path]) -> None:
    cap, d = bundle
    pods = orjson.loads((d / "kubectl-pods.json").read_bytes())
    by_name = {p["metadata"]["name"]: p for p in pods["items"]}
    # every replica that served a request is listed, plus the pod the events created
    assert set(cap.requests["replica"].to_pylist()) | {"vllm-new"} == set(by_name)
    new = by_name["vllm-new"]
    cond = {c["type"]: c for c in new["status"]["conditions"]}
    assert new["metadata"]["creationTimestamp"] == "2025-11-24T16:00:02Z"
    assert cond["PodScheduled"]["lastTransitionTime"] == "2025-11-24T16:00:03Z"
    assert cond["Ready"]["lastTransitionTime"] == "2025-11-24T16:01:20Z"
    assert new["spec"]["nodeName"] == "gpu-node-9"


# -- round trip through the real simulator and the real readers ---------------------------
def _small_scaling_scenario() -> Any:
    from tailtriage.simulator.config import (
        Arrivals,
        Dist,
        GpuConfig,
        HpaConfig,
        Phase,
        PodsConfig,
        ScenarioConfig,
    )

    out = Dist("lognormal", median=60, sigma=0.5)
    return ScenarioConfig(
        gpu=GpuConfig(type="L40S"),
        hpa=HpaConfig(
            metric="vllm:num_requests_waiting",
            target=2,
            min_replicas=1,
            max_replicas=4,
            scrape_lag_s=5,
        ),
        pods=PodsConfig(
            initial_replicas=1, warmup_s=8, load_gb_s=100, image_cached=False, image_pull_s=4
        ),
        workload=(
            Phase(duration_s=30, arrivals=Arrivals(rate=4.0), output_tokens=out),
            Phase(name="incident", duration_s=60, arrivals=Arrivals(rate=30.0), output_tokens=out),
        ),
    )


def _per_request(cap: Capture) -> dict[str, dict[str, float]]:
    """trace_id -> {"ttft": s, "<stage>": s summed}."""
    by_rid = {r["request_id"]: r for r in cap.requests.to_pylist()}
    out = {r["trace_id"]: {"ttft": r["ttft"]} for r in by_rid.values()}
    for s in cap.stages.to_pylist():
        d = out[by_rid[s["request_id"]]["trace_id"]]
        d[s["stage"]] = d.get(s["stage"], 0.0) + s["duration"]
    return out


@pytest.mark.slow
def test_simulate_write_load_round_trip(tmp_path: Path) -> None:
    from tailtriage.simulator.simulation import run
    from tailtriage.store.input import load_capture

    sim = run(_small_scaling_scenario(), seed=3).capture
    assert sim.requests.num_rows > 1000 and sim.events.num_rows > 0  # it did scale up
    write_bundle(sim, tmp_path)
    got = load_capture(tmp_path)
    assert got.metadata.skipped_files == ()  # every file was recognised by content
    want, have = _per_request(sim), _per_request(got)
    assert set(have) == set(want)
    for trace_id, w in want.items():
        h = have[trace_id]
        for key, value in w.items():
            if key == "ttft" and value is None:
                continue
            assert h.get(key, 0.0) == pytest.approx(value, abs=1e-3), (trace_id, key)
        # no time the simulator did not have (e.g. unattributed) appeared on the way
        assert set(h) - set(w) <= {"unattributed"} and h.get("unattributed", 0.0) < 1e-3

    # pod start-up survives at Kubernetes' one-second precision
    def startups(cap: Capture) -> dict[str, float]:
        since = sim.time_range[0]  # type: ignore[index]
        return {
            (json.loads(e["attributes"] or "{}").get("pod") or e["object_name"])
            + "/"
            + e["kind"]: e["duration"]
            for e in cap.events.to_pylist()
            if e["kind"] in ("pod_pending", "cold_start") and e["time"] >= since - 60
        }

    s_want, s_have = startups(sim), startups(got)
    assert s_want and set(s_want) <= set(s_have)
    for key, value in s_want.items():
        assert s_have[key] == pytest.approx(value, abs=1.0), key
