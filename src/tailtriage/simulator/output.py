"""Turn a finished simulation's recorder into a Capture (vectorised over requests)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import orjson

from tailtriage.model.capture import Capture, FileProvenance, Metadata
from tailtriage.model.schema import EVENTS, REQUESTS, SERIES, STAGES, TOKEN_TIMES, make_table
from tailtriage.simulator.config import ScenarioConfig

if TYPE_CHECKING:
    from tailtriage.simulator.recorder import Recorder
    from tailtriage.simulator.simulation import Simulation

TOKEN_TIMES_AUTO_LIMIT = 20_000
#: status code -> (status, error class, HTTP status)
STATUS = {
    1: ("ok", None, 200),
    2: ("error", "rejected", 503),
    3: ("timeout", "timeout", 504),
    4: ("error", "pod_terminated", 502),
}
#: stage k runs from boundary k to boundary k+1 (index 1 is the gateway wait)
STAGE_NAMES = ("ingress", "wait", "api_server", "engine_queue", "prefill", "decode")


def incident_window(cfg: ScenarioConfig) -> tuple[float, float] | None:
    """Ground-truth incident window in seconds after the start (config or the phase named
    ``incident``)."""
    if cfg.incident_s:
        return (cfg.incident_s[0], cfg.incident_s[1])
    t = 0.0
    for ph in cfg.workload:
        if ph.name == "incident":
            return (t, t + ph.duration_s)
        t += ph.duration_s
    return None


def build_capture(rec: Recorder, sim: Simulation) -> Capture:
    cfg = rec.cfg
    t0 = cfg.start_unix_s
    open_ = rec.status == 0
    rec.status[open_] = 3
    # a run stopped early (``output.stop_after_arrivals_s``) has requests that have not
    # reached the gateway yet: they time out there
    rec.finish[open_] = np.maximum(sim.now, rec.gw[open_])
    first_sched = np.array(
        [s.first_scheduled if s is not None and s.first_scheduled is not None else np.nan
         for s in sim.seqs],
        dtype=np.float64,
    )  # fmt: skip
    bounds = np.column_stack(
        [rec.arrival, rec.gw, rec.dispatch, rec.engine_arrival, first_sched, rec.first_token,
         rec.finish]
    )  # fmt: skip
    requests = _requests(rec, sim, bounds, t0)
    stages = _stages(rec, bounds, t0)
    token_times = _token_times(rec, sim, t0)
    series = make_table(SERIES, {**rec.series, "source": ["simulator"] * len(rec.series["time"])})
    events = _events(rec, t0)
    window = incident_window(cfg)
    extra: dict[str, Any] = {
        "scenario": cfg.name,
        "description": cfg.description,
        "root_cause": cfg.root_cause or None,
        "duration_s": cfg.duration_s,
        "incident": [t0 + window[0], t0 + window[1]] if window else None,
        "baseline": [t0, t0 + window[0]] if window and window[0] > 0 else None,
        "config": cfg.to_dict(),
    }
    meta = Metadata(
        producer="tailtriage.simulator",
        provenance=(
            FileProvenance(path=f"scenario:{cfg.name}", format="simulator", records=rec.n),
        ),
        seed=sim.seed,
        extra=extra,
    )
    return Capture(requests=requests, stages=stages, token_times=token_times, series=series,
                   events=events, metadata=meta)  # fmt: skip


def _requests(rec: Recorder, sim: Simulation, b: np.ndarray, t0: float) -> Any:
    n = rec.n
    status = [STATUS[int(s)] for s in rec.status]
    pods = sim.pods
    rep = rec.replica
    names = [pods[r].name if r >= 0 else None for r in rep]
    nodes = [pods[r].node.name if r >= 0 and pods[r].node else None for r in rep]  # type: ignore[union-attr]
    models = [pods[r].template.model_name if r >= 0 else sim.templates[0].model_name for r in rep]
    first = b[:, 5]
    ttft = first - b[:, 0]
    cols: dict[str, Any] = {
        "request_id": [f"req-{i:07d}" for i in range(n)],
        "trace_id": rec.trace_ids,
        "arrival": t0 + b[:, 0],
        "first_token": _nullable(t0 + first),
        "finish": t0 + b[:, 6],
        "ttft": _nullable(ttft),
        "e2e": b[:, 6] - b[:, 0],
        "prompt_tokens": rec.wl.prompt_tokens,
        "output_tokens": _output_done(rec, sim),
        "status": [s[0] for s in status],
        "error": [s[1] for s in status],
        "http_status": [s[2] for s in status],
        "model": models,
        "replica": names,
        "node": nodes,
        "source": ["simulator"] * n,
    }  # fmt: skip
    return make_table(REQUESTS, cols)


def _output_done(rec: Recorder, sim: Simulation) -> np.ndarray:
    """Output tokens delivered (the planned count for completed requests)."""
    out = rec.wl.output_tokens.copy()
    for i in np.nonzero(rec.status != 1)[0]:
        seq = sim.seqs[i]
        out[i] = sum(c for _, c in seq.segments) if seq is not None else 0
    return out


def _nullable(a: np.ndarray) -> list[float | None]:
    return [None if np.isnan(x) else float(x) for x in a]


def _stages(rec: Recorder, b: np.ndarray, t0: float) -> Any:
    known = ~np.isnan(b[:, :6])
    last = 5 - np.argmax(known[:, ::-1], axis=1)  # last milestone reached
    ids, names, starts, durs = [], [], [], []
    wait_names = np.where(rec.wait_kind == 1, "pending", "gateway_queue")
    for k in range(6):
        start = b[:, k]
        end = np.where(k < last, b[:, k + 1], np.where(k == last, b[:, 6], np.nan))
        dur = end - start
        ok = ~np.isnan(dur)
        if k == 1:
            ok &= dur > 0
        idx = np.nonzero(ok)[0]
        ids.append(idx)
        starts.append(t0 + start[idx])
        durs.append(dur[idx])
        names.append(wait_names[idx] if k == 1 else np.full(len(idx), STAGE_NAMES[k]))
    idx = np.concatenate(ids)
    order = np.lexsort((np.concatenate(starts), idx))
    req_ids = np.char.add("req-", np.char.zfill(idx.astype(str), 7))
    cols: dict[str, Any] = {
        "request_id": req_ids[order].tolist(),
        "stage": np.concatenate(names)[order].tolist(),
        "start": np.concatenate(starts)[order],
        "duration": np.concatenate(durs)[order],
    }
    return make_table(STAGES, cols)


def _token_times(rec: Recorder, sim: Simulation, t0: float) -> Any:
    mode = rec.cfg.output.token_times
    if mode == "off" or (mode == "auto" and rec.n > TOKEN_TIMES_AUTO_LIMIT):
        return TOKEN_TIMES.empty_table()
    ends = {p.index: np.asarray(p.step_ends) for p in sim.pods}
    ids, idxs, times = [], [], []
    for i, seq in enumerate(sim.seqs):
        if seq is None or not seq.segments:
            continue
        steps = ends[int(rec.replica[i])]
        tt = np.concatenate([steps[a : a + c] for a, c in seq.segments if c > 0])
        ids.append(np.full(len(tt), i))
        idxs.append(np.arange(len(tt), dtype=np.int32))
        times.append(tt)
    if not ids:
        return TOKEN_TIMES.empty_table()
    all_ids = np.concatenate(ids)
    req = np.char.add("req-", np.char.zfill(all_ids.astype(str), 7))
    n = len(all_ids)
    cols: dict[str, Any] = {
        "request_id": req.tolist(),
        "index": np.concatenate(idxs),
        "time": t0 + np.concatenate(times),
        "tokens": np.ones(n, dtype=np.int32),
    }
    return make_table(TOKEN_TIMES, cols)


def _events(rec: Recorder, t0: float) -> Any:
    ev = sorted(rec.events, key=lambda e: e["time"])  # stable: same-time events keep order
    ns = rec.cfg.output.namespace
    return make_table(EVENTS, {
        "time": [t0 + e["time"] for e in ev],
        "kind": [e["kind"] for e in ev],
        "object_kind": [e["object_kind"] for e in ev],
        "object_name": [e["object_name"] for e in ev],
        "namespace": [ns] * len(ev),
        "reason": [e["reason"] for e in ev],
        "message": [e["message"] for e in ev],
        "duration": [e["duration"] for e in ev],
        "attributes": [orjson.dumps(e["attributes"], option=orjson.OPT_SORT_KEYS).decode()
                       for e in ev],
        "source": ["simulator"] * len(ev),
    })  # fmt: skip
