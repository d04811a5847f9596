"""What the telemetry says about the deployment itself, for a calibration without ``--base``.

A capture carries facts a scenario file would otherwise have to state:

* the model, from ``gen_ai.request.model`` / ``gen_ai.response.model`` span attributes (the
  request table's ``model``) and vLLM's ``model_name`` metric label; its weight dtype from a
  quantisation suffix of that name (``-FP8``, ``-AWQ``, ...);
* the GPU type and GPUs per pod, from DCGM's ``modelName`` and ``gpu`` labels;
* whether an HPA scales the deployment (``kube_horizontalpodautoscaler_*`` series or HPA
  events) - without either the replica count is fixed, not the simulator's default HPA;
* the gateway's routing: least-outstanding routing sends nearly every request to a replica
  with the fewest requests in flight, random routing only now and then;
* the gateway's per-replica concurrency limit, from the ``gateway_queue`` stage: a request
  that waited there left the queue when a slot on its replica freed, so the requests in flight
  on that replica at that moment (dispatched, not finished) were one short of the limit;
* ``max_num_seqs``, when the engine queued while running a constant maximum
  (``vllm:num_requests_running`` at its highest while ``vllm:num_requests_waiting`` > 0);
* ``max_num_batched_tokens``, when no iteration exceeded a bucket of
  ``vllm:iteration_tokens_total`` although many prompts were longer;
* the KV cache's size in blocks, from ``vllm:kv_cache_usage_perc`` and the tokens the
  requests in flight held;
* the GPU nodes free for new pods, when pods waited for a node (pod events).

Each returns the settings it inferred (dotted keys of :func:`simulator.apply_overrides`) and a
record of the evidence, which the calibration's ``FitQuality`` keeps."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tailtriage.model import Capture
from tailtriage.remediation.calibrate.observed import spellings
from tailtriage.remediation.calibrate.shapes import estimate_shape, model_shape
from tailtriage.simulator.config import PodsConfig
from tailtriage.simulator.steptime import GPUS, MODELS

#: a gateway wait shorter than this is dispatch noise, not a wait for a slot
GATEWAY_WAIT_S = 1e-3
#: share of requests that must have waited at the gateway before a limit is inferred
GATEWAY_SHARE = 0.01

_DTYPES = (("fp8", "fp8"), ("awq", "awq"), ("gptq", "gptq"), ("int8", "int8"), ("int4", "int4"))


def _norm(text: str) -> str:
    return re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-")


def model_of(names: Iterable[str]) -> tuple[str | None, str | None]:
    """(simulator model shape, weight dtype) of the most specific known name in ``names``."""
    shapes = sorted(MODELS, key=len, reverse=True)
    for raw in names:
        name = _norm(raw.rsplit("/", 1)[-1])
        for shape in shapes:
            if name == shape or name.startswith(shape + "-") or f"-{shape}-" in f"-{name}-":
                dtype = next((d for tag, d in _DTYPES if re.search(rf"\b{tag}\b", name)), None)
                return shape, dtype
    return None, None


def model_dtype(name: str) -> str:
    """The weights' dtype a served name states (``...-FP8``, ``...-AWQ``), else bf16."""
    text = _norm(name)
    return next((d for tag, d in _DTYPES if re.search(rf"\b{tag}\b", text)), "bf16")


def gpu_of(names: Iterable[str]) -> str | None:
    """Simulator GPU type of a DCGM ``modelName`` such as ``NVIDIA H100 80GB HBM3``."""
    for raw in names:
        text = raw.upper().replace("NVIDIA", " ")
        for gpu in sorted(GPUS, key=len, reverse=True):
            base, _, mem = gpu.partition("-")
            if re.search(rf"\b{re.escape(base)}\b", text) and (not mem or mem in text):
                if not mem and base == "A100" and "40GB" in text:
                    return "A100-40GB"
                return gpu
    return None


def _labels(capture: Capture, prefix: str) -> list[dict[str, str]]:
    se = capture.series
    if se.num_rows == 0:
        return []
    sel = se.filter(pc.starts_with(se["metric"], prefix))
    out = []
    for text in pc.unique(sel["labels"]).to_pylist():
        try:
            d = json.loads(text)
        except (TypeError, ValueError):
            continue
        if isinstance(d, dict):
            out.append({str(k): str(v) for k, v in d.items()})
    return out


