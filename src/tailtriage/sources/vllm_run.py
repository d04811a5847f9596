"""Real vLLM per-request timelines (LLMServingSim ``bench`` runs): ``requests.jsonl``,
``timeseries.csv`` and ``meta.json`` of one run folder.

``requests.jsonl`` mixes two clocks: ``arrival_time`` is wall-clock epoch seconds (the
frontend received the request), ``queued_ts``/``scheduled_ts``/``first_token_ts``/
``last_token_ts`` are the engine core's ``time.monotonic()``.  When the two are more than
100,000 s apart (as upstream ``bench validate`` decides) the engine times are moved onto the
wall clock by the largest ``arrival_time - queued_ts`` of the run.  As upstream does, a
request starts when it enters the engine queue (``queued_ts``): TTFT and e2e reproduce the
run's ``validation_summary.txt``.  The frontend hand-off before that (tokenisation, at most
0.2 s in the shared runs, and only a lower bound across clocks) is summarised in
``metadata.extra["vllm_run"]`` (``prequeue_p50_s``, ``prequeue_max_s``), not made a stage.
Stages: ``engine_queue`` (queued -> first scheduled), ``prefill`` (scheduled -> first token),
``decode`` (first -> last token); they add up to TTFT and e2e exactly.

``timeseries.csv`` (per-second engine aggregates, its own run-relative clock ``t``) becomes
``series`` under vLLM's metric names, anchored at ``meta.json``'s ``started_at``:
running/waiting gauges, KV usage as a 0-1 ratio (dropped when the run recorded only zeros,
an upstream recorder bug) and prompt/generation token counters accumulated from the
throughput columns.  ``meta.json`` itself lands in ``metadata.extra["vllm_run"]``.

Sibling files are found by their fixed names inside the run folder; each file's own format
is detected by content."""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

from tailtriage.errors import ParseError
from tailtriage.model import Capture, FileProvenance, Metadata, make_table
from tailtriage.model import schema as S
from tailtriage.model.timeparse import parse_instant
from tailtriage.sources._series import SeriesRows, labels_json, strip_bom
from tailtriage.sources.base import ReadOptions, register

#: upstream bench/core/validate.py: clocks further apart than this are different domains
MIXED_CLOCK_GAP = 100_000.0
_FIELDS = ("arrival_time", "queued_ts", "scheduled_ts", "first_token_ts", "last_token_ts")
_TIMESERIES_HEADER = re.compile(rb"^t,prompt_throughput,gen_throughput,running,waiting")


def _meta(folder: Path) -> Mapping[str, Any]:
    """The run's meta.json (empty when absent or unreadable)."""
    try:
        doc = orjson.loads(strip_bom((folder / "meta.json").read_bytes()))
    except (OSError, orjson.JSONDecodeError):
        return {}
    return doc if isinstance(doc, Mapping) else {}


def _run_facts(meta: Mapping[str, Any]) -> dict[str, Any]:
    keys = (
        "model",
        "vllm_version",
        "engine_kwargs",
        "kv_cache",
        "hardware",
        "started_at",
        "finished_at",
        "num_requests",
        "dataset_path",
        "tick_seconds",
    )
    facts = {}
    for k in keys:
        try:  # only what can be written back out (the capture stores extra as JSON)
            orjson.dumps(meta[k])
        except (KeyError, TypeError):
            continue
        facts[k] = meta[k]
    return facts


# -- requests.jsonl ------------------------------------------------------------------------


def _records(raw: bytes, where: str) -> tuple[list[dict[str, Any]], list[str]]:
    """Valid request records and one note per skipped line."""
    records: list[dict[str, Any]] = []
    skipped: list[str] = []
    for number, line in enumerate(raw.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            rec = orjson.loads(line)
            times = [float(rec[f]) for f in _FIELDS]
            if not all(map(math.isfinite, times)):
                raise ValueError("non-finite timestamp")
            rec["_times"] = times
            rec["_tokens"] = (int(rec.get("input_toks") or 0), int(rec.get("output_toks") or 0))
            if not rec.get("request_id"):
                raise KeyError("request_id")
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, OverflowError) as exc:
            reason = f"missing {exc}" if isinstance(exc, KeyError) else str(exc).split("\n")[0]
            skipped.append(f"{where}:line {number}: skipped, {reason}")
            continue
        records.append(rec)
    return records, skipped


