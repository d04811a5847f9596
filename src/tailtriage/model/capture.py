"""The Capture: everything known about a serving stack over a time range.

Every source writes one, every analysis reads one.  Tables are Arrow (see ``schema.py``);
the Capture is persisted as a DuckDB file (one table per logical table plus ``metadata``)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import orjson
import pyarrow as pa

from tailtriage.errors import InputError, OutputError
from tailtriage.model import schema as S
from tailtriage.outputs import replacing


@dataclass(frozen=True)
class FileProvenance:
    """Where part of a capture came from."""

    path: str
    format: str
    records: int = 0  # spans, samples, events or requests read from it
    skipped: int = 0  # records skipped (counted in data quality)


@dataclass(frozen=True)
class SkippedFile:
    path: str
    reason: str
    #: where in the file the reader stopped (``line 3, column 7``), when it knows
    position: str | None = None


@dataclass(frozen=True)
class ClockAdjustment:
    """A span shifted to repair clock skew between hosts (Jaeger adjuster semantics)."""

    trace_id: str
    span_id: str
    service: str | None
    delta: float  # seconds added to the span's start and end


@dataclass(frozen=True)
class Metadata:
    """Provenance and data quality of a capture."""

    schema_version: int = S.SCHEMA_VERSION
    producer: str = "tailtriage"
    provenance: tuple[FileProvenance, ...] = ()
    skipped_files: tuple[SkippedFile, ...] = ()
    clock_adjustments: tuple[ClockAdjustment, ...] = ()
    #: counters of records dropped or repaired, e.g. {"spans.duplicate_id": 3}
    quality: Mapping[str, int] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    seed: int | None = None
    #: free-form facts a producer knows for sure (scenario name, loadgen settings, ...)
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Metadata:
        return cls(
            schema_version=int(d.get("schema_version", S.SCHEMA_VERSION)),
            producer=str(d.get("producer", "tailtriage")),
            provenance=tuple(FileProvenance(**p) for p in d.get("provenance", ())),
            skipped_files=tuple(SkippedFile(**p) for p in d.get("skipped_files", ())),
            clock_adjustments=tuple(ClockAdjustment(**p) for p in d.get("clock_adjustments", ())),
            quality=dict(d.get("quality", {})),
            warnings=tuple(d.get("warnings", ())),
            seed=d.get("seed"),
            extra=dict(d.get("extra", {})),
        )

    def merged(self, other: Metadata) -> Metadata:
        quality = dict(self.quality)
        for k, v in other.quality.items():
            quality[k] = quality.get(k, 0) + v
        return Metadata(
            schema_version=self.schema_version,
            producer=self.producer,
            provenance=self.provenance + other.provenance,
            skipped_files=self.skipped_files + other.skipped_files,
            clock_adjustments=self.clock_adjustments + other.clock_adjustments,
            quality=quality,
            warnings=self.warnings + other.warnings,
            seed=self.seed if self.seed is not None else other.seed,
            extra={**other.extra, **self.extra},
        )


def _empty(name: str) -> pa.Table:
    return S.TABLES[name].empty_table()


@dataclass(frozen=True)
class Capture:
    """Columnar record of requests, their stages, token times, spans, metric series and events."""

    requests: pa.Table = field(default_factory=lambda: _empty("requests"))
    stages: pa.Table = field(default_factory=lambda: _empty("stages"))
    token_times: pa.Table = field(default_factory=lambda: _empty("token_times"))
    spans: pa.Table = field(default_factory=lambda: _empty("spans"))
    series: pa.Table = field(default_factory=lambda: _empty("series"))
    events: pa.Table = field(default_factory=lambda: _empty("events"))
    metadata: Metadata = field(default_factory=Metadata)

    def __post_init__(self) -> None:
        for name, schema in S.TABLES.items():
            table: pa.Table = getattr(self, name)
            if not table.schema.equals(schema, check_metadata=False):
                try:
                    object.__setattr__(self, name, table.select(schema.names).cast(schema))
                except (KeyError, pa.ArrowInvalid, pa.ArrowTypeError, ValueError) as exc:
                    raise ValueError(
                        f"capture table {name!r} does not match its schema: {exc}"
                    ) from exc

    def table(self, name: str) -> pa.Table:
        if name not in S.TABLES:
            raise KeyError(f"unknown capture table {name!r}; known: {', '.join(S.TABLES)}")
        return getattr(self, name)

    def replace(self, **changes: Any) -> Capture:
        return dataclasses.replace(self, **changes)

    @property
    def time_range(self) -> tuple[float, float] | None:
        """First arrival and last finish (or arrival) of the requests, else of the series."""
        for tab, lo_col, hi_col in (
            (self.requests, "arrival", "finish"),
            (self.series, "time", "time"),
            (self.events, "time", "time"),
        ):
            if tab.num_rows:
                lo = pa.compute.min(tab[lo_col]).as_py()
                hi = pa.compute.max(tab[hi_col]).as_py()
                if hi is None:
                    hi = pa.compute.max(tab[lo_col]).as_py()
                return (float(lo), float(hi))
        return None

    # -- persistence ---------------------------------------------------------------------
    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the capture as a DuckDB file, replacing an existing one atomically: written
        to a temporary file in the same folder, then renamed over it under a lock
        (:func:`tailtriage.outputs.replacing`), so a killed or concurrent save leaves the
        previous capture whole and loadable."""
        p = Path(path)
        with replacing(p) as tmp:
            try:
                con = duckdb.connect(str(tmp))
            except duckdb.Error as exc:
                raise OutputError(f"cannot create the capture ({exc})", path=str(p)) from None
            try:
                for name in S.TABLES:
                    tab = self.table(name)  # noqa: F841  (referenced by name in SQL)
                    con.execute(f'CREATE TABLE "{name}" AS SELECT * FROM tab')
                con.execute("CREATE TABLE metadata (key VARCHAR, value VARCHAR)")
                con.execute(
                    "INSERT INTO metadata VALUES (?, ?)",
                    ["metadata", orjson.dumps(self.metadata.to_dict()).decode()],
                )
                con.execute("CHECKPOINT")  # everything in the file, nothing left in a .wal
            except duckdb.Error as exc:
                raise OutputError(f"cannot write the capture ({exc})", path=str(p)) from None
            finally:
                con.close()
        return p

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Capture:
        """Read a capture written by :meth:`save`."""
        p = Path(path)
        try:
            con = duckdb.connect(str(p), read_only=True)
        except duckdb.Error as exc:
            raise InputError(f"not a tailtriage capture ({exc})", path=str(p)) from exc
        try:
            names = {
                r[0]
                for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()
            }
            if "metadata" not in names or "requests" not in names:
                raise InputError(
                    "DuckDB file is not a tailtriage capture (no metadata table)", path=str(p)
                )
            rows = con.execute("SELECT value FROM metadata WHERE key = 'metadata'").fetchall()
            meta = Metadata.from_dict(orjson.loads(rows[0][0])) if rows else Metadata()
            if meta.schema_version > S.SCHEMA_VERSION:
                raise InputError(
                    f"capture schema version {meta.schema_version} is newer than this tailtriage "
                    f"({S.SCHEMA_VERSION}); upgrade tailtriage",
                    path=str(p),
                )
            tables = {}
            for name in S.TABLES:
                if name in names:
                    tables[name] = con.sql(f'SELECT * FROM "{name}"').to_arrow_table()
                else:
                    tables[name] = _empty(name)
        finally:
            con.close()
        return cls(metadata=meta, **tables)


def concat(captures: Iterable[Capture]) -> Capture:
    """Merge several captures (e.g. one per file of a bundle) into one."""
    caps = list(captures)
    if not caps:
        return Capture()
    meta = caps[0].metadata
    for c in caps[1:]:
        meta = meta.merged(c.metadata)
    tables = {name: pa.concat_tables([c.table(name) for c in caps]) for name in S.TABLES}
    return Capture(metadata=meta, **tables)


def is_capture_file(path: str | os.PathLike[str]) -> bool:
    """True when ``path`` starts with DuckDB's file magic."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(16)
    except OSError:
        return False
    return head[8:12] == b"DUCK"