def infer_hardware(capture: Capture) -> tuple[dict[str, Any], dict[str, Any]]:
    """Model, dtype, GPU type and GPUs per pod the telemetry names."""
    names = [m for m in pc.unique(capture.requests["model"]).to_pylist() if m]
    names += sorted({d["model_name"] for d in _labels(capture, "vllm:") if d.get("model_name")})
    shape, dtype = model_of(names)
    dcgm = _labels(capture, "DCGM_")
    gpu = gpu_of(sorted({d["modelName"] for d in dcgm if d.get("modelName")}))
    per_pod: dict[str, set[str]] = {}
    for d in dcgm:
        if d.get("pod") and "gpu" in d:
            per_pod.setdefault(d["pod"], set()).add(d["gpu"])
    tp = max((len(v) for v in per_pod.values()), default=0)
    out: dict[str, Any] = {}
    estimated = None if shape else estimate_shape(names)
    if shape:
        out["model.name"] = shape
        out["model.dtype"] = dtype or "bf16"
    elif estimated is not None:  # outside the catalog: its shape from its name (.shapes)
        s = estimated.shape
        out["model.name"] = s.name.rsplit("/", 1)[-1]
        out["model.dtype"] = model_dtype(s.name)
        out.update({"model.params_b": s.params_b, "model.layers": s.layers,
                    "model.hidden": s.hidden, "model.heads": s.heads,
                    "model.kv_heads": s.kv_heads})  # fmt: skip
    if gpu:
        out["gpu.type"] = gpu
        if not GPUS[gpu].has_nvlink:
            out["gpu.interconnect"] = "pcie"
    if tp > 1:
        out["gpu.tp"] = tp
    part = {"model_names": names[:5], "gpu": gpu, "gpus_per_pod": tp or None, "set": out}
    if estimated is not None:
        part["shape_from"] = estimated.template
    return out, part


def infer_hpa(capture: Capture) -> tuple[dict[str, Any], dict[str, Any]]:
    """``hpa.enabled: false`` when nothing in the capture shows an autoscaler."""
    se, ev = capture.series, capture.events
    hpa_series = se.num_rows > 0 and bool(
        pc.any(pc.starts_with(se["metric"], "kube_horizontalpodautoscaler_")).as_py()
    )
    hpa_events = ev.num_rows > 0 and bool(
        pc.any(pc.equal(ev["object_kind"], "HorizontalPodAutoscaler")).as_py()
    )
    if hpa_series or hpa_events:
        return {}, {"hpa": "seen"}
    return {"hpa.enabled": False}, {"hpa": "no HPA series or events: fixed replica count"}


def infer_gateway(capture: Capture) -> tuple[dict[str, Any], dict[str, Any]]:
    """The per-replica concurrency limit the ``gateway_queue`` stage shows (see module doc)."""
    st = capture.stages
    if st.num_rows == 0:
        return {}, {"note": "no stages"}
    # a request held at the gateway shows as gateway_queue, or as pending while new capacity
    # is on its way: either way it waited for a slot under the limit
    gq = st.filter(pc.is_in(st["stage"], pa.array(["gateway_queue", "pending"])))
    n_req = capture.requests.num_rows
    waited = gq.filter(pc.greater(gq["duration"], GATEWAY_WAIT_S))
    if waited.num_rows < max(20, GATEWAY_SHARE * n_req):
        return {}, {"note": "no material gateway queueing", "waited": waited.num_rows}
    rq = capture.requests
    index = {r: i for i, r in enumerate(rq["request_id"].to_pylist())}
    replica = np.asarray([r or "" for r in rq["replica"].to_pylist()], dtype=object)
    arrival = rq["arrival"].to_numpy(zero_copy_only=False).astype(np.float64)
    finish = rq["finish"].to_numpy(zero_copy_only=False).astype(np.float64)
    dispatch = _dispatch_times(capture, arrival)
    exits = [
        (index[rid], s + d)
        for rid, s, d in zip(
            waited["request_id"].to_pylist(),
            waited["start"].to_pylist(),
            waited["duration"].to_pylist(),
            strict=True,
        )
        if rid in index
    ]
    counts: list[int] = []
    for name in sorted({replica[i] for i, _ in exits} - {""}):
        on = (replica == name) & np.isfinite(finish)
        starts, ends = np.sort(dispatch[on]), np.sort(finish[on])
        times = np.array([t for i, t in exits if replica[i] == name])
        # in flight just before t: dispatched before t, not finished by t (the request
        # leaving the queue at t is not counted; the one whose slot it takes has finished)
        counts += (
            np.searchsorted(starts, times, side="left") - np.searchsorted(ends, times, "right")
        ).tolist()
    if len(counts) < 20:
        return {}, {"note": "waits not attributable to replicas", "waited": waited.num_rows}
    limit = int(np.median(counts)) + 1
    part = {"waited": waited.num_rows, "limit": limit, "inflight_at_release_p10_p90": [
        float(np.percentile(counts, 10)), float(np.percentile(counts, 90))]}  # fmt: skip
    return ({"gateway.concurrency_limit": limit} if limit >= 1 else {}), part


