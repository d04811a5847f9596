"""Prometheus rules: per-stage queueing vs execution (recording) and SLO burn-rate alerts.

Recording rules, per engine stage (engine_queue, prefill, decode), over 5 minutes:
``tailtriage:<stage>_seconds:mean_rate5m`` (mean), ``...:p95_rate5m`` (from the buckets), and
``tailtriage:engine_queue:share_rate5m``: the share of engine time spent queueing, the number
that says whether to add capacity (queueing) or tune the engine (execution).

Alert rules follow the Google SRE workbook's multiwindow, multi-burn-rate recipe: the SLI is
the share of requests slower than the SLO threshold (the histogram's ``le`` bucket), the error
budget is ``1 - percentile``; a page fires at burn rate 14.4 over 1 h (and 5 m) or 6 over 6 h
(and 30 m), a ticket at 3 over 1 d (and 2 h) or 1 over 3 d (and 6 h)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from tailtriage.analyses.results import SloSpec
from tailtriage.instrument.engines import EngineMetrics
from tailtriage.model.timeparse import parse_duration

#: (severity, long window, short window, burn rate) - SRE workbook, "Alerting on SLOs", table 5-8
BURN_RATES: Final = (
    ("page", "1h", "5m", 14.4),
    ("page", "6h", "30m", 6.0),
    ("ticket", "1d", "2h", 3.0),
    ("ticket", "3d", "6h", 1.0),
)
RATE_WINDOW: Final = "5m"
STAGE_PERCENTILE: Final = 0.95


def le_matcher(bound: float) -> str:
    """A regex for the ``le`` label of ``bound``, whatever the exporter's float spelling
    (prometheus_client writes ``1.0``, Go clients ``1``)."""
    text = f"{bound:g}"
    # PromQL strings take Go escapes: the regex's backslash is written twice
    regex = re.escape(text) + ("0*" if "." in text else r"(\.0*)?")
    return regex.replace("\\", "\\\\")


def bucket_for(threshold: float, bounds: Sequence[float]) -> tuple[float, str]:
    """The bucket bound the SLI counts below, and a note when it is not the threshold itself."""
    if not bounds or threshold in bounds:
        return threshold, ""
    below = [b for b in bounds if b <= threshold]
    bound = below[-1] if below else bounds[0]
    return bound, (
        f"  # no bucket at {threshold:g} s: counted at le={bound:g} (stricter); "
        f"add the bucket to count the SLO exactly"
    )


def recording_rules(engine: EngineMetrics) -> str:
    by = engine.group_by
    lines = [
        "# Recording rules: queueing apart from execution, per engine stage.",
        "# Why: a p95 TTFT breach is either waiting (add capacity, scale on the queue) or",
        "# working (tune batching, prefill); these series say which, per model, every scrape,",
        "# from the engine's own histograms - no traces needed.",
        "groups:",
        "  - name: tailtriage-stages",
        "    rules:",
    ]
    present = {s: h for s, h in engine.stages.items() if h}
    for stage, hist in present.items():
        lines += [
            f"      - record: tailtriage:{stage}_seconds:mean_rate{RATE_WINDOW}",
            f"        expr: sum by ({by}) (rate({hist}_sum[{RATE_WINDOW}]))"
            f" / sum by ({by}) (rate({hist}_count[{RATE_WINDOW}]))",
            f"      - record: tailtriage:{stage}_seconds:p95_rate{RATE_WINDOW}",
            f"        expr: histogram_quantile({STAGE_PERCENTILE}, sum by ({by}, le) "
            f"(rate({hist}_bucket[{RATE_WINDOW}])))",
        ]
    if "engine_queue" in present and len(present) > 1:
        total = " + ".join(
            f"sum by ({by}) (rate({h}_sum[{RATE_WINDOW}]))" for h in present.values()
        )
        lines += [
            "      # share of the engine's time spent waiting: near 1 = capacity, near 0 = execution",
            f"      - record: tailtriage:engine_queue:share_rate{RATE_WINDOW}",
            f"        expr: sum by ({by}) (rate({present['engine_queue']}_sum[{RATE_WINDOW}]))"
            f" / ({total})",
        ]
    return "\n".join(lines) + "\n"


def alert_rules(engine: EngineMetrics, slos: Sequence[SloSpec]) -> str:
    lines = [
        "# SLO burn-rate alerts (Google SRE workbook: multiwindow, multi-burn-rate).",
        "# Why: a percentile SLO such as p95 TTFT < 500 ms is the promise that at most 5 % of",
        "# requests are slower; these rules page when that 5 % budget burns fast enough to be",
        "# gone within days, and stay quiet on a short blip (both windows must agree).",
        "# The engine's TTFT starts when tokenization begins: the gateway and the API server's",
        "# parsing come on top of it, so the TTFT users see is larger (tailtriage doctor's",
        "# edge_ttft check); keep the threshold below the SLO by that edge overhead.",
        "groups:",
    ]
    for slo in slos:
        if slo.metric not in engine.slis:
            lines.append(f"  # {slo}: {engine.name} exports no histogram for {slo.metric}")
            continue
        hist, bounds = engine.slis[slo.metric]
        bound, note = bucket_for(slo.threshold, bounds)
        budget = round(1.0 - slo.percentile / 100.0, 6)
        name = f"{slo.metric}_p{slo.percentile:g}".replace(".", "_")
        le = le_matcher(bound)
        windows = sorted(
            {w for _, long, short, _ in BURN_RATES for w in (long, short)}, key=parse_duration
        )
        lines += [f"  - name: tailtriage-slo-{name}", "    rules:"]
        if note:
            lines.append(f"    {note.strip()}")
        for w in windows:
            lines += [
                f"      - record: tailtriage:slo_{name}:error_ratio_rate{w}",
                f"        expr: 1 - (sum by ({engine.group_by}) (rate({hist}_bucket"
                f'{{le=~"{le}"}}[{w}])) / sum by ({engine.group_by}) (rate({hist}_count[{w}])))',
            ]
        for severity in ("page", "ticket"):
            conds = [
                f"(tailtriage:slo_{name}:error_ratio_rate{long} > {rate} * {budget} and "
                f"tailtriage:slo_{name}:error_ratio_rate{short} > {rate} * {budget})"
                for sev, long, short, rate in BURN_RATES
                if sev == severity
            ]
            lines += [
                f"      - alert: TailtriageSLOBurn_{name}_{severity}",
                "        expr: " + " or ".join(conds),
                "        labels:",
                f"          severity: {severity}",
                "        annotations:",
                f'          summary: "{slo} is burning its error budget ({severity})"',
                '          description: "Run `tailtriage triage` on the last hour to see which '
                'stage the tail time went to."',
            ]
    return "\n".join(lines) + "\n"
