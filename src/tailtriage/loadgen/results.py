"""From measured records to the things people read: a summary with percentiles and goodput,
a tailtriage Capture, and OTLP/JSON client spans.

ITL here is one sample per gap between consecutive content chunks of a request (never a
per-request average); TPOT is the per-request mean, (last chunk - first chunk) / (tokens - 1)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import numpy as np
import orjson

from tailtriage.analyses.results import SloSpec
from tailtriage.errors import ParseError
from tailtriage.loadgen.request import RequestRecord
from tailtriage.model import Capture, FileProvenance, Metadata
from tailtriage.model import schema as S

PERCENTILES = (50.0, 90.0, 95.0, 99.0)
CLIENT_SPAN_NAME = "tailtriage.client"
CLIENT_SERVICE = "tailtriage-bench"


@dataclass(frozen=True)
class MetricSummary:
    count: int
    percentiles: tuple[tuple[float, float], ...]  # (percentile, seconds)
    mean: float

    def at(self, p: float) -> float:
        for q, v in self.percentiles:
            if q == p:
                return v
        return math.nan


@dataclass(frozen=True)
class SloOutcome:
    spec: SloSpec
    observed: float  # seconds (NaN without samples)
    met: bool


@dataclass(frozen=True)
class Summary:
    """The measured window of a run (warm-up excluded)."""

    requests: int
    ok: int
    errors: Mapping[str, int]  # error class -> count
    duration: float  # first send -> last finish, seconds
    request_rate: float  # completed ok per second
    output_token_rate: float
    metrics: Mapping[str, MetricSummary]  # ttft, itl, tpot, e2e
    slos: tuple[SloOutcome, ...] = ()
    good_requests: int = 0
    goodput: float = 0.0  # good requests per second
    warmup_excluded: int = 0
    self_checks: Mapping[str, Any] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, with milliseconds at the edge."""
        return {
            "requests": self.requests,
            "ok": self.ok,
            "errors": dict(self.errors),
            "duration_s": self.duration,
            "request_rate": self.request_rate,
            "output_token_rate": self.output_token_rate,
            "metrics": {
                k: {
                    "count": m.count,
                    "mean_ms": m.mean * 1e3,
                    **{f"p{p:g}_ms": v * 1e3 for p, v in m.percentiles},
                }
                for k, m in self.metrics.items()
            },
            "slos": [
                {
                    "metric": o.spec.metric,
                    "percentile": o.spec.percentile,
                    "threshold_ms": o.spec.threshold * 1e3,
                    "observed_ms": None if math.isnan(o.observed) else o.observed * 1e3,
                    "met": o.met,
                }
                for o in self.slos
            ],
            "good_requests": self.good_requests,
            "goodput": self.goodput,
            "warmup_excluded": self.warmup_excluded,
            "self_checks": dict(self.self_checks),
            "warnings": list(self.warnings),
        }


def metric_samples(records: Sequence[RequestRecord]) -> dict[str, list[float]]:
    ok = [r for r in records if r.status == "ok"]
    return {
        "ttft": [r.ttft for r in ok if r.ttft is not None],
        "itl": [g for r in ok for g in r.gaps],
        "tpot": [t for r in ok if (t := r.tpot) is not None],
        "e2e": [r.e2e for r in ok if r.e2e is not None],
    }


def summarize_metric(values: Sequence[float]) -> MetricSummary:
    if not values:
        return MetricSummary(0, tuple((p, math.nan) for p in PERCENTILES), math.nan)
    arr = np.asarray(values, dtype=np.float64)
    ps = np.percentile(arr, PERCENTILES)
    return MetricSummary(
        int(arr.size),
        tuple((p, float(v)) for p, v in zip(PERCENTILES, ps, strict=True)),
        float(arr.mean()),
    )


def request_meets(rec: RequestRecord, slos: Iterable[SloSpec]) -> bool:
    """Per-request SLO attainment (DistServe goodput): ok, and each SLO holds for this request.
    For ITL the request's own gaps at the SLO's percentile are compared."""
    if rec.status != "ok":
        return False
    for s in slos:
        if s.metric == "ttft":
            v = rec.ttft
        elif s.metric == "e2e":
            v = rec.e2e
        elif s.metric == "tpot":
            v = rec.tpot
        else:
            g = rec.gaps
            v = float(np.percentile(g, s.percentile)) if g else None
        if v is not None and v >= s.threshold:
            return False
    return True


