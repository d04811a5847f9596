"""OTLP/JSON metrics (the OpenTelemetry Collector's ``file`` exporter) -> ``series``.

A file holds one ``{"resourceMetrics": [...]}`` document, or one per line (the file exporter
writes a line per export batch).  Every data point lands in ``series`` the way Prometheus data
does, so the catalog, the diagnosis signals and the engine-histogram analysis read both alike:

* ``gauge`` and ``sum`` points: one row, the metric named as exported (a Collector that
  scraped vLLM with the ``prometheus`` receiver keeps ``vllm:num_requests_waiting``);
* ``histogram`` (explicit buckets): cumulative ``<name>_bucket{le}`` rows up to ``+Inf``,
  ``<name>_sum`` and ``<name>_count`` - the classic Prometheus shape;
* ``exponentialHistogram``: the same, with the bucket bounds ``base ** (offset + i + 1)``,
  ``base = 2 ** (2 ** -scale)`` (the zero bucket at ``zeroThreshold``);
* ``summary``: ``<name>{quantile}``, ``_sum``, ``_count``.

Delta temporality (``aggregationTemporality: 1``) is summed per series into cumulative values,
which is what Prometheus counters hold.  Labels: the point's attributes, plus the resource's
pod, namespace and service (``k8s.pod.name`` -> ``pod``, ``k8s.namespace.name`` ->
``namespace``, ``service.name`` -> ``job``, ``service.instance.id`` -> ``instance``)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import orjson

from tailtriage.errors import ParseError
from tailtriage.model import Capture, FileProvenance, Metadata
from tailtriage.sources._safety import json_documents
from tailtriage.sources._series import SeriesRows, labels_json, strip_bom
from tailtriage.sources.base import ReadOptions, register

FORMAT: Final = "otlp_metrics_json"
DELTA: Final = 1  # AGGREGATION_TEMPORALITY_DELTA
_SNIFF: Final = re.compile(rb'"resource_?[mM]etrics"\s*:')
#: resource attributes kept as labels, under the name Prometheus' target labels use
_RESOURCE_LABELS: Final[Mapping[str, str]] = {
    "k8s.pod.name": "pod",
    "k8s.namespace.name": "namespace",
    "service.name": "job",
    "service.instance.id": "instance",
}


class _Bad(ValueError):
    def __init__(self, message: str, where: str) -> None:
        super().__init__(message)
        self.where = where


def _value(v: Any) -> str:
    """An OTLP AnyValue as a label string."""
    if not isinstance(v, Mapping):
        return str(v)
    for key in ("stringValue", "intValue", "doubleValue", "boolValue"):
        if key in v:
            return str(v[key]).lower() if key == "boolValue" else str(v[key])
    return orjson.dumps(v).decode()


def _attrs(raw: Any) -> dict[str, str]:
    out: dict[str, str] = {}
    for kv in raw or ():
        if isinstance(kv, Mapping) and "key" in kv:
            out[str(kv["key"])] = _value(kv.get("value"))
    return out


def _num(raw: Any, where: str) -> float:
    try:
        return float(raw)
    except (TypeError, ValueError):
        raise _Bad(f"expected a number, got {raw!r}", where) from None


def _point_value(p: Mapping[str, Any], where: str) -> float:
    for key in ("asDouble", "asInt"):
        if key in p:
            return _num(p[key], f"{where}.{key}")
    raise _Bad("data point has neither asDouble nor asInt", where)


def _seconds(p: Mapping[str, Any], where: str) -> float:
    return _num(p.get("timeUnixNano"), f"{where}.timeUnixNano") / 1e9


class _Reader:
    """Accumulates rows; keeps delta-temporality running totals per series."""

    def __init__(self) -> None:
        self.rows = SeriesRows()
        self._totals: dict[tuple[str, str], float] = {}
        self.skipped: dict[str, int] = {}

    def add(self, name: str, labels: Mapping[str, str], t: float, v: float, delta: bool) -> None:
        key = labels_json(labels)
        if delta:
            v = self._totals.get((name, key), 0.0) + v
            self._totals[(name, key)] = v
        self.rows.add(name, key, t, v)

    def metric(self, m: Mapping[str, Any], resource: Mapping[str, str], where: str) -> None:
        name = str(m.get("name") or "")
        if not name:
            raise _Bad("metric without a name", where)
        for kind in ("gauge", "sum", "histogram", "exponentialHistogram", "summary"):
            body = m.get(kind)
            if isinstance(body, Mapping):
                break
        else:
            self.skipped["unknown metric type"] = self.skipped.get("unknown metric type", 0) + 1
            return
        delta = body.get("aggregationTemporality") == DELTA
        for i, p in enumerate(body.get("dataPoints") or ()):
            at = f"{where}.{kind}.dataPoints[{i}]"
            if not isinstance(p, Mapping):
                raise _Bad("expected a data point object", at)
            labels = {**resource, **_attrs(p.get("attributes"))}
            t = _seconds(p, at)
            if kind in ("gauge", "sum"):
                self.add(name, labels, t, _point_value(p, at), delta and kind == "sum")
            elif kind == "histogram":
                self._histogram(name, labels, t, p, delta, at)
            elif kind == "exponentialHistogram":
                self._exponential(name, labels, t, p, delta, at)
            else:
                self._summary(name, labels, t, p, at)

    def _buckets(
        self,
        name: str,
        labels: Mapping[str, str],
        t: float,
        bounds: list[float],
        counts: list[float],
        p: Mapping[str, Any],
        delta: bool,
        where: str,
    ) -> None:
        running = 0.0
        for le, c in zip([*bounds, math.inf], counts, strict=True):
            running += c
            le_text = "+Inf" if math.isinf(le) else repr(le)
            self.add(f"{name}_bucket", {**labels, "le": le_text}, t, running, delta)
        self.add(f"{name}_count", labels, t, _num(p.get("count", running), where), delta)
        if "sum" in p:
            self.add(f"{name}_sum", labels, t, _num(p["sum"], f"{where}.sum"), delta)

    def _histogram(
        self, name: str, labels: dict[str, str], t: float, p: Mapping[str, Any], delta: bool,
        where: str,
    ) -> None:  # fmt: skip
        bounds = [_num(b, f"{where}.explicitBounds") for b in p.get("explicitBounds") or ()]
        counts = [_num(c, f"{where}.bucketCounts") for c in p.get("bucketCounts") or ()]
        if not counts:
            counts = [0.0] * len(bounds) + [_num(p.get("count", 0), f"{where}.count")]
        if len(counts) != len(bounds) + 1:
            raise _Bad(
                f"{len(counts)} bucketCounts for {len(bounds)} explicitBounds (need one more)",
                where,
            )
        self._buckets(name, labels, t, bounds, counts, p, delta, where)

    def _exponential(
        self, name: str, labels: dict[str, str], t: float, p: Mapping[str, Any], delta: bool,
        where: str,
    ) -> None:  # fmt: skip
        scale = int(_num(p.get("scale", 0), f"{where}.scale"))
        base = 2.0 ** (2.0**-scale)
        zero = _num(p.get("zeroCount", 0), f"{where}.zeroCount")
        neg = p.get("negative") or {}
        zero += sum(_num(c, f"{where}.negative") for c in neg.get("bucketCounts") or ())
        pos = p.get("positive") or {}
        offset = int(_num(pos.get("offset", 0), f"{where}.positive.offset"))
        counts = [_num(c, f"{where}.positive.bucketCounts") for c in pos.get("bucketCounts") or ()]
        bounds = [_num(p.get("zeroThreshold", 0.0), f"{where}.zeroThreshold")]
        bounds += [base ** (offset + i + 1) for i in range(len(counts))]
        # the last finite bound closes the last bucket; +Inf then holds nothing more
        self._buckets(name, labels, t, bounds, [zero, *counts, 0.0], p, delta, where)

    def _summary(
        self, name: str, labels: dict[str, str], t: float, p: Mapping[str, Any], where: str
    ) -> None:
        for q in p.get("quantileValues") or ():
            qv = {**labels, "quantile": repr(_num(q.get("quantile"), f"{where}.quantile"))}
            self.add(name, qv, t, _num(q.get("value"), f"{where}.value"), False)
        self.add(f"{name}_count", labels, t, _num(p.get("count", 0), f"{where}.count"), False)
        self.add(f"{name}_sum", labels, t, _num(p.get("sum", 0), f"{where}.sum"), False)

    def document(self, doc: Any, where: str) -> None:
        if not isinstance(doc, Mapping):
            raise _Bad("expected a JSON object", where)
        for r, rm in enumerate(doc.get("resourceMetrics") or doc.get("resource_metrics") or ()):
            resource = _attrs((rm.get("resource") or {}).get("attributes"))
            labels = {_RESOURCE_LABELS[k]: v for k, v in resource.items() if k in _RESOURCE_LABELS}
            for s, sm in enumerate(rm.get("scopeMetrics") or rm.get("scope_metrics") or ()):
                for i, m in enumerate(sm.get("metrics") or ()):
                    self.metric(m, labels, f"resourceMetrics[{r}].scopeMetrics[{s}].metrics[{i}]")


class OtlpMetricsJsonSource:
    """OTLP/JSON metrics: the Collector's file exporter, or an OTLP/HTTP JSON body."""

    name = FORMAT

    def sniff(self, head: bytes, path: Path) -> bool:
        head = strip_bom(head).lstrip()
        return head[:1] == b"{" and bool(_SNIFF.search(head[:4096]))

    def read(self, path: Path, options: ReadOptions) -> Capture:
        where = str(path)
        reader = _Reader()
        for position, doc in json_documents(strip_bom(path.read_bytes()), where):
            try:
                reader.document(doc, position)
            except _Bad as exc:
                raise ParseError(str(exc), where, f"{position} {exc.where}".strip()) from exc
            except (AttributeError, TypeError, KeyError, ValueError) as exc:
                # a value of the wrong JSON type somewhere in the document
                why = f"malformed OTLP metrics document: {type(exc).__name__}: {exc}"
                raise ParseError(why, where, position or None) from exc
        warnings = tuple(
            f"{where}: {n} OTLP metrics skipped ({why})" for why, n in reader.skipped.items()
        )
        meta = Metadata(
            provenance=(FileProvenance(where, FORMAT, len(reader.rows)),),
            warnings=warnings,
            quality={f"otlp_metrics.{k.replace(' ', '_')}": v for k, v in reader.skipped.items()},
        )
        return Capture(series=reader.rows.table(where), metadata=meta)


SOURCE = register(OtlpMetricsJsonSource())
