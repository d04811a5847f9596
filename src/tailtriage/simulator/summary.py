"""A compact summary of a simulated capture (what ``tailtriage simulate --json`` writes).

Percentiles, never averages, for latency; throughput; stage means; and the decomposition of
the p95 TTFT: the mean of every stage over the requests whose TTFT lies in the p93-p97 band,
so the stage figures add up to (about) the p95 itself (analysis-anchors.md 5.4 (a)).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tailtriage.model.capture import Capture
from tailtriage.model.vocabulary import PRE_FIRST_TOKEN_STAGES, STAGES

PERCENTILES = (50, 90, 95, 99)


def _window_mask(req: pa.Table, window: tuple[float, float] | None) -> np.ndarray:
    arrival = req["arrival"].to_numpy()
    if window is None:
        return np.ones(len(arrival), dtype=bool)
    mask: np.ndarray = (arrival >= window[0]) & (arrival < window[1])
    return mask


def _pcts(values: np.ndarray) -> dict[str, float | None]:
    values = values[~np.isnan(values)]
    if len(values) == 0:
        return {f"p{p}_ms": None for p in PERCENTILES}
    q = np.percentile(values, PERCENTILES)
    return {f"p{p}_ms": round(float(v) * 1e3, 3) for p, v in zip(PERCENTILES, q, strict=True)}


def stage_matrix(capture: Capture) -> tuple[list[str], np.ndarray]:
    """(request ids in table order, requests x STAGES seconds)."""
    req_ids = capture.requests["request_id"].to_pylist()
    pos = {r: i for i, r in enumerate(req_ids)}
    mat = np.zeros((len(req_ids), len(STAGES)))
    st = capture.stages
    rows = np.array([pos[r] for r in st["request_id"].to_pylist()], dtype=np.int64)
    col_of = {s: j for j, s in enumerate(STAGES)}
    cols = np.array([col_of[s] for s in st["stage"].to_pylist()], dtype=np.int64)
    np.add.at(mat, (rows, cols), st["duration"].to_numpy())
    return req_ids, mat


def summarize(capture: Capture, window: tuple[float, float] | None = None) -> dict[str, Any]:
    """Summary over requests arriving in ``window`` (unix seconds; None = all)."""
    req = capture.requests
    mask = _window_mask(req, window)
    ok = mask & (req["status"].to_numpy(zero_copy_only=False) == "ok")
    ttft = pc.fill_null(req["ttft"], np.nan).to_numpy()
    e2e = pc.fill_null(req["e2e"], np.nan).to_numpy()
    arrival = req["arrival"].to_numpy()
    out_tok = req["output_tokens"].to_numpy()
    _, mat = stage_matrix(capture)
    span = (window[1] - window[0]) if window else float(np.ptp(arrival)) if len(arrival) else 0.0
    n_ok = int(ok.sum())
    result: dict[str, Any] = {
        "requests": int(mask.sum()),
        "ok": n_ok,
        "failed": int(mask.sum()) - n_ok,
        "window": list(window) if window else None,
        "throughput_rps": round(n_ok / span, 3) if span > 0 else None,
        "output_tokens_per_s": round(float(out_tok[ok].sum()) / span, 1) if span > 0 else None,
        "ttft": _pcts(ttft[ok]),
        "e2e": _pcts(e2e[ok]),
        "stage_mean_ms": {
            s: round(float(mat[ok, j].mean()) * 1e3, 3)
            for j, s in enumerate(STAGES)
            if n_ok and mat[ok, j].any()
        },
        "ttft_p95_decomposition_ms": _band(ttft, mat, ok),
    }
    return result


def _band(ttft: np.ndarray, mat: np.ndarray, ok: np.ndarray) -> dict[str, float]:
    """Stage means over the requests with TTFT in the p93-p97 band."""
    vals = ttft[ok]
    if len(vals) < 20:
        return {}
    lo, hi = np.percentile(vals, [93, 97])
    band = ok & (ttft >= lo) & (ttft <= hi)
    before = set(PRE_FIRST_TOKEN_STAGES) - {"unattributed"}
    out: dict[str, float] = {
        s: round(float(mat[band, j].mean()) * 1e3, 3) for j, s in enumerate(STAGES) if s in before
    }
    out = {k: v for k, v in out.items() if v > 0}
    out["execution"] = round(out.get("engine_queue", 0.0) + out.get("prefill", 0.0), 3)
    return out