def _gauge(capture: Capture, metric: str) -> dict[tuple[str, float], float]:
    """(pod, time) -> value of ``metric``, under any of its spellings (``observed.spellings``)."""
    se = capture.series
    sel = se.filter(pc.is_in(se["metric"], pa.array(spellings(metric)))) if se.num_rows else se
    out: dict[tuple[str, float], float] = {}
    for lab, t, v in zip(
        sel["labels"].to_pylist(), sel["time"].to_pylist(), sel["value"].to_pylist(), strict=True
    ):
        try:
            pod = str(json.loads(lab).get("pod", ""))
        except (TypeError, ValueError, AttributeError):
            pod = ""
        out[(pod, float(t))] = float(v)
    return out


#: scrapes with requests waiting at the running ceiling that show it is the ceiling
CEILING_QUEUED_SAMPLES = 3
#: waiting requests at the ceiling that are not a request caught between two steps
CEILING_QUEUE_MIN = 2.0
#: KV-cache use below which a queue did not wait for blocks (the rules' "full" is 0.9)
CEILING_KV_ROOM = 0.9


def infer_engine(capture: Capture) -> tuple[dict[str, Any], dict[str, Any]]:
    """``max_num_seqs`` when the engine queued at a constant ceiling of running sequences:
    requests waiting at the highest running count in ``CEILING_QUEUED_SAMPLES`` scrapes, or
    a ceiling reached in two scrapes (two pods, or twice) with a real queue at it while the
    KV cache had room - a burst shorter than the scrape interval shows once at most, and a
    ceiling left unread replays the burst with the default 256 slots and no queue at all."""
    running = _gauge(capture, "vllm:num_requests_running")
    waiting = _gauge(capture, "vllm:num_requests_waiting")
    if not running or not waiting:
        return {}, {"note": "no running/waiting gauges"}
    top = max(running.values())
    at_top = [k for k, v in running.items() if v >= top]
    queued = [k for k in at_top if waiting.get(k, 0.0) > 0]
    kv = _gauge(capture, "vllm:kv_cache_usage_perc")
    # a queue at the ceiling with room in the cache waited for a sequence slot, not for blocks
    slot_bound = [
        k
        for k in queued
        if waiting[k] >= CEILING_QUEUE_MIN and kv.get(k, math.inf) < CEILING_KV_ROOM
    ]
    repeated = len(at_top) >= 2 and bool(slot_bound)
    if top < 1 or (len(queued) < CEILING_QUEUED_SAMPLES and not repeated):
        return {}, {"note": "the engine never queued at its running ceiling", "max_running": top}
    part = {"max_running": top, "queued_samples": len(queued), "slot_bound": len(slot_bound)}
    return {"engine.max_num_seqs": int(top)}, part


_RESCALE = re.compile(r"reason:\s*(.+?)\s+(above|below) target", re.IGNORECASE)


