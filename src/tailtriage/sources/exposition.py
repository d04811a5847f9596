"""Prometheus text exposition (format 0.0.4) and OpenMetrics snapshots -> ``series``.

Every sample line becomes one row under the name it was exported with: counters, gauges,
untyped, summaries (``{quantile=...}``, ``_sum``, ``_count``) and classic histograms, kept as
their cumulative ``_bucket{le=...}`` series plus ``_sum`` and ``_count``.  ``le`` and
``quantile`` values are rewritten in one spelling (``1.0`` -> ``1``).

A scrape carries no time of its own unless samples have timestamps (milliseconds in 0.0.4,
seconds in OpenMetrics; told apart by size).  Otherwise the time comes from the
``# tailtriage-snapshot-time <unix seconds | RFC 3339>`` comment before the sample (so
scrapes appended to one file read as a time series), else from the file's modification
time, which is recorded as a warning.

Lines that are not exposition (the ``...`` elisions of documentation snippets) are skipped
and counted; a file with no valid sample at all is a ParseError naming the first bad line."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from tailtriage.errors import ParseError
from tailtriage.model import Capture, FileProvenance, Metadata
from tailtriage.model.timeparse import parse_instant
from tailtriage.sources._series import (
    SeriesRows,
    labels_json,
    parse_float,
    strip_bom,
)
from tailtriage.sources.base import SNIFF_BYTES, ReadOptions, register

FORMAT = "prometheus_exposition"
SNAPSHOT_HINT = "# tailtriage-snapshot-time"
#: warnings listed one by one before they are only counted
MAX_LISTED_WARNINGS = 5

_NAME_RE = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
# the value pattern is the "unrolled loop" form: linear time even for a 10 MB value
_LABEL_RE = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"([^"\\\n]*(?:\\.[^"\\\n]*)*)"\s*([,}])')
_ESCAPE_RE = re.compile(r"\\(.)")
_VALUE_RE = re.compile(r"[-+]?(?:[0-9.]+(?:[eE][-+]?[0-9]+)?|[iI]nf|NaN|nan)")
_META_RE = re.compile(r"#\s+(HELP|TYPE|UNIT)\s+(\S+)(?:\s+(.*))?$")
#: sample timestamps above this are milliseconds (0.0.4), below it seconds (OpenMetrics)
_MS_THRESHOLD = 1e11


@dataclass(frozen=True)
class Sample:
    name: str
    labels: dict[str, str]
    value: float
    timestamp: float | None  # unix seconds


@dataclass
class Parsed:
    """What one exposition text holds."""

    samples: list[Sample] = field(default_factory=list)
    types: dict[str, str] = field(default_factory=dict)  # family -> counter|gauge|...
    bad_lines: list[tuple[int, str]] = field(default_factory=list)  # (line number, reason)
    snapshot_time: float | None = None  # the first tailtriage hint


def _unescape(value: str) -> str:
    if "\\" not in value:
        return value
    return _ESCAPE_RE.sub(lambda m: "\n" if m.group(1) == "n" else m.group(1), value)


def _parse_labels(line: str, pos: int) -> tuple[dict[str, str], int]:
    """Labels starting just after ``{``; returns them and the position after ``}``."""
    labels: dict[str, str] = {}
    if line[pos : pos + 1] == "}":
        return labels, pos + 1
    while True:
        m = _LABEL_RE.match(line, pos)
        if m is None:
            if line[pos:].lstrip().startswith("}"):  # trailing comma: {a="b",}
                return labels, line.index("}", pos) + 1
            raise ValueError(f"malformed label set at column {pos + 1}")
        labels[m.group(1)] = _unescape(m.group(2))
        pos = m.end()
        if m.group(3) == "}":
            return labels, pos


# Fast path for the common line without escapes: one C-level match of the whole line and a
# check that the label part is nothing but well-formed pairs; anything else takes the slow,
# explaining parser below.
_FAST_RE = re.compile(
    r'([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{([^"}]*(?:"[^"]*"[^"}]*)*)\})?[ \t]+([^ \t#]+)'
    r"(?:[ \t]+([^ \t#]+))?[ \t]*(?:#.*)?"
)
_PAIRS_RE = re.compile(r'(?:\s*[a-zA-Z_][a-zA-Z0-9_]*\s*=\s*"[^"]*"\s*(?:,|$))*\s*')
_PAIR_RE = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"([^"]*)"')


def _fast_sample(line: str) -> Sample | None:
    m = _FAST_RE.fullmatch(line)
    if m is None:
        return None
    name, body, raw_value, raw_stamp = m.groups()
    labels: dict[str, str] = {}
    if body:
        if _PAIRS_RE.fullmatch(body) is None:
            return None
        labels = dict(_PAIR_RE.findall(body))
    stamp = None
    if raw_stamp is not None:
        t = parse_float(raw_stamp)
        if not math.isfinite(t):
            return None
        stamp = t / 1000.0 if abs(t) > _MS_THRESHOLD else t
    return Sample(name, labels, parse_float(raw_value), stamp)


def parse_sample(line: str) -> Sample:
    """One sample line: ``name{labels} value [timestamp] [# exemplar]``."""
    if "\\" not in line:
        try:
            fast = _fast_sample(line)
        except ValueError:
            fast = None  # the slow path says what is wrong
        if fast is not None:
            return fast
    return _slow_sample(line)


def _slow_sample(line: str) -> Sample:
    """Character by character, with escapes, and a reason when the line is not a sample."""
    m = _NAME_RE.match(line)
    if m is None:
        raise ValueError("not a metric name")
    name, pos = m.group(0), m.end()
    labels: dict[str, str] = {}
    if line[pos : pos + 1] == "{":
        labels, pos = _parse_labels(line, pos + 1)
    rest = line[pos:]
    if rest[:1] not in (" ", "\t"):
        raise ValueError("expected a space before the value")
    rest = rest.split("#", 1)[0]  # OpenMetrics exemplar
    fields = rest.split()
    if not 1 <= len(fields) <= 2:
        raise ValueError("expected a value and an optional timestamp")
    value = parse_float(fields[0])
    stamp = None
    if len(fields) == 2:
        raw = parse_float(fields[1])
        if not math.isfinite(raw):
            raise ValueError(f"invalid timestamp {fields[1]!r}")
        stamp = raw / 1000.0 if abs(raw) > _MS_THRESHOLD else raw
    return Sample(name, labels, value, stamp)


def _lines(text: str) -> Iterator[tuple[int, str]]:
    # only "\n" ends a line: str.splitlines() would also split inside label values at \r etc.
    for number, line in enumerate(text.split("\n"), start=1):
        stripped = line.strip()
        if stripped:
            yield number, stripped


def _comment(parsed: Parsed, number: int, line: str) -> float | None:
    """Handle a ``#`` line; returns the time of a snapshot hint, else None."""
    if line.startswith(SNAPSHOT_HINT):
        try:
            return parse_instant(line[len(SNAPSHOT_HINT) :])
        except (ValueError, OverflowError) as exc:
            parsed.bad_lines.append((number, f"bad snapshot time: {exc}"))
        return None
    m = _META_RE.match(line)
    if m is not None and m.group(1) == "TYPE" and m.group(3):
        parsed.types[m.group(2)] = m.group(3).strip().lower()
    return None  # HELP, UNIT, EOF and free comments carry no samples


def parse_exposition(text: str) -> Parsed:
    """Parse exposition text; bad lines are collected, never raised.

    A snapshot hint dates the samples after it, so a file of several scrapes appended one
    after the other (each behind its own hint, ``# EOF`` or not) reads as a time series."""
    parsed = Parsed()
    current: float | None = None
    for number, line in _lines(text):
        if line.startswith("#"):
            hint = _comment(parsed, number, line)
            if hint is not None:
                current = hint
                if parsed.snapshot_time is None:
                    parsed.snapshot_time = hint
            continue
        try:
            sample = parse_sample(line)
        except ValueError as exc:
            parsed.bad_lines.append((number, str(exc)))
            continue
        if sample.timestamp is None and current is not None:
            sample = Sample(sample.name, sample.labels, sample.value, current)
        parsed.samples.append(sample)
    return parsed


def histograms_without_inf(parsed: Parsed) -> list[str]:
    """Histogram series (name and labels) that lack the mandatory ``le="+Inf"`` bucket."""
    seen: dict[tuple[str, tuple[tuple[str, str], ...]], bool] = {}
    for s in parsed.samples:
        le = s.labels.get("le")
        if le is not None and s.name.endswith("_bucket"):
            key = (s.name, tuple(sorted((k, v) for k, v in s.labels.items() if k != "le")))
            seen[key] = seen.get(key, False) or le.strip().lower() in ("+inf", "inf")
    return [f"{name}{labels_json(dict(rest))}" for (name, rest), ok in seen.items() if not ok]


def to_series(
    parsed: Parsed, default_time: float, source: str | None, max_label_bytes: int = 0
) -> tuple[pa.Table, int]:
    """The ``series`` rows, and how many label values were cut to ``max_label_bytes``."""
    rows = SeriesRows()
    keys: dict[tuple[tuple[str, str], ...], str] = {}  # one JSON encoding per label set
    truncated = 0
    for s in parsed.samples:
        when = s.timestamp if s.timestamp is not None else default_time
        items = tuple(s.labels.items())
        key = keys.get(items)
        if key is None:
            labels = s.labels
            if max_label_bytes and any(len(v) > max_label_bytes for v in labels.values()):
                truncated += 1
                labels = {k: v[:max_label_bytes] for k, v in labels.items()}
            key = keys[items] = labels_json(labels)
        rows.add(s.name, key, when, s.value)
    return rows.table(source), truncated


class ExpositionSource:
    """Prometheus text exposition 0.0.4 / OpenMetrics text, detected by its line shapes."""

    name = "prometheus_exposition"

    def sniff(self, head: bytes, path: Path) -> bool:
        text = strip_bom(head).decode("utf-8", errors="replace")
        if text.lstrip()[:1] in ("{", "["):
            return False  # JSON is never exposition
        good = bad = 0
        typed = False
        if len(head) >= SNIFF_BYTES and "\n" in text:
            text = text[: text.rindex("\n")]  # the last line may be cut off mid-way
        for _, line in _lines(text):
            if good + bad >= 40:
                break
            if line.startswith("#"):
                typed = typed or bool(_META_RE.match(line)) or line.startswith(SNAPSHOT_HINT)
                continue
            try:
                parse_sample(line)
                good += 1
            except ValueError:
                bad += 1
        # a few elided or damaged lines are tolerated, a different format is not
        return good > 0 and bad * 3 <= good and (typed or bad == 0)

    def read(self, path: Path, options: ReadOptions) -> Capture:
        raw = path.read_bytes()
        text = strip_bom(raw).decode("utf-8", errors="replace")
        parsed = parse_exposition(text)
        where = str(path)
        if not parsed.samples:
            first = parsed.bad_lines[0] if parsed.bad_lines else (1, "no samples")
            raise ParseError(f"not a Prometheus exposition: {first[1]}", where, f"line {first[0]}")
        warnings: list[str] = []
        default_time = parsed.snapshot_time
        if default_time is None:
            default_time = path.stat().st_mtime
            if any(s.timestamp is None for s in parsed.samples):
                warnings.append(
                    f"{where}: no sample timestamps and no '{SNAPSHOT_HINT}' line; "
                    f"using the file's modification time {default_time:.3f}"
                )
        for number, reason in parsed.bad_lines[:MAX_LISTED_WARNINGS]:
            warnings.append(f"{where}:line {number}: skipped, {reason}")
        if len(parsed.bad_lines) > MAX_LISTED_WARNINGS:
            warnings.append(f"{where}: {len(parsed.bad_lines)} lines skipped in all")
        no_inf = histograms_without_inf(parsed)
        for series in no_inf[:MAX_LISTED_WARNINGS]:
            warnings.append(f'{where}: histogram {series} has no le="+Inf" bucket')
        series, truncated = to_series(parsed, default_time, where, options.max_attribute_bytes)
        quality = {"series.bad_lines": len(parsed.bad_lines)} if parsed.bad_lines else {}
        if truncated:
            quality["series.truncated_labels"] = truncated
        if no_inf:
            quality["series.histogram_without_inf"] = len(no_inf)
        meta = Metadata(
            provenance=(FileProvenance(where, FORMAT, len(parsed.samples), len(parsed.bad_lines)),),
            quality=quality,
            warnings=tuple(warnings),
        )
        return Capture(series=series, metadata=meta)


SOURCE = register(ExpositionSource())
