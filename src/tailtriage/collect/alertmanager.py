"""Alertmanager's webhook payload (``"version": "4"``), as documented at
https://prometheus.io/docs/alerting/latest/configuration/#webhook_config::

    {"version": "4", "groupKey": "...", "status": "firing", "receiver": "tailtriage",
     "groupLabels": {...}, "commonLabels": {...}, "externalURL": "http://alertmanager:9093",
     "alerts": [{"status": "firing", "labels": {...}, "annotations": {...},
                 "startsAt": "RFC 3339", "endsAt": "RFC 3339", "generatorURL": "...",
                 "fingerprint": "..."}]}

Parsed into frozen :class:`Alert` values; anything malformed is a ParseError naming the
position, so the webhook can answer 400 with it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from tailtriage.errors import ParseError
from tailtriage.model.timeparse import parse_instant

PAYLOAD_VERSION = "4"
#: Alertmanager's "no end yet" (Go's zero time) and anything before the epoch mean "open"
_ZERO_TIME = "0001-01-01T00:00:00Z"


@dataclass(frozen=True)
class Alert:
    """One alert of a notification."""

    fingerprint: str
    status: str  # firing | resolved
    name: str  # labels.alertname
    labels: tuple[tuple[str, str], ...]
    starts_at: float
    ends_at: float | None
    summary: str  # annotations.summary or description, else ""
    generator_url: str

    def label(self, key: str) -> str | None:
        return dict(self.labels).get(key)

    @property
    def key(self) -> str:
        """One incident per alert instance: Alertmanager keeps the fingerprint and startsAt
        of a firing alert across re-notifications."""
        return f"{self.fingerprint}@{self.starts_at:.0f}"


def _str_map(value: Any, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ParseError("expected an object of strings", "alertmanager webhook", where)
    return {str(k): str(v) for k, v in value.items()}


def _time(value: Any, where: str) -> float | None:
    if not isinstance(value, str) or not value or value == _ZERO_TIME:
        return None
    try:
        t = parse_instant(value)
    except (ValueError, OverflowError):
        raise ParseError(
            f"not an RFC 3339 time: {value!r}", "alertmanager webhook", where
        ) from None
    return t if t > 0 else None


def parse_webhook(body: bytes) -> tuple[Alert, ...]:
    """The alerts of one webhook notification (ParseError on a malformed one)."""
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise ParseError(f"invalid JSON: {exc}", "alertmanager webhook") from None
    if not isinstance(doc, Mapping) or not isinstance(doc.get("alerts"), list):
        raise ParseError("no alerts list", "alertmanager webhook", "$.alerts")
    if str(doc.get("version", PAYLOAD_VERSION)) != PAYLOAD_VERSION:
        raise ParseError(
            f"payload version {doc.get('version')!r}; expected {PAYLOAD_VERSION}",
            "alertmanager webhook",
            "$.version",
        )
    alerts = []
    for i, raw in enumerate(doc["alerts"]):
        where = f"$.alerts[{i}]"
        if not isinstance(raw, Mapping):
            raise ParseError("not an object", "alertmanager webhook", where)
        labels = _str_map(raw.get("labels"), f"{where}.labels")
        annotations = _str_map(raw.get("annotations"), f"{where}.annotations")
        starts = _time(raw.get("startsAt"), f"{where}.startsAt")
        if starts is None:
            raise ParseError("no startsAt", "alertmanager webhook", f"{where}.startsAt")
        fingerprint = raw.get("fingerprint")
        if not isinstance(fingerprint, str) or not fingerprint:
            # older senders: the sorted label set identifies the alert
            fingerprint = orjson.dumps(labels, option=orjson.OPT_SORT_KEYS).decode()
        alerts.append(
            Alert(
                fingerprint=fingerprint,
                status=str(raw.get("status", doc.get("status", "firing"))),
                name=labels.get("alertname", ""),
                labels=tuple(sorted(labels.items())),
                starts_at=starts,
                ends_at=_time(raw.get("endsAt"), f"{where}.endsAt"),
                summary=annotations.get("summary") or annotations.get("description") or "",
                generator_url=str(raw.get("generatorURL") or ""),
            )
        )
    return tuple(alerts)
