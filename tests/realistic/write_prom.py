"""Metrics as Prometheus's HTTP API returns them for ``query_range``: one JSON file per query,
``{"status":"success","data":{"resultType":"matrix","result":[{"metric":{...},"values":
[[unix_s, "value"], ...]}]}}`` (telemetry-conventions 5.5), values as strings.

Families and spellings (telemetry-conventions 1.2, 6.1, 6.2): vLLM gauges, counters (with
``_total``) and histograms (``_bucket``/``_sum``/``_count``, the documented default buckets)
under the names of the configured engine version (``gpu_cache_usage_perc`` and
``time_per_output_token_seconds`` before 0.11, ``inter_token_latency_seconds`` after, no
``engine`` label on 0.6); DCGM exporter fields per GPU; kube-state-metrics HPA series; cAdvisor
container CPU; Istio/Envoy request and upstream-pool metrics; Knative autoscaler gauges."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from prometheus_files import VLLM_ITL, VLLM_PHASE, VLLM_TTFT, write_query_range
from realistic.control import CPU_REQUEST
from realistic.outcome import SAMPLE_COLUMNS, Outcome
from realistic.spec import GPUS, MODELS
from realistic.truth import tpot

_C = {name: i for i, name in enumerate(SAMPLE_COLUMNS)}
#: vLLM's documented default buckets, shared with the test builders
TTFT_BUCKETS, ITL_BUCKETS, PHASE_BUCKETS = VLLM_TTFT, VLLM_ITL, VLLM_PHASE
TOKEN_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000)

#: metric family groups a variant can leave out (Telemetry.drop_families)
GROUPS = ("vllm", "vllm_histograms", "dcgm", "dcgm_prof", "hpa", "cpu", "istio", "knative")


class _Writer:
    def __init__(self, o: Outcome, folder: Path) -> None:
        self.o = o
        self.folder = folder
        s = o.spec.telemetry.scrape_s
        self.times = np.arange(0.0, o.spec.duration_s + 1e-9, s)
        self.files = 0
        smp = o.samples
        keep = np.isin(np.round(smp[:, 0], 6), np.round(self.times, 6))
        self.smp = smp[keep]

    def write(
        self, query: str, series: Iterable[tuple[dict[str, str], np.ndarray, np.ndarray]]
    ) -> None:
        result: list[dict[str, Any]] = []
        t0 = self.o.spec.t0
        for labels, ts, vals in series:
            values = [
                [round(t0 + float(t), 3), _fmt(float(v))] for t, v in zip(ts, vals, strict=True)
            ]
            if values:
                result.append({"metric": labels, "values": values})
        name = query.replace(":", "_").replace("{", "").replace("}", "").replace('"', "")
        name = "".join(c if c.isalnum() or c in "_-" else "_" for c in name)[:80]
        self.folder.mkdir(parents=True, exist_ok=True)
        write_query_range(self.folder / f"prom-{name}.json", result)
        self.files += 1

    # -- per-pod sample series -------------------------------------------------------------
    def pod_rows(self) -> Iterable[tuple[int, np.ndarray]]:
        for pod in np.unique(self.smp[:, 1]).astype(int):
            yield pod, self.smp[self.smp[:, 1] == pod]

    def vllm_labels(self, pod: int, name: str) -> dict[str, str]:
        o = self.o
        p = o.pods[pod]
        lab = {
            "__name__": name,
            "container": _container(o),
            "endpoint": "http",
            "instance": f"{p.ip}:8000",
            "job": f"{o.spec.namespace}/{o.spec.service}",
            "model_name": MODELS[o.spec.model].name,
            "namespace": o.spec.namespace,
            "pod": p.name,
        }
        if o.spec.engine.version != "0.6":
            lab["engine"] = "0"
        return lab


def _fmt(v: float) -> str:
    if np.isnan(v):
        return "NaN"
    if v == int(v) and abs(v) < 1e15:
        return str(int(v))
    return repr(round(float(v), 6))  # a plain float: numpy 2 reprs read np.float64(...)


def _container(o: Outcome) -> str:
    p = o.spec.platform
    return "kserve-container" if p == "kserve" else ("user-container" if p != "istio" else "vllm")


def write_metrics(o: Outcome, folder: Path) -> int:
    """Write every exported family; return the number of files."""
    w = _Writer(o, folder)
    drop = set(o.spec.telemetry.drop_families)
    if "vllm" not in drop:
        _vllm_gauges(w)
        if "vllm_histograms" not in drop:
            _vllm_histograms(w)
    if "dcgm" not in drop:
        _dcgm(w, prof="dcgm_prof" not in drop)
    if "hpa" not in drop and o.spec.hpa.metric != "none":
        _hpa(w)
    if "cpu" not in drop:
        _cpu(w)
    if "istio" not in drop and o.spec.platform == "istio":
        _istio(w)
    if "knative" not in drop and o.spec.platform != "istio":
        _knative(w)
    return w.files


def _vllm_gauges(w: _Writer) -> None:
    v = w.o.spec.engine.version
    kv = "vllm:gpu_cache_usage_perc" if v in ("0.6",) else "vllm:kv_cache_usage_perc"
    for name, col in (
        ("vllm:num_requests_running", "running"),
        ("vllm:num_requests_waiting", "waiting"),
        (kv, "kv_usage"),
        ("vllm:num_preemptions_total", "preemptions"),
    ):
        w.write(name, ((w.vllm_labels(p, name), r[:, 0], r[:, _C[col]]) for p, r in w.pod_rows()))
    o = w.o
    ok = ~np.isnan(o.finish)
    for name, obs in (
        ("vllm:prompt_tokens_total", o.req.prompt),
        ("vllm:generation_tokens_total", o.req.output),
    ):
        w.write(name, _counter_series(w, name, o.finish, obs.astype(float), ok))
    w.write("vllm:request_success_total", _success(w))


def _counter_series(
    w: _Writer, name: str, when: np.ndarray, obs: np.ndarray, ok: np.ndarray
) -> Iterable[tuple[dict[str, str], np.ndarray, np.ndarray]]:
    o = w.o
    for pod, rows in w.pod_rows():
        m = ok & (o.pod == pod)
        order = np.argsort(when[m])
        cum = np.concatenate([[0.0], np.cumsum(obs[m][order])])
        idx = np.searchsorted(when[m][order], rows[:, 0], side="right")
        yield w.vllm_labels(pod, name), rows[:, 0], cum[idx]


def _success(w: _Writer) -> Iterable[tuple[dict[str, str], np.ndarray, np.ndarray]]:
    o = w.o
    ok = ~np.isnan(o.finish)
    for reason, m in (("stop", o.req.output % 7 != 0), ("length", o.req.output % 7 == 0)):
        for lab, ts, vals in _counter_series(
            w, "vllm:request_success_total", o.finish, np.ones(len(o.finish)), ok & m
        ):
            yield {**lab, "finished_reason": reason}, ts, vals


def _vllm_histograms(w: _Writer) -> None:
    o = w.o
    v = o.spec.engine.version
    tp = tpot(o)
    n_gaps = np.maximum(o.req.output - 1, 0).astype(float)
    fams: list[tuple[str, np.ndarray, np.ndarray, tuple[float, ...], np.ndarray]] = [
        ("vllm:time_to_first_token_seconds", o.first - o.llm_start, o.first, TTFT_BUCKETS, None),
        ("vllm:e2e_request_latency_seconds", o.finish - o.llm_start, o.finish, PHASE_BUCKETS, None),
        ("vllm:request_queue_time_seconds", o.scheduled - o.queued, o.finish, PHASE_BUCKETS, None),
        ("vllm:request_prefill_time_seconds", o.first - o.scheduled, o.finish, PHASE_BUCKETS, None),
        ("vllm:request_decode_time_seconds", o.finish - o.first, o.finish, PHASE_BUCKETS, None),
        (
            "vllm:request_inference_time_seconds",
            o.finish - o.scheduled,
            o.finish,
            PHASE_BUCKETS,
            None,
        ),
        ("vllm:request_prompt_tokens", o.req.prompt.astype(float), o.finish, TOKEN_BUCKETS, None),
        (
            "vllm:request_generation_tokens",
            o.req.output.astype(float),
            o.finish,
            TOKEN_BUCKETS,
            None,
        ),
    ]  # type: ignore[list-item]
    if v in ("0.6", "0.10"):
        fams.append(("vllm:time_per_output_token_seconds", tp, o.finish, ITL_BUCKETS, n_gaps))  # type: ignore[arg-type]
    else:
        fams.append(("vllm:inter_token_latency_seconds", tp, o.finish, ITL_BUCKETS, n_gaps))  # type: ignore[arg-type]
        fams.append(("vllm:request_time_per_output_token_seconds", tp, o.finish, ITL_BUCKETS, None))
    if v == "0.6":
        fams = [f for f in fams if "inference_time" not in f[0]]
    for name, val, when, bounds, weight in fams:
        w.write(
            f'{{__name__=~"{name}_(bucket|sum|count)"}}',
            _histogram(w, name, val, when, bounds, weight),
        )


def _histogram(
    w: _Writer,
    name: str,
    val: np.ndarray,
    when: np.ndarray,
    bounds: tuple[float, ...],
    weight: np.ndarray | None,
) -> Iterable[tuple[dict[str, str], np.ndarray, np.ndarray]]:
    o = w.o
    wt = np.ones(len(val)) if weight is None else weight
    ok = ~np.isnan(val) & ~np.isnan(when)
    edges = np.asarray(bounds, dtype=float)
    for pod, rows in w.pod_rows():
        m = ok & (o.pod == pod)
        order = np.argsort(when[m])
        tv, vv, ww = when[m][order], val[m][order], wt[m][order]
        idx = np.searchsorted(tv, rows[:, 0], side="right")
        b = np.searchsorted(edges, vv, side="left")  # bucket le=edges[b] (len(edges): +Inf)
        onehot = np.zeros((len(vv) + 1, len(edges) + 1))
        onehot[np.arange(1, len(vv) + 1), b] = ww
        cum = np.cumsum(np.cumsum(onehot, axis=0), axis=1)[idx]  # (scrapes, buckets) cumulative
        sums = np.concatenate([[0.0], np.cumsum(vv * ww)])[idx]
        base = w.vllm_labels(pod, name + "_bucket")
        for j, le in enumerate([*(_fmt(e) if e != int(e) else f"{e:.1f}" for e in edges), "+Inf"]):
            yield {**base, "le": le}, rows[:, 0], cum[:, j]
        yield w.vllm_labels(pod, name + "_sum"), rows[:, 0], sums
        yield w.vllm_labels(pod, name + "_count"), rows[:, 0], cum[:, -1]


def _deltas(rows: np.ndarray, col: str) -> np.ndarray:
    x = rows[:, _C[col]]
    dt = np.diff(rows[:, 0], prepend=rows[0, 0] - 1.0)
    return np.diff(x, prepend=x[0]) / np.maximum(dt, 1e-9)


def _dcgm(w: _Writer, prof: bool) -> None:
    o = w.o
    gpu, model = GPUS[o.spec.gpu], MODELS[o.spec.model]
    link = o.spec.interconnect or gpu.link
    per_tok = model.d_model * 2.0 * 2.0 * model.layers * (o.spec.tp - 1) / max(o.spec.tp, 1)
    fields: dict[str, list[tuple[dict[str, str], np.ndarray, np.ndarray]]] = {}
    for pod, rows in w.pod_rows():
        p = o.pods[pod]
        busy = np.clip(_deltas(rows, "busy_s"), 0, 1)
        comp = np.clip(_deltas(rows, "compute_s"), 0, 1)
        mem = np.clip(_deltas(rows, "memory_s"), 0, 1)
        tok = _deltas(rows, "tokens")
        vals = {
            "DCGM_FI_DEV_GPU_UTIL": np.round(busy * 100),
            "DCGM_FI_DEV_FB_USED": np.full(len(rows), gpu.mem_gb * 1024 * 0.9),
            "DCGM_FI_DEV_POWER_USAGE": 90 + 500 * busy * 0.8,
        }
        if prof:
            vals |= {
                "DCGM_FI_PROF_GR_ENGINE_ACTIVE": busy * 0.98,
                "DCGM_FI_PROF_SM_ACTIVE": np.clip(comp + mem * 0.85, 0, 1) * 0.97,
                "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": comp * o.spec.engine.mfu,
                "DCGM_FI_PROF_DRAM_ACTIVE": mem * o.spec.engine.mbu,
            }
            if o.spec.tp > 1:
                key = (
                    "DCGM_FI_PROF_NVLINK_TX_BYTES"
                    if link == "nvlink"
                    else "DCGM_FI_PROF_PCIE_TX_BYTES"
                )
                vals[key] = tok * per_tok
        for g in range(o.spec.tp):
            lab = {
                "gpu": str(g),
                "UUID": f"GPU-{pod:04x}{g:04x}-5e3a-4c1b-9f7d-3b2a1c0d{g:04x}",
                "device": f"nvidia{g}",
                "modelName": gpu.name,
                "Hostname": p.node,
                "DCGM_FI_DRIVER_VERSION": "550.90.07",
                "namespace": o.spec.namespace,
                "pod": p.name,
                "container": _container(o),
            }
            for f, v in vals.items():
                fields.setdefault(f, []).append(({"__name__": f, **lab}, rows[:, 0], v))
    for f, series in fields.items():
        w.write(f, series)


def _hpa(w: _Writer) -> None:
    o = w.o
    h = o.spec.hpa
    rows = o.hpa[np.isin(np.round(o.hpa[:, 0], 6), np.round(w.times, 6))]
    base = {
        "horizontalpodautoscaler": o.spec.service,
        "namespace": o.spec.namespace,
        "job": "kube-state-metrics",
    }
    metric = {
        "cpu": "cpu",
        "gpu_util": "DCGM_FI_DEV_GPU_UTIL",
        "queue": "vllm:num_requests_waiting",
        # Knative's KPA scales on concurrency; an HPA (Istio) on the engine's running gauge
        "concurrency": "vllm:num_requests_running" if o.spec.platform == "istio" else "concurrency",
    }[h.metric]
    kind = "utilization" if h.metric == "cpu" else "average"
    ts = rows[:, 0]
    for name, vals in (
        ("kube_horizontalpodautoscaler_status_desired_replicas", rows[:, 1]),
        ("kube_horizontalpodautoscaler_status_current_replicas", rows[:, 2]),
        ("kube_horizontalpodautoscaler_spec_min_replicas", np.full(len(ts), h.min_replicas)),
        ("kube_horizontalpodautoscaler_spec_max_replicas", np.full(len(ts), h.max_replicas)),
    ):
        w.write(name, [({"__name__": name, **base}, ts, vals)])
    for name, vals in (
        ("kube_horizontalpodautoscaler_spec_target_metric", np.full(len(ts), h.target)),
        ("kube_horizontalpodautoscaler_status_target_metric", rows[:, 4]),
    ):
        lab = {"__name__": name, **base, "metric_name": metric, "metric_target_type": kind}
        w.write(name, [(lab, ts, vals)])
    limited = (rows[:, 1] >= h.max_replicas).astype(float)
    name = "kube_horizontalpodautoscaler_status_condition"
    w.write(
        name,
        [
            (
                {"__name__": name, **base, "condition": "ScalingLimited", "status": st},
                ts,
                limited if st == "true" else 1 - limited,
            )
            for st in ("true", "false")
        ],
    )


def _cpu(w: _Writer) -> None:
    o = w.o
    name = "container_cpu_usage_seconds_total"
    series = []
    for pod, rows in w.pod_rows():
        p = o.pods[pod]
        lab = {
            "__name__": name,
            "namespace": o.spec.namespace,
            "pod": p.name,
            "container": _container(o),
            "cpu": "total",
            "job": "kubelet",
            "metrics_path": "/metrics/cadvisor",
            "node": p.node,
        }
        series.append((lab, rows[:, 0], rows[:, _C["cpu_s"]] + 3600 * 0.08))
    w.write(name, series)
    lim = "kube_pod_container_resource_limits"
    series = []
    for pod, rows in w.pod_rows():
        lab = {
            "__name__": lim,
            "namespace": o.spec.namespace,
            "pod": o.pods[pod].name,
            "container": _container(o),
            "resource": "cpu",
            "unit": "core",
        }
        series.append((lab, rows[:, 0], np.full(len(rows), max(o.spec.api.cpus, CPU_REQUEST))))
    w.write(lim, series)


def _istio(w: _Writer) -> None:
    o = w.o
    ts = w.times
    dest = f"{o.spec.service}.{o.spec.namespace}.svc.cluster.local"
    base = {
        "reporter": "source",
        "source_workload": "istio-ingressgateway",
        "destination_service": dest,
        "destination_workload": o.spec.service,
        "request_protocol": "http",
    }
    arr = o.pool_in
    series = []
    for code, flags, m in (("200", "-", o.status == 200), ("503", "UO", o.status == 503)):
        cnt = np.array([np.sum(m & (arr <= t)) for t in ts], dtype=float)
        if cnt[-1] or code == "200":
            series.append(
                (
                    {
                        "__name__": "istio_requests_total",
                        **base,
                        "response_code": code,
                        "response_flags": flags,
                    },
                    ts,
                    cnt,
                )
            )
    w.write("istio_requests_total", series)
    cluster = f"outbound|8000||{dest}"
    waiting = o.dispatch - o.pool_in
    pend = np.array([np.sum((o.pool_in <= t) & (o.dispatch > t)) for t in ts], dtype=float)
    over = np.array([np.sum((o.status == 503) & (arr <= t)) for t in ts], dtype=float)
    act = np.array([np.sum((o.dispatch <= t) & (o.finish > t)) for t in ts], dtype=float)
    retry = np.array([np.sum((o.retries > 0) & (o.dispatch <= t)) for t in ts], dtype=float)
    del waiting
    lab = {
        "cluster_name": cluster,
        "pod": "istio-ingressgateway-5f8c7d9b6-x2x7q",
        "namespace": "istio-system",
    }
    for name, vals in (
        ("envoy_cluster_upstream_rq_pending_active", pend),
        ("envoy_cluster_upstream_rq_pending_overflow", over),
        ("envoy_cluster_upstream_rq_active", act),
        ("envoy_cluster_upstream_rq_retry", retry),
    ):
        w.write(name, [({"__name__": name, **lab}, ts, vals)])


def _knative(w: _Writer) -> None:
    o = w.o
    rows = o.hpa[np.isin(np.round(o.hpa[:, 0], 6), np.round(w.times, 6))]
    lab = {
        "namespace_name": o.spec.namespace,
        "configuration_name": o.spec.service,
        "revision_name": f"{o.spec.service}-00001",
        "service_name": o.spec.service,
    }
    for name, col in (("autoscaler_desired_pods", 1), ("autoscaler_actual_pods", 3)):
        w.write(name, [({"__name__": name, **lab}, rows[:, 0], rows[:, col])])