def _hpa_metric_names(capture: Capture) -> list[str]:
    """Metrics the HPA scaled on: ``spec_target_metric`` labels, else rescale event reasons."""
    names = [
        d["metric_name"]
        for d in _labels(capture, "kube_horizontalpodautoscaler_spec_target_metric")
        if d.get("metric_name")
    ]
    ev = capture.events
    if not names and ev.num_rows:
        sel = ev.filter(pc.equal(ev["kind"], "hpa_rescale"))
        for msg in sel["message"].to_pylist():
            m = _RESCALE.search(str(msg or ""))
            if m and "all metrics" not in m.group(1).lower():
                names.append(m.group(1).strip())
    out = []
    for n in names:
        n = "cpu" if n.lower().startswith("cpu") else n
        if n not in out:
            out.append(n)
    return out


def rescale_events(capture: Capture) -> tuple[tuple[float, int, int | None], ...]:
    """The autoscaler's rescale events in time order: (time, new size, the previous size where
    the event names it).  An event whose size does not read as a number is skipped."""
    ev = capture.events
    if ev.num_rows == 0:
        return ()
    sel = ev.filter(pc.equal(ev["kind"], "hpa_rescale")).sort_by("time")
    out = []
    for t, attrs in zip(sel["time"].to_pylist(), sel["attributes"].to_pylist(), strict=True):
        try:
            a = json.loads(attrs or "{}")
            size = int(a.get("replicas"))
            previous = int(a["previous"]) if a.get("previous") is not None else None
        except (TypeError, ValueError):
            continue
        out.append((float(t), size, previous))
    return tuple(out)


def _target_from_events(capture: Capture, metric: str) -> float | None:
    """An HPA's per-pod target of ``metric`` from its scale-ups: it sets ``desired =
    ceil(sum of the metric over pods / target)``, so the metric's sum just before each rescale
    over the new size bounds the target from below (and over one pod less, from above)."""
    if metric == "cpu":  # utilisation of the pods' CPU request (the simulator's default)
        request = PodsConfig().cpu_request_cores
        gauge = {
            (pod, float(t)): float(c) / request
            for pod, (ends, cores) in _cpu_rates(capture).items()
            for t, c in zip(ends, cores, strict=True)
        }
    else:
        gauge = _gauge(capture, metric)
    events = rescale_events(capture)
    if not gauge or not events:
        return None
    times = np.array(sorted({t for _, t in gauge}))
    current = _series_first_value(capture, "kube_horizontalpodautoscaler_status_current_replicas")
    estimates = []
    for t, desired, named in events:
        previous = int(named or current or 0)
        current = desired
        k = int(np.searchsorted(times, t, side="right")) - 1
        if desired <= max(previous, 1) or k < 0:
            continue
        # each pod's latest value at or before the rescale
        latest: dict[str, tuple[float, float]] = {}
        for (pod, at), v in gauge.items():
            if at <= times[k] and (pod not in latest or at > latest[pod][0]):
                latest[pod] = (at, v)
        total = sum(v for at, v in latest.values() if at > times[k] - 60.0)
        if total > 0:
            estimates.append(total / (desired - 0.5))
    return float(np.median(estimates)) if estimates else None


def infer_hpa_settings(capture: Capture) -> tuple[dict[str, Any], dict[str, Any]]:
    """The HPA's metric (and, for an engine gauge, its per-pod target) when it is shown."""
    names = _hpa_metric_names(capture)
    if not names:
        return {}, {"note": "HPA metric not shown"}
    metric = names[0]
    out: dict[str, Any] = {"hpa.metric": metric}
    target_series = _series_values(capture, "kube_horizontalpodautoscaler_spec_target_metric")
    target: float | None = None
    if target_series:
        target = float(target_series[-1])
        if metric == "cpu" and target > 1.5:  # a utilisation in percent
            target /= 100.0
    else:
        target = _target_from_events(capture, metric)
    if target is not None and target > 0:
        out["hpa.target"] = round(target, 3)
    return out, {"metrics": names, "target": target}


def _series_first_value(capture: Capture, metric: str) -> float | None:
    values = _series_values(capture, metric)
    return values[0] if values else None