def summarize(
    records: Sequence[RequestRecord],
    slos: Sequence[SloSpec] = (),
    self_checks: Mapping[str, Any] | None = None,
    warnings: Sequence[str] = (),
) -> Summary:
    measured = [r for r in records if not r.warmup]
    ok = [r for r in measured if r.status == "ok"]
    errors: dict[str, int] = {}
    for r in measured:
        if r.error is not None:
            errors[r.error] = errors.get(r.error, 0) + 1
    if measured:
        t0 = min(r.send for r in measured)
        t1 = max((r.finish or r.send) for r in measured)
        duration = max(t1 - t0, 1e-9)
    else:
        duration = 0.0
    samples = metric_samples(measured)
    metrics = {k: summarize_metric(v) for k, v in samples.items()}
    outcomes = []
    for s in slos:
        vals = samples.get(s.metric, [])
        obs = float(np.percentile(vals, s.percentile)) if vals else math.nan
        outcomes.append(SloOutcome(s, obs, bool(vals) and obs < s.threshold))
    good = sum(1 for r in measured if request_meets(r, slos)) if slos else len(ok)
    rate = len(ok) / duration if duration else 0.0
    return Summary(
        requests=len(measured),
        ok=len(ok),
        errors=errors,
        duration=duration,
        request_rate=rate,
        output_token_rate=sum(r.output_tokens or 0 for r in ok) / duration if duration else 0.0,
        metrics=metrics,
        slos=tuple(outcomes),
        good_requests=good,
        goodput=good / duration if duration else 0.0,
        warmup_excluded=len(records) - len(measured),
        self_checks=dict(self_checks or {}),
        warnings=tuple(warnings),
    )


# -- files ----------------------------------------------------------------------------------
def read_records(paths: Iterable[Path]) -> tuple[list[RequestRecord], int]:
    """Records from JSON-lines files; a torn last line (crash mid-write) is skipped and counted."""
    out: list[RequestRecord] = []
    skipped = 0
    for path in paths:
        lines = Path(path).read_bytes().splitlines()
        for i, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                out.append(RequestRecord.from_dict(orjson.loads(line)))
            except (orjson.JSONDecodeError, TypeError, ValueError) as exc:
                if i == len(lines):
                    skipped += 1
                    continue
                raise ParseError(f"bad request record ({exc})", str(path), f"line {i}") from None
    out.sort(key=lambda r: r.send)
    return out, skipped