def _clock_offset(records: list[dict[str, Any]]) -> float:
    """Seconds to add to engine (monotonic) times to put them on the wall clock."""
    offsets = sorted(r["_times"][0] - r["_times"][1] for r in records)
    median = offsets[len(offsets) // 2]
    return offsets[-1] if abs(median) > MIXED_CLOCK_GAP else 0.0


def _requests_capture(path: Path, records: list[dict[str, Any]], model: str | None) -> Capture:
    where = str(path)
    offset = _clock_offset(records)
    req: dict[str, list[Any]] = {f: [] for f in S.REQUESTS.names}
    stg: dict[str, list[Any]] = {f: [] for f in ("request_id", "stage", "start", "duration")}
    clamped = 0
    handoff = []
    for rec in records:
        arrival, *engine = rec["_times"]
        # the boundaries must not go backwards; a broken row is repaired and counted
        bounds = list(engine)  # queued, scheduled, first token, last token
        for i in range(1, 4):
            if bounds[i] < bounds[i - 1]:
                clamped += 1
                bounds[i] = bounds[i - 1]
        # durations from the engine's own clock: adding a 1.7e9 s offset first costs 0.2 us
        wall = [t + offset for t in bounds]
        handoff.append(wall[0] - arrival)
        rid = str(rec["request_id"])
        for stage, i in (("engine_queue", 0), ("prefill", 1), ("decode", 2)):
            stg["request_id"].append(rid)
            stg["stage"].append(stage)
            stg["start"].append(wall[i])
            stg["duration"].append(bounds[i + 1] - bounds[i])
        row = {
            "request_id": rid,
            "arrival": wall[0],
            "first_token": wall[2],
            "finish": wall[3],
            "ttft": bounds[2] - bounds[0],
            "e2e": bounds[3] - bounds[0],
            "prompt_tokens": rec["_tokens"][0],
            "output_tokens": rec["_tokens"][1],
            "status": "ok",
            "model": model,
            "source": where,
        }
        for name, values in req.items():
            values.append(row.get(name))
    warnings = []
    if offset:
        warnings.append(
            f"{where}: engine times are monotonic; moved onto the wall clock by {offset:.3f} s "
            "(largest arrival_time - queued_ts); requests start at their engine-queue entry"
        )
    handoff.sort()
    facts = {
        "clock_offset_s": offset,
        # frontend hand-off + tokenisation before queued_ts (a lower bound when clocks mix)
        "prequeue_p50_s": handoff[len(handoff) // 2],
        "prequeue_max_s": handoff[-1],
    }
    return Capture(
        requests=make_table(S.REQUESTS, req),
        stages=make_table(S.STAGES, stg),
        metadata=Metadata(
            warnings=tuple(warnings),
            quality={"stages.clamped_negative": clamped} if clamped else {},
            extra={"vllm_run": facts},
        ),
    )


class VllmRunRequestsSource:
    """``requests.jsonl`` of a vLLM bench run (one JSON object per request)."""

    name = "vllm_run"

    def sniff(self, head: bytes, path: Path) -> bool:
        first = strip_bom(head).lstrip().split(b"\n", 1)[0]
        return first.startswith(b"{") and all(f'"{f}"'.encode() in first for f in _FIELDS)

    def read(self, path: Path, options: ReadOptions) -> Capture:
        where = str(path)
        records, skipped = _records(strip_bom(path.read_bytes()), where)
        if not records:
            detail = skipped[0].split(": ", 1)[1] if skipped else "no requests"
            raise ParseError(f"no valid vLLM request record ({detail})", where)
        meta = _meta(path.parent)
        model = meta.get("model") if isinstance(meta.get("model"), str) else None
        cap = _requests_capture(path, records, model)
        extra = {"vllm_run": {**_run_facts(meta), **cap.metadata.extra["vllm_run"]}}
        quality = dict(cap.metadata.quality)
        if skipped:
            quality["requests.bad_lines"] = len(skipped)
        return cap.replace(
            metadata=Metadata(
                provenance=(FileProvenance(where, self.name, len(records), len(skipped)),),
                quality=quality,
                warnings=(*cap.metadata.warnings, *skipped[:5]),
                extra=extra,
            )
        )


# -- timeseries.csv ------------------------------------------------------------------------


def _csv_rows(text: str, where: str) -> tuple[list[dict[str, float | None]], list[str]]:
    """Numeric rows with increasing ``t``, and one note per skipped line."""
    reader = csv.reader(io.StringIO(text, newline=""))
    rows: list[dict[str, float | None]] = []
    skipped: list[str] = []
    try:
        header = [h.strip() for h in next(reader, [])]
        for fields in reader:
            if not fields:
                continue
            try:
                rec = {
                    k: float(v) if v.strip() else None for k, v in zip(header, fields, strict=True)
                }
                t = rec.get("t")
                if t is None or not all(math.isfinite(v) for v in rec.values() if v is not None):
                    raise ValueError("missing or non-finite value")
                if rows and t <= (rows[-1]["t"] or 0.0):
                    raise ValueError(f"t={t} does not increase")
            except ValueError as exc:
                skipped.append(f"{where}:line {reader.line_num}: skipped, {exc}")
                continue
            rows.append(rec)
    except csv.Error as exc:
        raise ParseError(f"broken CSV: {exc}", where, f"line {reader.line_num}") from exc
    return rows, skipped


class VllmRunTimeseriesSource:
    """``timeseries.csv`` of a vLLM bench run: per-second engine aggregates."""

    name = "vllm_run_timeseries"

    def sniff(self, head: bytes, path: Path) -> bool:
        return bool(_TIMESERIES_HEADER.match(strip_bom(head)))

    def _anchor(self, path: Path, meta: Mapping[str, Any], last_t: float) -> tuple[float, str]:
        started = meta.get("started_at")
        if isinstance(started, str):
            try:
                return parse_instant(started), "meta.json started_at"
            except (ValueError, OverflowError):
                pass
        # no run start known: assume the file was written when the run ended
        return path.stat().st_mtime - last_t, "the file's modification time (no meta.json)"

    def read(self, path: Path, options: ReadOptions) -> Capture:
        where = str(path)
        text = strip_bom(path.read_bytes()).decode("utf-8", errors="replace")
        rows, skipped = _csv_rows(text, where)
        if not rows:
            raise ParseError("no valid time-series row", where, "line 2")
        meta = _meta(path.parent)
        tick = meta.get("tick_seconds")
        tick = float(tick) if isinstance(tick, (int, float)) and tick > 0 else 1.0
        anchor, how = self._anchor(path, meta, float(rows[-1]["t"] or 0.0))
        model = meta.get("model")
        labels = labels_json({"model_name": model if isinstance(model, str) else ""})
        out = SeriesRows()
        kv_missing = all(not r.get("kv_cache_pct") for r in rows)
        totals = {"prompt": 0.0, "gen": 0.0}
        previous = None
        for row in rows:
            t = float(row["t"] or 0.0)
            when, width = anchor + t, (t - previous if previous is not None else tick)
            previous = t
            for metric, key in (("vllm:num_requests_running", "running"),
                                ("vllm:num_requests_waiting", "waiting")):  # fmt: skip
                if (v := row.get(key)) is not None:
                    out.add(metric, labels, when, v)
            for kind in ("prompt", "gen"):
                totals[kind] += (row.get(f"{kind}_throughput") or 0.0) * width
            out.add("vllm:prompt_tokens_total", labels, when, totals["prompt"])
            out.add("vllm:generation_tokens_total", labels, when, totals["gen"])
            if not kv_missing and (kv := row.get("kv_cache_pct")) is not None:
                out.add("vllm:kv_cache_usage_perc", labels, when, kv / 100)
        warnings = [f"{where}: run clock t anchored at {how} ({anchor:.3f})", *skipped[:5]]
        quality: dict[str, int] = {}
        if kv_missing:
            warnings.append(f"{where}: kv_cache_pct is 0 throughout (recorder bug); not used")
            quality["series.kv_cache_missing"] = len(rows)
        if skipped:
            quality["series.bad_lines"] = len(skipped)
        return Capture(
            series=out.table(where),
            metadata=Metadata(
                provenance=(FileProvenance(where, self.name, len(out), len(skipped)),),
                quality=quality,
                warnings=tuple(warnings),
            ),
        )


# -- meta.json -----------------------------------------------------------------------------


class VllmRunMetaSource:
    """``meta.json`` of a vLLM bench run: engine settings, kept in ``metadata.extra``."""

    name = "vllm_run_meta"

    def sniff(self, head: bytes, path: Path) -> bool:
        h = strip_bom(head).lstrip()
        return h.startswith(b"{") and b'"vllm_version"' in h and b'"engine_kwargs"' in h

    def read(self, path: Path, options: ReadOptions) -> Capture:
        try:
            doc = orjson.loads(strip_bom(path.read_bytes()))
        except orjson.JSONDecodeError as exc:
            raise ParseError(f"invalid JSON: {exc}", str(path)) from exc
        if not isinstance(doc, Mapping):
            raise ParseError("expected a JSON object", str(path), "$")
        return Capture(
            metadata=Metadata(
                provenance=(FileProvenance(str(path), self.name, 1),),
                extra={"vllm_run": _run_facts(doc)},
            )
        )


REQUESTS_SOURCE = register(VllmRunRequestsSource())
TIMESERIES_SOURCE = register(VllmRunTimeseriesSource())
META_SOURCE = register(VllmRunMetaSource())