def _series_values(capture: Capture, metric: str) -> list[float]:
    se = capture.series
    if se.num_rows == 0:
        return []
    sel = se.filter(pc.equal(se["metric"], metric)).sort_by("time")
    return [float(v) for v in sel["value"].to_pylist()]


#: series whose peak is the most pods the autoscaler could ask for, or did
_POD_CEILINGS = (
    "kube_horizontalpodautoscaler_spec_max_replicas",
    "kube_horizontalpodautoscaler_status_desired_replicas",
    "autoscaler_desired_pods",
)


def _room_for_every_pod(
    capture: Capture, gpus_per_pod: int, note: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Nodes enough for every pod the autoscaler could ask for (its ``maxReplicas``, else the
    most pods seen): with no pod seen waiting for a node, a replay must not invent one (the
    simulator's default pool of two 8-GPU nodes holds only four TP4 pods, and the fifth
    would wait for a 4-minute node provision that never happened)."""
    ceiling = max(max(_series_values(capture, m), default=0.0) for m in _POD_CEILINGS)
    pods = {str(r) for r in capture.requests["replica"].to_pylist() if r}
    need = max(int(ceiling), len(pods))
    default = PodsConfig()
    nodes = max(default.nodes, math.ceil(need * max(gpus_per_pod, 1) / default.gpus_per_node))
    out = {"pods.nodes": nodes, "pods.max_nodes": max(default.max_nodes, nodes)}
    return out, {"note": note, "pods": need, **out}


def infer_nodes(capture: Capture, gpus_per_pod: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """GPU nodes the cluster had free: when pods waited for new nodes (pending for longer than
    a scheduler takes, or node scale-up events), the nodes that hosted the pods scheduled
    at once were all there was, with as many pods per node as any node ran.  Otherwise,
    room for every pod the autoscaler could ask for."""
    ev = capture.events
    if ev.num_rows == 0:
        return _room_for_every_pod(capture, gpus_per_pod, "no events")
    pend = ev.filter(pc.equal(ev["kind"], "pod_pending"))
    rows = [
        (d, json.loads(a or "{}"))
        for d, a in zip(pend["duration"].to_pylist(), pend["attributes"].to_pylist(), strict=True)
        if d is not None
    ]
    slow = [a for d, a in rows if d >= 30.0]
    scale_ups = int(pc.sum(pc.equal(ev["kind"], "node_scale_up")).as_py() or 0)
    if not slow and not scale_ups:
        return _room_for_every_pod(capture, gpus_per_pod, "no pod waited for a node")
    per_node: dict[str, int] = {}
    for _, a in rows:
        if a.get("node"):
            per_node[str(a["node"])] = per_node.get(str(a["node"]), 0) + 1
    quick = {str(a["node"]) for d, a in rows if d < 30.0 and a.get("node")}
    if not per_node or not quick:
        return {}, {"note": "pod events name no nodes"}
    pods_per_node = max(per_node.values())
    out = {"pods.gpus_per_node": pods_per_node * max(gpus_per_pod, 1), "pods.nodes": len(quick)}
    return out, {"slow_pending": len(slow), "node_scale_ups": scale_ups, **out}


def infer_token_budget(capture: Capture) -> tuple[dict[str, Any], dict[str, Any]]:
    """``max_num_batched_tokens`` from ``vllm:iteration_tokens_total``: when no iteration
    exceeded a bucket bound although many prompts are longer, the budget chunked them there."""
    se = capture.series
    if se.num_rows == 0:
        return {}, {"note": "no series"}
    sel = se.filter(pc.equal(se["metric"], "vllm:iteration_tokens_total_bucket"))
    if sel.num_rows == 0:
        return {}, {"note": "no iteration-tokens histogram"}
    last: dict[tuple[str, str], tuple[float, float]] = {}
    for lab, t, v in zip(
        sel["labels"].to_pylist(), sel["time"].to_pylist(), sel["value"].to_pylist(), strict=True
    ):
        d = json.loads(lab)
        key = (str(d.get("pod", "")), str(d.get("le", "")))
        if key not in last or t > last[key][0]:
            last[key] = (t, v)
    per_le: dict[float, float] = {}
    for (_, le), (_, v) in last.items():
        bound = math.inf if le in ("+Inf", "inf", "Inf") else float(le)
        per_le[bound] = per_le.get(bound, 0.0) + v
    total = per_le.get(math.inf, 0.0)
    bounds = sorted(b for b in per_le if math.isfinite(b))
    full = next((b for b in bounds if per_le[b] >= total > 0), None)
    prompts = capture.requests["prompt_tokens"].to_numpy(zero_copy_only=False).astype(float)
    prompts = prompts[np.isfinite(prompts)]
    if full is None or prompts.size == 0:
        return {}, {"note": "iterations reach the top bucket"}
    longer = float((prompts > full).mean())
    part = {"max_iteration_bucket": full, "prompts_longer_share": longer}
    if longer < 0.05:
        return {}, {**part, "note": "prompts fit: the budget is not what capped iterations"}
    return {"engine.max_num_batched_tokens": int(full)}, part


#: share of requests sent to a least-loaded replica above which routing is least-outstanding
LEAST_LOADED_SHARE = 0.8


def infer_routing(capture: Capture) -> tuple[dict[str, Any], dict[str, Any]]:
    """``gateway.routing``: least_outstanding when nearly every request went to a replica with
    the fewest requests in flight at its dispatch, random when that was no more often than
    chance would have it (among replicas serving at the time)."""
    rq = capture.requests
    replica = np.asarray([r or "" for r in rq["replica"].to_pylist()], dtype=object)
    arrival = rq["arrival"].to_numpy(zero_copy_only=False).astype(np.float64)
    finish = rq["finish"].to_numpy(zero_copy_only=False).astype(np.float64)
    dispatch = _dispatch_times(capture, arrival)
    names = sorted(set(replica.tolist()) - {""})
    ok = np.isfinite(finish) & (replica != "")
    if len(names) < 2 or ok.sum() < 200:
        return {}, {"note": "fewer than two replicas"}
    t = dispatch[ok]
    load = np.empty((len(names), t.size))
    active = np.empty((len(names), t.size), dtype=bool)
    for j, name in enumerate(names):
        on = ok & (replica == name)
        starts, ends = np.sort(dispatch[on]), np.sort(finish[on])
        load[j] = np.searchsorted(starts, t, side="left") - np.searchsorted(ends, t, "right")
        active[j] = (t >= starts[0]) & (t <= ends[-1])
    load = np.where(active, load, np.inf)
    chosen = np.searchsorted(np.array(names, dtype=object), replica[ok])
    least = load[chosen, np.arange(t.size)] <= load.min(axis=0)
    share = float(least.mean())
    # chance: the share of active replicas at the minimum, averaged
    chance = float(np.mean((load <= load.min(axis=0)).sum(axis=0) / active.sum(axis=0)))
    part = {"least_loaded_share": share, "chance_share": chance}
    if share >= LEAST_LOADED_SHARE:
        return {"gateway.routing": "least_outstanding"}, part
    if share <= chance + 0.1:
        return {"gateway.routing": "random"}, part
    return {}, {**part, "note": "neither least-loaded nor random"}


def _dispatch_times(capture: Capture, arrival: Any) -> Any:
    """When each request left the gateway: the end of its gateway wait, else its arrival."""
    st = capture.stages
    dispatch = np.array(arrival, dtype=np.float64)
    if st.num_rows == 0:
        return dispatch
    gq = st.filter(pc.is_in(st["stage"], pa.array(["gateway_queue", "pending"])))
    index = {r: i for i, r in enumerate(capture.requests["request_id"].to_pylist())}
    for rid, s, d in zip(
        gq["request_id"].to_pylist(), gq["start"].to_pylist(), gq["duration"].to_pylist(),
        strict=True,
    ):  # fmt: skip
        i = index.get(rid)
        if i is not None:
            dispatch[i] = max(dispatch[i], s + d)
    return dispatch


#: KV-cache usage samples below this say too little about the cache's size
KV_USAGE_MIN = 0.05


def infer_kv_blocks(
    capture: Capture, block_size: int = 16, *, sampled: float = 1.0
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``engine.num_gpu_blocks`` from ``vllm:kv_cache_usage_perc``: at each sample, the blocks
    the requests then on that replica held (prompt, prefilled share of it, tokens decoded so
    far) over the usage fraction.  The weights' dtype and the memory headroom, which set the
    cache's size, rarely show otherwise.

    With sampled traces (``sampled`` < 1) the few traced requests on a replica are a sample of
    the sequences it ran: their mean blocks times the running gauge is what the replica held,
    and the cache is the sum of that over the sum of the usage fractions (a ratio estimate:
    one traced request per sample makes single ratios scatter several-fold).  The result is
    then full-rate (``part["full_rate"]``): nothing to divide by the ratio afterwards."""
    from tailtriage.errors import InsufficientDataError
    from tailtriage.remediation.calibrate.steps import engine_timings

    usage = _gauge(capture, "vllm:kv_cache_usage_perc")
    if not usage:
        return {}, {"note": "no KV-cache usage gauge"}
    try:
        t = engine_timings(capture)
    except InsufficientDataError as exc:
        return {}, {"note": str(exc)}
    by_name = {name: i for i, name in enumerate(t.replicas)}
    running = _gauge(capture, "vllm:num_requests_running") if sampled < 1.0 else {}
    estimates, held, fracs = [], [], []
    for (pod, at), frac in usage.items():
        if frac < KV_USAGE_MIN or pod not in by_name:
            continue
        x = at - t.t0
        on = (t.replica == by_name[pod]) & (t.scheduled <= x) & (t.finish > x)
        if not on.any():
            continue
        s, f, e = t.scheduled[on], t.first_token[on], t.finish[on]
        p, o = t.prompt[on], t.output[on]
        prefilled = np.where(x >= f, p, p * (x - s) / np.maximum(f - s, 1e-9))
        decoded = np.where(x > f, o * (x - f) / np.maximum(e - f, 1e-9), 0.0)
        blocks = np.ceil((prefilled + decoded) / block_size).sum()
        estimates.append(blocks / frac)
        if running.get((pod, at), 0.0) >= 1.0:
            held.append(blocks / on.sum() * running[(pod, at)])
            fracs.append(frac)
    if len(estimates) < 5:
        return {}, {"note": "too few KV-cache samples with requests in flight"}
    blocks_est = int(np.median(estimates))
    part = {"samples": len(estimates), "blocks": blocks_est,
            "p10_p90": [float(np.percentile(estimates, 10)), float(np.percentile(estimates, 90))]}  # fmt: skip
    if len(held) >= 5:  # sampled: scaled by the running gauge (see above)
        blocks_est = int(sum(held) / sum(fracs))
        part.update(blocks=blocks_est, full_rate=True, gauge_samples=len(held))
    return {"engine.num_gpu_blocks": blocks_est}, part


def dtype_from_kv(settings: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The weights' dtype the KV cache's size implies: vLLM gives the cache what the weights
    leave of the GPUs' memory, so with a known model, GPU and GPU count, the inferred block
    count picks the dtype (only when one candidate explains it within 15 %)."""
    from tailtriage.errors import ConfigError
    from tailtriage.simulator.steptime import kv_cache_blocks

    blocks = settings.get("engine.num_gpu_blocks")
    gpu = settings.get("gpu.type")
    shape = model_shape(settings)
    if not blocks or shape is None or gpu not in GPUS:
        return {}, {"note": "model, GPU or KV-cache size unknown"}
    gpus = int(settings.get("gpu.tp", 1))
    errors: dict[str, float] = {}
    for dtype in ("bf16", "fp8", "awq"):
        try:
            want = kv_cache_blocks(shape, GPUS[gpu], gpus=gpus, dtype=dtype)
        except ConfigError:
            continue
        errors[dtype] = abs(math.log(want / blocks)) if want > 0 else math.inf
    if not errors:
        return {}, {"note": "no dtype fits"}
    best = min(errors, key=lambda d: errors[d])
    part = {"log_error": {k: round(v, 3) for k, v in errors.items()}, "dtype": best}
    if errors[best] > math.log(1.15):
        return {}, {**part, "note": "no dtype explains the KV-cache size"}
    return {"model.dtype": best}, part


def _cpu_rates(capture: Capture) -> dict[str, tuple[Any, Any]]:
    """Per pod: (interval ends, cores used over each interval) from the CPU usage counter."""
    se = capture.series
    if se.num_rows == 0:
        return {}
    sel = se.filter(pc.equal(se["metric"], "container_cpu_usage_seconds_total"))
    rows: dict[str, list[tuple[float, float]]] = {}
    for lab, t, v in zip(
        sel["labels"].to_pylist(), sel["time"].to_pylist(), sel["value"].to_pylist(), strict=True
    ):
        try:
            pod = str(json.loads(lab).get("pod", ""))
        except (TypeError, ValueError, AttributeError):
            continue
        rows.setdefault(pod, []).append((float(t), float(v)))
    out = {}
    for pod, pts in rows.items():
        pts.sort()
        t = np.array([p[0] for p in pts])
        v = np.array([p[1] for p in pts])
        dt, dv = np.diff(t), np.diff(v)
        ok = (dt > 0) & (dv >= 0)  # a counter reset (restart) is no sample
        out[pod] = (t[1:][ok], (dv / np.where(dt > 0, dt, 1.0))[ok], dt[ok])
    return {k: (a, b) for k, (a, b, _) in out.items()}


def infer_cpu(capture: Capture) -> tuple[dict[str, Any], dict[str, Any]]:
    """``cpu.*``: cores a pod uses = base + per request finished + per token processed, fitted
    (non-negative least squares) to the CPU counter's rate per scrape interval against the
    requests each pod finished and the tokens it processed in that interval."""
    from scipy.optimize import nnls

    rates = _cpu_rates(capture)
    rq = capture.requests
    replica = np.asarray([r or "" for r in rq["replica"].to_pylist()], dtype=object)
    finish = rq["finish"].to_numpy(zero_copy_only=False).astype(np.float64)
    first = rq["first_token"].to_numpy(zero_copy_only=False).astype(np.float64)
    prompt = rq["prompt_tokens"].to_numpy(zero_copy_only=False).astype(np.float64)
    output = rq["output_tokens"].to_numpy(zero_copy_only=False).astype(np.float64)
    rows: list[tuple[float, float, float, float]] = []
    for pod, (ends, cores) in rates.items():
        on = (replica == pod) & np.isfinite(finish) & np.isfinite(first)
        if not on.any() or ends.size < 4:
            continue
        f, ft = finish[on], first[on]
        tokens_at_first = np.nan_to_num(prompt[on]) + 1.0  # prompt prefilled by the first token
        later = np.nan_to_num(output[on]) - 1.0
        starts = np.concatenate([[ends[0] - np.median(np.diff(ends))], ends[:-1]])
        for a, b, c in zip(starts, ends, cores, strict=True):
            done = float(((f >= a) & (f < b)).sum())
            prefill = float(tokens_at_first[(ft >= a) & (ft < b)].sum())
            # decode tokens spread evenly over each request's decode
            span = np.maximum(f - ft, 1e-9)
            overlap = np.clip(np.minimum(f, b) - np.maximum(ft, a), 0.0, None)
            decode = float((later * overlap / span).sum())
            rows.append((float(c * (b - a)), done, prefill + decode, float(b - a)))
    if len(rows) < 10:
        return {}, {"note": "no CPU usage counter matched to the pods' requests"}
    m = np.array(rows, dtype=np.float64)
    y, design = m[:, 0], np.column_stack([m[:, 3], m[:, 1], m[:, 2]])
    scale = np.maximum(design.max(axis=0), 1e-12)
    coef, _ = nnls(design / scale, y)
    base, per_req, per_tok = (coef / scale).tolist()
    pred = design @ (coef / scale)
    r2 = 1.0 - float(((y - pred) ** 2).sum()) / max(float(((y - y.mean()) ** 2).sum()), 1e-30)
    part = {"n": len(rows), "r2": r2, "base_cores": base, "per_request_core_s": per_req,
            "per_token_core_s": per_tok}  # fmt: skip
    if r2 < 0.5:
        return {}, {**part, "note": "CPU use not explained by the load"}
    return {"cpu.base_cores": base, "cpu.per_request_core_s": per_req,
            "cpu.per_token_core_s": per_tok}, part  # fmt: skip
