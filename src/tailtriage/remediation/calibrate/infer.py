"""What the telemetry says about the deployment itself, for a calibration without ``--base``.

A capture carries facts a scenario file would otherwise have to state:

* the model, from ``gen_ai.request.model`` / ``gen_ai.response.model`` span attributes (the
  request table's ``model``) and vLLM's ``model_name`` metric label; its weight dtype from a
  quantisation suffix of that name (``-FP8``, ``-AWQ``, ...);
* the GPU type and GPUs per pod, from DCGM's ``modelName`` and ``gpu`` labels;
* whether an HPA scales the deployment (``kube_horizontalpodautoscaler_*`` series or HPA
  events) - without either the replica count is fixed, not the simulator's default HPA;
* the gateway's per-replica concurrency limit, from the ``gateway_queue`` stage: a request
  that waited there left the queue when a slot on its replica freed, so the requests in flight
  on that replica at that moment (dispatched, not finished) were one short of the limit;
* ``max_num_seqs``, when the engine queued while running a constant maximum
  (``vllm:num_requests_running`` at its highest while ``vllm:num_requests_waiting`` > 0).

Each returns the settings it inferred (dotted keys of :func:`simulator.apply_overrides`) and a
record of the evidence, which the calibration's ``FitQuality`` keeps."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

import numpy as np
import pyarrow.compute as pc

from tailtriage.model import Capture
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
    if shape:
        out["model.name"] = shape
        out["model.dtype"] = dtype or "bf16"
    if gpu:
        out["gpu.type"] = gpu
        if GPUS[gpu].nvlink_gb_s <= 0:
            out["gpu.interconnect"] = "pcie"
    if tp > 1:
        out["gpu.tp"] = tp
    part = {"model_names": names[:5], "gpu": gpu, "gpus_per_pod": tp or None, "set": out}
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
    gq = st.filter(pc.equal(st["stage"], "gateway_queue"))
    n_req = capture.requests.num_rows
    waited = gq.filter(pc.greater(gq["duration"], GATEWAY_WAIT_S))
    if waited.num_rows < max(20, GATEWAY_SHARE * n_req):
        return {}, {"note": "no material gateway queueing", "waited": waited.num_rows}
    rq = capture.requests
    ids = rq["request_id"].to_pylist()
    replica = np.asarray([r or "" for r in rq["replica"].to_pylist()], dtype=object)
    arrival = rq["arrival"].to_numpy(zero_copy_only=False).astype(np.float64)
    finish = rq["finish"].to_numpy(zero_copy_only=False).astype(np.float64)
    index = {r: i for i, r in enumerate(ids)}
    # dispatch = end of the gateway wait (else the arrival: no wait)
    dispatch = arrival.copy()
    for rid, s, d in zip(
        gq["request_id"].to_pylist(),
        gq["start"].to_pylist(),
        gq["duration"].to_pylist(),
        strict=True,
    ):
        i = index.get(rid)
        if i is not None:
            dispatch[i] = max(dispatch[i], s + d)
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
    se = capture.series
    sel = se.filter(pc.equal(se["metric"], metric)) if se.num_rows else se
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


def infer_engine(capture: Capture) -> tuple[dict[str, Any], dict[str, Any]]:
    """``max_num_seqs`` when the engine queued at a constant ceiling of running sequences."""
    running = _gauge(capture, "vllm:num_requests_running")
    waiting = _gauge(capture, "vllm:num_requests_waiting")
    if not running or not waiting:
        return {}, {"note": "no running/waiting gauges"}
    top = max(running.values())
    at_top = [k for k, v in running.items() if v >= top]
    queued = [k for k in at_top if waiting.get(k, 0.0) > 0]
    if top < 1 or len(queued) < 3:
        return {}, {"note": "the engine never queued at its running ceiling", "max_running": top}
    return {"engine.max_num_seqs": int(top)}, {"max_running": top, "queued_samples": len(queued)}
