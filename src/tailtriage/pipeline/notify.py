"""The short summary of a triage, posted to a Slack-compatible incoming webhook.

Slack's incoming webhooks take ``{"text": ..., "blocks": [...]}`` (``text`` is the fallback
that notifications and other chat tools such as Mattermost and Rocket.Chat show); the
summary says the top finding, the p95 split by stage, the recommended fix with its predicted
effect, and where the full report is."""

from __future__ import annotations

import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

import orjson

from tailtriage.errors import BackendError
from tailtriage.report import Report
from tailtriage.sources.redact import redact_text

#: stages shown in the split; the rest are summed as "other"
SPLIT_STAGES = 4
#: seconds a chat webhook may take to accept a message
POST_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Message:
    """A chat message: the plain-text fallback and its Block Kit blocks."""

    text: str
    blocks: tuple[dict[str, Any], ...]

    def payload(self) -> bytes:
        return orjson.dumps({"text": self.text, "blocks": list(self.blocks)})


def _ms(seconds: float | None) -> str:
    return "n/a" if seconds is None else f"{seconds * 1000:.0f} ms"


def summary_lines(report: Report) -> list[str]:
    """Top finding, p95 split, recommended fix: one line each."""
    lines = []
    for slo in report.slos:
        state = "BREACHED" if slo.breached else "met"
        lines.append(f"{slo.spec}: observed {_ms(slo.observed)} ({state})")
    if report.findings:
        top = report.findings[0]
        lines.append(f"Top finding: {top.category} ({top.confidence:.0%}) - {top.summary}")
    else:
        lines.append("Top finding: none (see the report's data quality)")
    d = report.decomposition
    if d is not None and d.stages:
        parts = sorted(d.stages, key=lambda s: s.seconds, reverse=True)
        shown = [f"{s.stage} {_ms(s.seconds)}" for s in parts[:SPLIT_STAGES]]
        rest = sum(s.seconds for s in parts[SPLIT_STAGES:])
        if rest > 0:
            shown.append(f"other {_ms(rest)}")
        lines.append(f"p{d.percentile:g} {d.metric} {_ms(d.total)} = " + " + ".join(shown))
    fix = next((r for r in report.remediations if r.recommended), None)
    if fix is not None:
        effect = ", ".join(
            f"{k.removesuffix('_ms')} -> {_ms(v)}"
            for k, v in fix.predicted.items()
            if k != "throughput_change_pct" and isinstance(v, float)
        )
        throughput = fix.predicted.get("throughput_change_pct")
        if throughput is not None:
            effect += f", throughput {throughput:+.1f}%"
        lines.append(
            f"Recommended fix: {fix.summary}" + (f" (predicted {effect})" if effect else "")
        )
    return lines


def triage_message(title: str, report: Report, link: str) -> Message:
    lines = summary_lines(report)
    text = f"tailtriage: {title}\n" + "\n".join(lines) + f"\nReport: {link}"
    blocks = (
        {"type": "header", "text": {"type": "plain_text", "text": f"tailtriage: {title}"[:150]}},
        {"type": "section", "text": {"type": "mrkdwn", "text": "\n".join(lines)[:3000]}},
        {"type": "context", "elements": [{"type": "mrkdwn", "text": f"Report: {link}"}]},
    )
    return Message(text, blocks)


def failure_message(title: str, error: str) -> Message:
    text = f"tailtriage: {title}\nTriage failed: {error}"
    return Message(text, ({"type": "section", "text": {"type": "mrkdwn", "text": text[:3000]}},))


def post(url: str, message: Message, timeout: float = POST_TIMEOUT_S) -> None:
    """POST the message; BackendError (one line, URL without secrets) when it is refused."""
    req = urllib.request.Request(
        url, data=message.payload(), headers={"Content-Type": "application/json"}
    )
    # incoming-webhook URLs carry their secret in the path: show the host only
    shown = redact_text(url).split("/", 3)[:3]
    where = "/".join(shown)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            resp.read()
    except urllib.error.HTTPError as exc:
        raise BackendError(f"notify webhook at {where} answered HTTP {exc.code}") from None
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise BackendError(f"cannot reach the notify webhook at {where}: {reason}") from None