def redact_url(url: str) -> str:
    """Drop credentials and the query string (tokens hide in both)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def to_capture(
    records: Sequence[RequestRecord],
    *,
    url: str,
    source: str = "loadgen",
    include_warmup: bool = False,
    extra: Mapping[str, Any] | None = None,
    quality: Mapping[str, int] | None = None,
    warnings: Sequence[str] = (),
    seed: int | None = None,
) -> Capture:
    """A Capture of the measured requests: requests, per-chunk token times, client spans."""
    recs = [r for r in records if include_warmup or not r.warmup]
    req_cols: dict[str, list[Any]] = {f.name: [] for f in S.REQUESTS}
    tok_cols: dict[str, list[Any]] = {f.name: [] for f in S.TOKEN_TIMES}
    for r in recs:
        finish = r.finish if r.finish is not None else r.send
        for k, v in (
            ("request_id", r.request_id),
            ("trace_id", r.trace_id),
            ("arrival", r.send),
            ("first_token", r.first_token),
            ("finish", finish),
            ("ttft", r.ttft),
            ("e2e", finish - r.send),
            ("prompt_tokens", r.prompt_tokens),
            ("output_tokens", r.output_tokens),
            ("status", r.status),
            ("error", r.error),
            ("http_status", r.http_status),
            ("model", r.model),
            ("replica", None),
            ("node", None),
            ("source", source),
        ):
            req_cols[k].append(v)
        for i, (t, n) in enumerate(r.chunks):
            tok_cols["request_id"].append(r.request_id)
            tok_cols["index"].append(i)
            tok_cols["time"].append(t)
            tok_cols["tokens"].append(n)
    spans = client_span_table(recs, url, source)
    q = dict(quality or {})
    q.setdefault("loadgen.warmup_excluded", len(records) - len(recs))
    meta = Metadata(
        producer="tailtriage.loadgen",
        provenance=(FileProvenance(source, "loadgen", records=len(recs)),),
        quality=q,
        warnings=tuple(warnings),
        seed=seed,
        extra={"loadgen": {"url": redact_url(url), **dict(extra or {})}},
    )
    return Capture(
        requests=S.make_table(S.REQUESTS, req_cols),
        token_times=S.make_table(S.TOKEN_TIMES, tok_cols),
        spans=spans,
        metadata=meta,
    )


def _client_attrs(r: RequestRecord, url: str) -> dict[str, Any]:
    parts = urlsplit(url)
    a: dict[str, Any] = {
        "http.request.method": "POST",
        "url.full": redact_url(url),
        "server.address": parts.hostname or "",
        "server.port": parts.port or (443 if parts.scheme == "https" else 80),
        "gen_ai.operation.name": "chat" if "chat" in parts.path else "text_completion",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": r.model,
        "gen_ai.request.stream": r.stream,
        "tailtriage.request.id": r.request_id,
    }
    if r.http_status is not None:
        a["http.response.status_code"] = r.http_status
    if r.prompt_tokens is not None:
        a["gen_ai.usage.input_tokens"] = r.prompt_tokens
    if r.output_tokens is not None:
        a["gen_ai.usage.output_tokens"] = r.output_tokens
    if r.ttft is not None:
        a["gen_ai.response.time_to_first_chunk"] = r.ttft
    if r.error is not None:
        a["error.type"] = r.error
    return a


def client_span_table(records: Sequence[RequestRecord], url: str, source: str) -> Any:
    cols: dict[str, list[Any]] = {f.name: [] for f in S.SPANS}
    for r in records:
        for k, v in (
            ("trace_id", r.trace_id),
            ("span_id", r.span_id),
            ("parent_id", None),
            ("name", CLIENT_SPAN_NAME),
            ("kind", "CLIENT"),
            ("service", CLIENT_SERVICE),
            ("start", r.send),
            ("end", r.finish if r.finish is not None else r.send),
            ("status", "ok" if r.status == "ok" else "error"),
            ("attributes", orjson.dumps(_client_attrs(r, url)).decode()),
            ("source", source),
        ):
            cols[k].append(v)
    return S.make_table(S.SPANS, cols)


def _any_value(v: Any) -> dict[str, Any]:
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, float):
        return {"doubleValue": v}
    return {"stringValue": str(v)}


def otlp_client_spans(records: Sequence[RequestRecord], url: str, batch: int = 500) -> list[bytes]:
    """OTLP/JSON lines (Collector file-exporter shape), ``batch`` spans per line."""
    lines = []
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": CLIENT_SERVICE}}]}
    for i in range(0, len(records), batch):
        spans = []
        for r in records[i : i + batch]:
            end = r.finish if r.finish is not None else r.send
            span: dict[str, Any] = {
                "traceId": r.trace_id,
                "spanId": r.span_id,
                "name": CLIENT_SPAN_NAME,
                "kind": 3,
                "startTimeUnixNano": str(int(r.send * 1e9)),
                "endTimeUnixNano": str(int(end * 1e9)),
                "attributes": [
                    {"key": k, "value": _any_value(v)} for k, v in _client_attrs(r, url).items()
                ],
                "status": {"code": 1 if r.status == "ok" else 2},
            }
            if r.first_token is not None:
                span["events"] = [
                    {"timeUnixNano": str(int(r.first_token * 1e9)), "name": "first_token"}
                ]
            spans.append(span)
        doc = {
            "resourceSpans": [
                {
                    "resource": resource,
                    "scopeSpans": [{"scope": {"name": "tailtriage.loadgen"}, "spans": spans}],
                }
            ]
        }
        lines.append(orjson.dumps(doc))
    return lines
