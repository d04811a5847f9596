"""Merge the ``events`` of several files: the same Kubernetes fact often arrives twice.

``kubectl get events`` says a ReplicaSet created pod X (``SuccessfulCreate``) and ``kubectl get
pods`` gives X's creationTimestamp; both become ``pod_created`` for X.  Counted twice, they
would double pod counts and cold-start statistics, so one fact — same kind, namespace, pod (or
object) and second (Kubernetes timestamps have one-second precision) — is kept once, preferring
the row that carries a derived duration."""

from __future__ import annotations

import duckdb
import pyarrow as pa

from tailtriage.model import schema as S


def dedupe_events(events: pa.Table) -> tuple[pa.Table, int]:
    """The events with duplicates removed, and how many were removed."""
    if events.num_rows < 2:
        return events, 0
    con = duckdb.connect(":memory:")
    try:
        con.register("ev", events)
        out = con.sql(
            """
            SELECT * EXCLUDE (rn) FROM (
              SELECT *, row_number() OVER (
                PARTITION BY kind, coalesce(namespace, ''),
                  coalesce(json_extract_string(attributes, '$.pod'), object_name, ''),
                  floor(time)
                ORDER BY duration IS NULL, source, time) AS rn
              FROM ev)
            WHERE rn = 1 ORDER BY time, kind
            """
        ).to_arrow_table()
    finally:
        con.close()
    out = out.select(S.EVENTS.names).cast(S.EVENTS)
    return out, events.num_rows - out.num_rows
