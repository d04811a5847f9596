"""Hand-built canonical Captures for tests (every engineer's tests may use these).

Two ways to build one:

* request by request, readable, for small known-answer cases::

      cap = make_capture([
          make_request("a", arrival=0.0, stages={"ingress": 0.05, "prefill": 0.2, "decode": 1.0},
                       output_tokens=11, token_times=True),
          make_request("b", arrival=1.0, stages={"pending": 0.3, "prefill": 0.2}),
      ])

* from numpy arrays, vectorised, for big or random captures (Hypothesis, benchmarks)::

      cap = capture_from_arrays(arrival, {"ingress": ing, "prefill": pre, "decode": dec})

Conventions (the same as every source): stages run back to back in the canonical path order of
``model.vocabulary.STAGES`` starting at ``arrival``; ``decode`` starts at the first token, every
other stage before it (``unattributed`` included, it is placed last before the first token);
TTFT = the sum of the pre-first-token stages, e2e = TTFT + decode.  ``first_token``/``finish``
are absolute unix seconds.  Token times (when asked) are single-token chunks, the first at
``first_token``, the rest evenly spread over ``decode`` unless ``token_gaps`` are given.

Metric samples and Kubernetes events go in with :func:`make_series` and :func:`make_events`::

      series = make_series("vllm:num_requests_waiting", [(T0, 0), (T0 + 15, 12)], pod="pod-0")
      events = make_events([(T0 + 5, "hpa_rescale", {"replicas": 3})])
      cap = make_capture(requests, series=series, events=events)"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from tailtriage.model import Capture, Metadata, make_table
from tailtriage.model import schema as S
from tailtriage.model.vocabulary import STAGES

#: stages in the order they are laid out: everything before the first token, then decode
LAYOUT: tuple[str, ...] = (*tuple(s for s in STAGES if s != "decode"), "decode")
T0 = 1_700_000_000.0  # a plausible unix time for arrivals given relative to the capture start


@dataclass(frozen=True)
class RequestSpec:
    """One request, as a test wants to describe it."""

    request_id: str
    arrival: float
    stages: Mapping[str, float] = field(default_factory=dict)  # stage -> seconds
    output_tokens: int = 16
    prompt_tokens: int = 512
    status: str = "ok"
    model: str = "llama-3-8b"
    replica: str = "pod-0"
    node: str = "node-0"
    token_times: bool = False
    token_gaps: tuple[float, ...] | None = None  # gaps after the first token (seconds)

    @property
    def ttft(self) -> float:
        return sum(v for k, v in self.stages.items() if k != "decode")

    @property
    def e2e(self) -> float:
        return self.ttft + self.stages.get("decode", 0.0)


_counter = iter(range(10**9))


def make_request(
    request_id: str | None = None,
    arrival: float = T0,
    stages: Mapping[str, float] | None = None,
    **fields: Any,
) -> RequestSpec:
    """A request with the given stage durations (default: a healthy 400 ms TTFT, 1 s decode)."""
    if stages is None:
        stages = {"ingress": 0.02, "engine_queue": 0.08, "prefill": 0.3, "decode": 1.0}
    unknown = set(stages) - set(STAGES)
    if unknown:
        raise ValueError(f"unknown stages {sorted(unknown)}; use model.vocabulary.STAGES")
    rid = request_id if request_id is not None else f"req-{next(_counter):06d}"
    return RequestSpec(rid, float(arrival), dict(stages), **fields)


def _token_rows(r: RequestSpec, first_token: float) -> list[tuple[str, int, float, int]]:
    if not r.token_times or r.output_tokens < 1:
        return []
    if r.token_gaps is not None:
        gaps = list(r.token_gaps)
    elif r.output_tokens > 1:
        gaps = [r.stages.get("decode", 0.0) / (r.output_tokens - 1)] * (r.output_tokens - 1)
    else:
        gaps = []
    times = first_token + np.concatenate([[0.0], np.cumsum(gaps)])
    return [(r.request_id, i, float(t), 1) for i, t in enumerate(times)]


def make_capture(
    requests: Iterable[RequestSpec] = (),
    *,
    metadata: Metadata | None = None,
    series: pa.Table | None = None,
    events: pa.Table | None = None,
) -> Capture:
    """A Capture holding ``requests`` (their stages laid out back to back)."""
    reqs = list(requests)
    req_cols: dict[str, list[Any]] = {k: [] for k in S.REQUESTS.names}
    stage_rows: list[tuple[str, str, float, float]] = []
    token_rows: list[tuple[str, int, float, int]] = []
    for r in reqs:
        t = r.arrival
        for stage in LAYOUT:
            if stage in r.stages:
                stage_rows.append((r.request_id, stage, t, r.stages[stage]))
                t += r.stages[stage]
        first_token = r.arrival + r.ttft
        row = {
            "request_id": r.request_id,
            "trace_id": None,
            "arrival": r.arrival,
            "first_token": first_token,
            "finish": r.arrival + r.e2e,
            "ttft": r.ttft,
            "e2e": r.e2e,
            "prompt_tokens": r.prompt_tokens,
            "output_tokens": r.output_tokens,
            "status": r.status,
            "error": None if r.status == "ok" else r.status,
            "http_status": 200 if r.status == "ok" else 500,
            "model": r.model,
            "replica": r.replica,
            "node": r.node,
            "source": "builders",
        }
        for k in req_cols:
            req_cols[k].append(row[k])
        token_rows.extend(_token_rows(r, first_token))
    stages = make_table(
        S.STAGES,
        {
            "request_id": [s[0] for s in stage_rows],
            "stage": [s[1] for s in stage_rows],
            "start": [s[2] for s in stage_rows],
            "duration": [s[3] for s in stage_rows],
            "span_name": [s[1] for s in stage_rows],
        },
    )
    tokens = make_table(
        S.TOKEN_TIMES,
        {k: [row[i] for row in token_rows] for i, k in enumerate(S.TOKEN_TIMES.names)},
    )
    extra: dict[str, Any] = {}
    if series is not None:
        extra["series"] = series
    if events is not None:
        extra["events"] = events
    return Capture(
        requests=make_table(S.REQUESTS, req_cols),
        stages=stages,
        token_times=tokens,
        metadata=metadata or Metadata(producer="tests.builders"),
        **extra,
    )


def capture_from_arrays(
    arrival: np.ndarray,
    stages: Mapping[str, np.ndarray],
    *,
    output_tokens: np.ndarray | None = None,
    prompt_tokens: np.ndarray | None = None,
    replica: Sequence[str] | np.ndarray | None = None,
    model: str = "llama-3-8b",
    node: Sequence[str] | np.ndarray | None = None,
    status: Sequence[str] | np.ndarray | None = None,
    metadata: Metadata | None = None,
) -> Capture:
    """A Capture of ``len(arrival)`` requests from per-stage duration arrays (vectorised).

    A zero duration means the request did not pass through that stage: no row is written."""
    n = len(arrival)
    arrival = np.asarray(arrival, dtype=np.float64)
    pre = [s for s in LAYOUT if s in stages and s != "decode"]
    ttft = np.zeros(n) if not pre else np.sum([np.asarray(stages[s]) for s in pre], axis=0)
    decode = np.asarray(stages.get("decode", np.zeros(n)), dtype=np.float64)
    ids = np.char.add("r", np.arange(n).astype(str))
    ids_arr = pa.array(ids.tolist(), pa.string())
    cols: dict[str, Any] = {
        "request_id": ids_arr,
        "arrival": pa.array(arrival),
        "first_token": pa.array(arrival + ttft),
        "finish": pa.array(arrival + ttft + decode),
        "ttft": pa.array(ttft),
        "e2e": pa.array(ttft + decode),
        "prompt_tokens": pa.array(
            np.full(n, 512) if prompt_tokens is None else prompt_tokens, pa.int64()
        ),
        "output_tokens": pa.array(
            np.full(n, 16) if output_tokens is None else output_tokens, pa.int64()
        ),
        "status": pa.array(["ok"] * n if status is None else list(status), pa.string()),
        "model": pa.array([model] * n, pa.string()),
        "replica": pa.array(["pod-0"] * n if replica is None else list(replica), pa.string()),
        "node": pa.array(["node-0"] * n if node is None else list(node), pa.string()),
    }
    requests = pa.Table.from_arrays(
        [cols.get(f.name, pa.nulls(n, f.type)) for f in S.REQUESTS], schema=S.REQUESTS
    )
    return Capture(
        requests=requests,
        stages=_stage_table(ids_arr, arrival, stages),
        metadata=metadata or Metadata(producer="tests.builders"),
    )


def _stage_table(ids: pa.Array, arrival: np.ndarray, stages: Mapping[str, np.ndarray]) -> pa.Table:
    parts = []
    offset = np.zeros(len(arrival))
    for stage in LAYOUT:
        if stage not in stages:
            continue
        dur = np.asarray(stages[stage], dtype=np.float64)
        if stage == "decode":  # decode starts at the first token, after every other stage
            start = arrival + sum(
                np.asarray(v, dtype=np.float64) for k, v in stages.items() if k != "decode"
            )
        else:
            start = arrival + offset
            offset = offset + dur
        keep = dur > 0
        parts.append(
            pa.Table.from_arrays(
                [
                    ids.filter(pa.array(keep)),
                    pa.array(np.full(int(keep.sum()), stage), pa.string()),
                    pa.array(start[keep]),
                    pa.array(dur[keep]),
                    pa.nulls(int(keep.sum()), pa.string()),
                    pa.array(np.full(int(keep.sum()), stage), pa.string()),
                ],
                schema=S.STAGES,
            )
        )
    return pa.concat_tables(parts) if parts else S.STAGES.empty_table()


def make_series(
    metric: str,
    points: Iterable[tuple[float, float]],
    source: str = "builders",
    **labels: str,
) -> pa.Table:
    """A ``series`` table of one metric: ``(time, value)`` points with the given labels
    (``le="0.5"`` for a histogram bucket).  Concatenate several with ``pa.concat_tables``."""
    pts = list(points)
    label_json = json.dumps(dict(sorted(labels.items())), separators=(",", ":"))
    return make_table(
        S.SERIES,
        {
            "metric": [metric] * len(pts),
            "labels": [label_json] * len(pts),
            "time": [float(t) for t, _ in pts],
            "value": [float(v) for _, v in pts],
            "source": [source] * len(pts),
        },
    )


def make_events(
    events: Iterable[tuple[float, str] | tuple[float, str, Mapping[str, Any]]],
    *,
    object_kind: str = "Pod",
    object_name: str = "pod-0",
    namespace: str = "default",
    durations: Mapping[int, float] | None = None,
) -> pa.Table:
    """An ``events`` table from ``(time, kind[, attributes])`` tuples (kinds from
    ``model.vocabulary.EVENT_KINDS``); ``durations`` maps an event's index to its derived
    duration (``pod_pending``, ``cold_start``)."""
    rows = [(e[0], e[1], e[2] if len(e) > 2 else {}) for e in events]  # type: ignore[misc]
    durations = durations or {}
    return make_table(
        S.EVENTS,
        {
            "time": [float(t) for t, _, _ in rows],
            "kind": [k for _, k, _ in rows],
            "object_kind": [object_kind] * len(rows),
            "object_name": [object_name] * len(rows),
            "namespace": [namespace] * len(rows),
            "reason": [k for _, k, _ in rows],
            "duration": [durations.get(i) for i in range(len(rows))],
            # every pod event names its pod (model.vocabulary.EVENT_KINDS)
            "attributes": [
                json.dumps({"pod": object_name, **a} if object_kind == "Pod" else dict(a))
                for _, _, a in rows
            ],
            "source": ["builders"] * len(rows),
        },
    )
