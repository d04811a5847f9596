"""Prometheus HTTP API responses (``/api/v1/query_range`` and ``/api/v1/query``) -> ``series``.

A file holds one response document, or several as JSON lines (one saved query per line).
Result types: ``matrix`` (``values: [[t, "v"], ...]``), ``vector`` (``value: [t, "v"]``),
``scalar`` (``[t, "v"]``).  Values are strings, ``"NaN"``/``"+Inf"`` included.  Native
histograms (``histogram``/``histograms``) become classic cumulative ``_bucket{le=upper}`` rows
plus ``_count`` and ``_sum``, so analyses see one histogram shape whatever the source.

Series without ``__name__`` (results of an expression such as ``rate(...)``) keep an empty
metric name; :func:`parse_response` lets the live reader name them.  A ``status: error``
response is an InputError quoting Prometheus' ``errorType`` and ``error``."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import orjson

from tailtriage.errors import InputError, ParseError
from tailtriage.model import Capture, FileProvenance, Metadata
from tailtriage.sources._safety import load_json
from tailtriage.sources._series import SeriesRows, labels_json, parse_float, strip_bom
from tailtriage.sources.base import ReadOptions, register

FORMAT = "prometheus_api"
_RESULT_TYPES = ("matrix", "vector", "scalar", "string")
_SNIFF_RE = re.compile(rb'"status"\s*:\s*"(success|error)"')
_RESULT_TYPE_RE = re.compile(rb'"(resultType|errorType)"\s*:')


class ResponseError(ValueError):
    """A response that is not a valid query result; ``where`` is a JSON path."""

    def __init__(self, message: str, where: str, *, refused: bool = False) -> None:
        super().__init__(message)
        self.where = where
        self.refused = refused  # Prometheus answered status: error (not a broken file)


def _num(raw: Any, where: str) -> float:
    if isinstance(raw, (int, float)) and not isinstance(raw, bool):
        return float(raw)
    if isinstance(raw, str):
        try:
            return parse_float(raw)
        except ValueError:
            pass
    raise ResponseError(f"expected a number or numeric string, got {raw!r}", where)


def _list(raw: Any, where: str) -> list[Any]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ResponseError("expected a list", where)
    return raw


def _pair(raw: Any, where: str) -> tuple[float, float]:
    if not isinstance(raw, list) or len(raw) != 2:
        raise ResponseError("expected [timestamp, value]", where)
    return _num(raw[0], where + "[0]"), _num(raw[1], where + "[1]")


def _native(
    rows: SeriesRows, name: str, labels: dict[str, str], stamp: float, h: Any, where: str
) -> None:
    """One native histogram sample -> cumulative classic buckets, ``_count``, ``_sum``."""
    if not isinstance(h, Mapping):
        raise ResponseError("expected a histogram object", where)
    running = 0.0
    for i, bucket in enumerate(_list(h.get("buckets"), where + ".buckets")):
        if not isinstance(bucket, list) or len(bucket) != 4:
            raise ResponseError("expected [rule, lower, upper, count]", f"{where}.buckets[{i}]")
        running += _num(bucket[3], f"{where}.buckets[{i}][3]")
        upper = _num(bucket[2], f"{where}.buckets[{i}][2]")
        rows.add(f"{name}_bucket", labels_json({**labels, "le": repr(upper)}), stamp, running)
    count = _num(h.get("count", running), f"{where}.count")
    rows.add(f"{name}_bucket", labels_json({**labels, "le": "+Inf"}), stamp, count)
    rows.add(f"{name}_count", labels_json(labels), stamp, count)
    rows.add(f"{name}_sum", labels_json(labels), stamp, _num(h.get("sum", 0), f"{where}.sum"))


def _series_item(rows: SeriesRows, item: Any, where: str, default_name: str) -> None:
    if not isinstance(item, Mapping) or not isinstance(item.get("metric", {}), Mapping):
        raise ResponseError("expected {metric: {...}, values|value: ...}", where)
    labels = {str(k): str(v) for k, v in (item.get("metric") or {}).items()}
    name = labels.pop("__name__", default_name)
    key = labels_json(labels)
    if "value" in item:
        stamp, value = _pair(item["value"], where + ".value")
        rows.add(name, key, stamp, value)
    values = _list(item.get("values"), where + ".values")
    try:  # fast path; on any doubt the checked path below names the bad point
        times = [float(t) for t, _ in values]
        nums = [parse_float(v) for _, v in values]
    except (TypeError, ValueError, AttributeError):
        pairs = [_pair(point, f"{where}.values[{i}]") for i, point in enumerate(values)]
        times, nums = [p[0] for p in pairs], [p[1] for p in pairs]
    rows.extend(name, key, times, nums)
    if "histogram" in item:
        point = item["histogram"]
        if not isinstance(point, list) or len(point) != 2:
            raise ResponseError("expected [timestamp, histogram]", where + ".histogram")
        _native(rows, name, labels, _num(point[0], where), point[1], where + ".histogram")
    for i, point in enumerate(_list(item.get("histograms"), where + ".histograms")):
        if not isinstance(point, list) or len(point) != 2:
            raise ResponseError("expected [timestamp, histogram]", f"{where}.histograms[{i}]")
        stamp = _num(point[0], f"{where}.histograms[{i}][0]")
        _native(rows, name, labels, stamp, point[1], f"{where}.histograms[{i}]")


def parse_response(doc: Any, rows: SeriesRows, default_name: str = "") -> list[str]:
    """Add the samples of one decoded response to ``rows``; returns Prometheus' warnings.

    Raises :class:`ResponseError` for a malformed document and for ``status: error``."""
    if not isinstance(doc, Mapping) or doc.get("status") not in ("success", "error"):
        raise ResponseError('expected {"status": "success"|"error", ...}', "$.status")
    if doc["status"] == "error":
        kind = doc.get("errorType", "error")
        raise ResponseError(
            f"Prometheus query failed ({kind}): {doc.get('error', '')}", "$", refused=True
        )
    data = doc.get("data")
    if not isinstance(data, Mapping) or data.get("resultType") not in _RESULT_TYPES:
        raise ResponseError(f"resultType must be one of {', '.join(_RESULT_TYPES)}", "$.data")
    kind, result = data["resultType"], data.get("result")
    if kind == "string":
        return [*_warnings(doc), "string result ignored (not a metric)"]
    if kind == "scalar":
        stamp, value = _pair(result, "$.data.result")
        rows.add(default_name, "{}", stamp, value)
        return _warnings(doc)
    if not isinstance(result, list):
        raise ResponseError("expected a list of series", "$.data.result")
    for i, item in enumerate(result):
        _series_item(rows, item, f"$.data.result[{i}]", default_name)
    return _warnings(doc)


def _warnings(doc: Mapping[str, Any]) -> list[str]:
    return [str(w) for key in ("warnings", "infos") for w in doc.get(key) or ()]


def _documents(raw: bytes, where: str) -> Iterable[tuple[str, Any]]:
    """(position, decoded document): the whole file, else one per JSON line."""
    try:
        yield "", load_json(raw, where).doc
        return
    except ParseError as whole_error:
        first = raw.lstrip().split(b"\n", 1)[0]
        try:
            orjson.loads(first)
        except orjson.JSONDecodeError:
            # one (pretty-printed or truncated) document: the error has its line and column
            raise whole_error from None
    for number, line in enumerate(raw.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            yield f"line {number}", orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise ParseError(f"invalid JSON: {exc}", where, f"line {number}") from exc


class PrometheusApiSource:
    """Saved ``query``/``query_range`` responses of the Prometheus HTTP API."""

    name = "prometheus_api"

    def sniff(self, head: bytes, path: Path) -> bool:
        # Prometheus writes "status" first and resultType/errorType within a few bytes;
        # no trace format has either key
        head = strip_bom(head)
        if head.lstrip()[:1] != b"{":
            return False
        return bool(_SNIFF_RE.search(head)) and bool(_RESULT_TYPE_RE.search(head))

    def read(self, path: Path, options: ReadOptions) -> Capture:
        where = str(path)
        rows = SeriesRows()
        warnings: list[str] = []
        unnamed_before = 0
        for position, doc in _documents(strip_bom(path.read_bytes()), where):
            try:
                notes = parse_response(doc, rows)
            except ResponseError as exc:
                pos = f"{position} {exc.where}".strip()
                error = InputError if exc.refused else ParseError
                raise error(str(exc), where, pos) from exc
            warnings.extend(f"{where}: Prometheus: {note}" for note in notes)
            unnamed = sum(1 for m in rows.metric[unnamed_before:] if not m)
            unnamed_before = len(rows)
            if unnamed:
                warnings.append(
                    f"{where}{':' + position if position else ''}: {unnamed} samples have no "
                    "metric name (an expression result); kept with an empty name"
                )
        meta = Metadata(
            provenance=(FileProvenance(where, FORMAT, len(rows)),),
            warnings=tuple(warnings),
        )
        return Capture(series=rows.table(where), metadata=meta)


SOURCE = register(PrometheusApiSource())
