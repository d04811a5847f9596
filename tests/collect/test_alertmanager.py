"""Alertmanager webhook payloads (version 4, as documented) into alerts and incidents."""

from __future__ import annotations

import json

import pytest

from tailtriage.collect.alertmanager import parse_webhook
from tailtriage.errors import ParseError
from tailtriage.pipeline.watch import incidents_from_webhook

#: the documented example payload, with two alerts of one group
PAYLOAD = {
    "version": "4",
    "groupKey": '{}:{alertname="TTFTBudgetBurn"}',
    "truncatedAlerts": 0,
    "status": "firing",
    "receiver": "tailtriage",
    "groupLabels": {"alertname": "TTFTBudgetBurn"},
    "commonLabels": {"alertname": "TTFTBudgetBurn", "severity": "page"},
    "commonAnnotations": {},
    "externalURL": "http://alertmanager:9093",
    "alerts": [
        {
            "status": "firing",
            "labels": {"alertname": "TTFTBudgetBurn", "namespace": "llm", "severity": "page"},
            "annotations": {"summary": "p95 TTFT over 500 ms"},
            "startsAt": "2026-06-01T10:00:00.123Z",
            "endsAt": "0001-01-01T00:00:00Z",
            "generatorURL": "http://prometheus:9090/graph?g0.expr=...",
            "fingerprint": "c3a1b2d4e5f60718",
        },
        {
            "status": "resolved",
            "labels": {"alertname": "TTFTBudgetBurn", "namespace": "chat"},
            "annotations": {},
            "startsAt": "2026-06-01T09:00:00Z",
            "endsAt": "2026-06-01T09:30:00Z",
            "generatorURL": "",
            "fingerprint": "0f0e0d0c0b0a0908",
        },
    ],
}


def test_payload_alerts_and_the_firing_ones_as_incidents() -> None:
    body = json.dumps(PAYLOAD).encode()
    firing, resolved = parse_webhook(body)
    assert firing.starts_at == pytest.approx(1780308000.123)
    assert firing.ends_at is None and resolved.ends_at == pytest.approx(1780306200.0)
    assert firing.label("namespace") == "llm" and firing.summary == "p95 TTFT over 500 ms"
    (incident,) = incidents_from_webhook(body)
    assert incident.key == firing.key and incident.namespace == "llm"
    assert incident.title == "TTFTBudgetBurn: p95 TTFT over 500 ms"
    # a re-notification of the same alert is the same incident
    again = json.loads(body)
    again["alerts"][0]["annotations"]["summary"] = "still burning"
    assert incidents_from_webhook(json.dumps(again).encode())[0].key == incident.key


@pytest.mark.parametrize(
    ("change", "position"),
    [
        ({"alerts": "x"}, "$.alerts"),
        ({"version": "3"}, "$.version"),
        ({"alerts": [{"labels": {}, "startsAt": "yesterday"}]}, "$.alerts[0].startsAt"),
        ({"alerts": [{"labels": []}]}, "$.alerts[0].labels"),
    ],
)
def test_malformed_payloads_name_the_position(change: dict[str, object], position: str) -> None:
    with pytest.raises(ParseError, match=position.replace("$", r"\$").replace("[", r"\[")):
        parse_webhook(json.dumps(PAYLOAD | change).encode())
