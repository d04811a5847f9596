"""Helpers shared by the metric sources (Prometheus API files, exposition snapshots, the
live reader, vLLM run time series): canonical label JSON, Go float syntax, and a row
builder for the Capture's ``series`` table."""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import lru_cache

import orjson
import pyarrow as pa

from tailtriage.model import make_table
from tailtriage.model import schema as S

#: labels whose values are numbers; they are rewritten in one spelling ("1.0" -> "1") so the
#: same bucket has the same key whichever exporter or Prometheus version wrote it.
NUMERIC_LABELS = frozenset({"le", "quantile"})

_SPECIAL = {
    "+inf": math.inf,
    "inf": math.inf,
    "-inf": -math.inf,
    "nan": math.nan,
}


_BOM = b"\xef\xbb\xbf"


def strip_bom(raw: bytes) -> bytes:
    """Drop a UTF-8 byte-order mark (editors on Windows add one; JSON parsers reject it)."""
    return raw[3:] if raw.startswith(_BOM) else raw


def parse_float(text: str) -> float:
    """A Prometheus value: Go float syntax, ``+Inf``/``-Inf``/``NaN`` in any case.

    Raises ValueError on anything else (callers add file and position)."""
    special = _SPECIAL.get(text.lower())
    if special is not None:
        return special
    if "_" in text:  # Python accepts 1_000, Prometheus does not
        raise ValueError(f"invalid number {text!r}")
    return float(text)


@lru_cache(maxsize=4096)  # a scrape repeats the same few bucket bounds many times
def format_number_label(text: str) -> str:
    """``le``/``quantile`` values in one spelling: ``+Inf``, ``1``, ``0.25``, ``1e-05``."""
    try:
        value = parse_float(text)
    except ValueError:
        return text  # malformed le: keep as written, analyses report it
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if math.isnan(value):
        return "NaN"
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return repr(value)


def labels_json(labels: Mapping[str, str]) -> str:
    """Labels as a JSON object with sorted keys (the ``series.labels`` column)."""
    clean = {
        k: (format_number_label(v) if k in NUMERIC_LABELS else v)
        for k, v in labels.items()
        if k != "__name__"
    }
    return orjson.dumps(clean, option=orjson.OPT_SORT_KEYS).decode()


class SeriesRows:
    """Accumulates ``series`` rows column by column (cheap appends, one Arrow build)."""

    __slots__ = ("labels", "metric", "time", "value")

    def __init__(self) -> None:
        self.metric: list[str] = []
        self.labels: list[str] = []
        self.time: list[float] = []
        self.value: list[float] = []

    def __len__(self) -> int:
        return len(self.metric)

    def add(self, metric: str, labels: str, time: float, value: float) -> None:
        self.metric.append(metric)
        self.labels.append(labels)
        self.time.append(time)
        self.value.append(value)

    def extend(self, metric: str, labels: str, times: list[float], values: list[float]) -> None:
        """Many samples of one series."""
        self.metric.extend([metric] * len(times))
        self.labels.extend([labels] * len(times))
        self.time.extend(times)
        self.value.extend(values)

    def table(self, source: str | None) -> pa.Table:
        return make_table(
            S.SERIES,
            {
                "metric": self.metric,
                "labels": self.labels,
                "time": self.time,
                "value": self.value,
                "source": [source] * len(self.metric),
            },
        )
