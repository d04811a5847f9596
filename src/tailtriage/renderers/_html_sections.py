"""The sections of the HTML report, each a function from the Report to an HTML fragment.

Every value that came from input passes through ``esc`` (text and attributes); the charts
escape their own labels.  Section ids are stable: tests and the navigation bar use them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import orjson

from tailtriage.renderers import _charts as charts
from tailtriage.renderers import _compare as cmp
from tailtriage.renderers._aggregate import replica_sort_key
from tailtriage.renderers._format import (
    fmt_ms,
    fmt_value,
    fmt_window,
    predicted_for,
    slo_label,
    stage_order,
)
from tailtriage.renderers._html_parts import View, delta, panel, section, swatch, table, tabs_html
from tailtriage.renderers._svg import esc
from tailtriage.report import Decomposition, Report, SloResult, is_duration_key
from tailtriage.report_sections import extra_dict

# --- summary --------------------------------------------------------------------------


def summary(v: View) -> str:
    r = v.report
    cards = [_slo_card(s) for s in r.slos]
    if r.throughput:
        rows = "".join(
            f'<div class="detail">{esc(k.replace("_per_s", "/s").replace("_", " "))} <b>{esc(fmt_value(x))}</b></div>'
            for k, x in r.throughput.items()
        )
        cards.append(
            f'<div class="card neutral"><div class="label">Throughput (incident)</div>{rows}</div>'
        )
    if not cards:
        cards.append(
            '<div class="card"><div class="label">SLO</div><div class="detail">no SLO given</div></div>'
        )
    body = (
        f'<p class="verdict">{verdict(r, v.main_slo)}</p><div class="cards">{"".join(cards)}</div>'
    )
    return section("summary", "SLO status", body, _windows_sub(r))


def _windows_sub(r: Report) -> str:
    if r.windows is None:
        return ""
    w = r.windows
    text = f"incident {fmt_window(w.incident)}{' (detected)' if w.detected else ''}"
    return text + (f" · baseline {fmt_window(w.baseline)}" if w.baseline else "")


def _slo_card(s: SloResult) -> str:
    if s.observed is None:  # nothing measured: neither met nor breached
        badge = '<span class="badge warn">no data</span>'
    elif s.breached:
        badge = '<span class="badge bad">BREACHED</span>'
    else:
        badge = '<span class="badge ok">met</span>'

    detail = [f"n={s.count:,}"]
    if s.ci_low is not None and s.ci_high is not None:
        detail.insert(0, f"95% CI {fmt_ms(s.ci_low)} – {fmt_ms(s.ci_high)}")
    if s.definition:
        detail.append(s.definition)
    warn = (
        f'<div class="detail"><span class="badge warn">⚠</span> {esc(s.warning)}</div>'
        if s.warning
        else ""
    )
    value, unit = _split_ms(s.observed)
    return (
        f'<div class="card{_card_state(s)}">'
        f'<div class="label">{esc(slo_label(s.spec))} · SLO &lt; {esc(fmt_ms(s.spec.threshold))}</div>'
        f'<div class="value">{esc(value)} <small>{esc(unit)}</small> {badge}</div>'
        f'<div class="detail">{esc(" · ".join(detail))}</div>{warn}</div>'
    )


def _card_state(s: SloResult) -> str:
    return " nodata" if s.observed is None else (" breach" if s.breached else "")


def _split_ms(seconds: float | None) -> tuple[str, str]:
    text = fmt_ms(seconds)
    value, _, unit = text.partition(" ")
    return value, unit


def verdict(r: Report, main: SloResult | None) -> str:
    """One paragraph that tells the story, built only from the report's numbers."""
    parts: list[str] = []
    if main is not None and main.observed is not None:
        state = (
            f"breaches the {fmt_ms(main.spec.threshold)} SLO by <b>{esc(fmt_ms(main.observed - main.spec.threshold))}</b>"
            if main.breached
            else f"meets the {fmt_ms(main.spec.threshold)} SLO"
        )
        parts.append(
            f"<b>{esc(slo_label(main.spec))} is {esc(fmt_ms(main.observed))}</b>: it {state}."
        )
    elif main is not None:
        parts.append(
            f"<b>No {esc(main.spec.metric.upper())} samples in the incident window</b>: the SLO "
            "cannot be judged. The data-quality panel says what was read and what was skipped."
        )
    d = r.decomposition
    if d is not None and d.stages:
        moved = [
            (s.seconds - s.baseline_seconds, s) for s in d.stages if s.baseline_seconds is not None
        ]
        if moved:
            delta, s = max(moved, key=lambda m: m[0])
            if delta > 0:
                parts.append(
                    f"The largest change against baseline is <b>{esc(s.stage)}</b> ({esc(fmt_ms(delta, signed=True))})."
                )
        else:
            top = max(d.stages, key=lambda s: s.seconds)
            parts.append(
                f"The largest stage is <b>{esc(top.stage)}</b> ({esc(fmt_ms(top.seconds))})."
            )
    if r.findings:
        f = r.findings[0]
        parts.append(f"Top finding: <b>{esc(f.category)}</b> (confidence {f.confidence:.2f}).")
    best = r.recommended_fix()
    if best is not None and main is not None:
        pred = predicted_for(best, main)
        parts.append(
            f"Top recommended fix: <b>{esc(best.action)}</b> → {esc(slo_label(main.spec))} {esc(fmt_ms(pred))}"
            " (meets the SLO)."
        )
    elif main is not None and (maybe := r.tentative_fix()) is not None:
        parts.append(
            f"No confident prediction: <b>{esc(maybe.action)}</b> is predicted to meet the SLO "
            "by a model that does not reproduce the incident within tolerance; read it as a "
            "direction and verify it on the incident's load."
        )
    elif main is not None and (held := r.accuracy_held_fix()) is not None:
        parts.append(
            f"Accuracy check first: <b>{esc(held.action)}</b> is predicted to meet the SLO but "
            "changes the model's numerics; run <code>tailtriage quantgate</code> on your own "
            "evaluation set before applying it. No fix without that check is predicted to meet "
            "the SLO."
        )
    elif main is not None and any(x.predicted for x in r.remediations):
        parts.append("No fix predicted to meet the SLO.")
    return " ".join(parts) or "Nothing to report."


# --- decomposition --------------------------------------------------------------------


def decomposition(v: View) -> str:
    d = v.report.decomposition
    if d is None:
        return ""
    threshold = v.threshold_for(d.metric, d.percentile)
    chart = charts.stage_bars(d, threshold, v.labels)
    legend = stage_legend(s.stage for s in d.stages)
    sub = f"{d.basis}; stages add up to {fmt_ms(d.total)}"
    body = panel(chart + legend) + panel(_decomposition_table(d, v.report, v.labels))
    return section(
        "decomposition", f"Where the p{d.percentile:g} {d.metric.upper()} goes", body, sub
    )


def _decomposition_table(d: Decomposition, r: Report, labels: tuple[str, str]) -> str:
    has_base = any(s.baseline_seconds is not None for s in d.stages)
    headers = (
        ["stage", labels[1], "share"]
        + ([labels[0], "delta"] if has_base else [])
        + ["stage p95 alone"]
    )
    rows = []
    for s in d.stages:
        row = [
            f"{swatch(s.stage)} {esc(s.stage)}",
            esc(fmt_ms(s.seconds)),
            esc(f"{s.seconds / d.total:.0%}" if d.total else "–"),
        ]
        if has_base:
            row += [esc(fmt_ms(s.baseline_seconds)), delta(s.seconds, s.baseline_seconds)]
        row.append(esc(fmt_ms(r.stage_percentiles.get(s.stage, {}).get("p95"))))
        rows.append(row)
    total = (
        ["total", esc(fmt_ms(d.total)), "100%"]
        + ([esc(fmt_ms(d.baseline_total)), delta(d.total, d.baseline_total)] if has_base else [])
        + [""]
    )
    html = table(headers, rows, num_cols=range(1, len(headers)))
    cells = "".join(
        f'<td class="num">{c}</td>' if i else f"<td>{c}</td>" for i, c in enumerate(total)
    )
    note = '<p class="notes">Stage shares are additive (they sum to the percentile); "stage p95 alone" is each stage\'s own percentile and is not additive.</p>'
    return html.replace("</tbody>", f'<tr class="total">{cells}</tr></tbody>') + note


# --- time: percentiles and the cluster ------------------------------------------------


def over_time(v: View) -> str:
    r, c = v.report, v.report.charts
    if v.domain is None or not (c.percentile_series or c.events or c.series):
        return ""
    parts = []
    if c.percentile_series:
        metric = (
            v.main_slo.spec.metric
            if v.main_slo
            else (r.decomposition.metric if r.decomposition else "latency")
        )
        pct = v.main_slo.spec.percentile if v.main_slo else None
        threshold = v.main_slo.spec.threshold if v.main_slo else None
        parts.append(
            panel(
                charts.percentile_chart(
                    c.percentile_series, pct, threshold, r.windows, v.domain, metric
                )
            )
        )
    if c.events or c.series:
        parts.append(
            panel(
                charts.timeline_chart(c.events, c.series, r.windows, v.domain)
                + _event_legend(c.events)
            )
        )
    return section(
        "timeline",
        "Over time",
        "".join(parts),
        "percentiles, Kubernetes events and scaling on one time axis (UTC)",
    )


def _event_legend(events: Sequence[tuple[float, str, str, str]]) -> str:
    if not events:
        return ""
    groups = {
        "ev-scale": "scaling",
        "ev-bad": "failure",
        "ev-pod": "pod lifecycle",
        "ev-wait": "pending / cold start",
        "ev-rollout": "rollout",
        "ev-other": "other",
    }
    seen = {charts.event_class(e[1]) for e in events}
    chips = "".join(
        f'<span class="chip"><svg class="swatch" viewBox="0 0 10 10" aria-hidden="true"><circle class="{g}" cx="5" cy="5" r="5"/></svg>{esc(label)}</span>'
        for g, label in groups.items()
        if g in seen
    )
    return f'<div class="legend">{chips}</div>'


# --- request, distributions, replicas -------------------------------------------------


def comparison(v: View) -> str:
    rows = cmp.compare_rows(v.report)
    if not rows:
        return ""
    body = []
    for row in rows:
        verdict = row.verdict
        b_lo, b_hi = cmp.ms_pair(row.before_ci)
        a_lo, a_hi = cmp.ms_pair(row.after_ci)
        d_lo, d_hi = cmp.ms_pair(row.delta_ci)
        delta = cmp.ms(row.delta)
        body.append(
            [
                esc(row.label)
                + f' <span class="muted">&lt; {esc(fmt_ms(cmp.ms(row.threshold)))}</span>',
                esc(fmt_ms(cmp.ms(row.before)))
                + f'<br><span class="muted">{esc(_ci(b_lo, b_hi))}</span>',
                esc(fmt_ms(cmp.ms(row.after)))
                + f'<br><span class="muted">{esc(_ci(a_lo, a_hi))}</span>',
                esc(fmt_ms(delta, signed=True))
                + f'<br><span class="muted">{esc(_ci(d_lo, d_hi))}</span>',
                f'<span class="badge {cmp.verdict_class(verdict)}">{esc(verdict or "–")}</span>'
                + (f'<br><span class="muted">{esc(row.warning)}</span>' if row.warning else ""),
            ]
        )
    html = table(["SLO", "before", "after", "change", "verdict"], body, num_cols=[1, 2, 3])
    changed = cmp.changed_stages(v.report)
    if changed:
        html += (
            '<p class="notes">Stages whose share moved by more than 10%: '
            + ", ".join(f"<b>{esc(s)}</b>" for s in changed)
            + "</p>"
        )
    return section(
        "compare",
        "Before and after",
        panel(html),
        "percentiles with 95% intervals; a change is real only when its interval excludes zero",
    )


def _ci(lo: float | None, hi: float | None) -> str:
    return "" if lo is None or hi is None else f"CI {fmt_ms(lo)} … {fmt_ms(hi)}"


def stage_legend(stages: Iterable[str]) -> str:
    """Colour chips of the stages present, in path order (the palette every chart shares)."""
    chips = "".join(
        f'<span class="chip">{swatch(s)}{esc(s)}</span>'
        for s in sorted(set(stages), key=stage_order)
    )
    return f'<div class="legend">{chips}</div>'


def tail_request(v: View) -> str:
    c = v.report.charts
    if not c.waterfall:
        return ""
    threshold = v.threshold_for("ttft")
    rid = (
        f"request {c.waterfall_request_id}"
        if c.waterfall_request_id
        else "a request from the tail band"
    )
    return section(
        "request",
        "A representative tail request",
        panel(
            charts.waterfall_chart(c.waterfall, threshold) + stage_legend(w[0] for w in c.waterfall)
        ),
        rid,
    )


def distributions(v: View) -> str:
    r = v.report
    cdfs = r.charts.cdfs
    if not cdfs:
        return ""
    ordered = sorted(
        cdfs,
        key=lambda m: (
            ["ttft", "itl", "tpot", "e2e"].index(m) if m in ("ttft", "itl", "tpot", "e2e") else 9,
            m,
        ),
    )
    panels = [
        panel(charts.cdf_chart(m, cdfs[m], v.threshold_for(m), r.percentiles.get(m, {})))
        for m in ordered
    ]
    return section(
        "distributions",
        "Distributions",
        f'<div class="grid2">{"".join(panels)}</div>',
        "latency by percentile, tail stretched; dots mark the reported percentiles",
    )


def replicas(v: View) -> str:
    reps = v.report.charts.replicas
    if not reps:
        return ""
    metric = v.main_slo.spec.metric if v.main_slo else "ttft"
    pct = f"{v.main_slo.spec.percentile:g}" if v.main_slo else "95"
    key = replica_sort_key(reps, f"{metric}_p{pct}")
    threshold = v.threshold_for(key.split("_p")[0]) if "_p" in key else None
    keys = sorted({k for x in reps.values() for k in x}, key=lambda k: (k != "count", k))
    rows = [
        [esc(name)] + [esc(_cell(k, reps[name].get(k))) for k in keys]
        for name in sorted(reps, key=lambda n: -reps[n].get(key, 0.0))
    ]
    tabs = tabs_html(
        "replica",
        [
            ("Chart", charts.replica_chart(reps, key, threshold)),
            ("Table", table(["replica", *keys], rows, num_cols=range(1, len(keys) + 1))),
        ],
    )
    return section("replicas", "Per replica", panel(tabs), f"sorted by {key}")


def _cell(key: str, value: float | None) -> str:
    if value is None:
        return "–"
    return (
        fmt_ms(value)
        if is_duration_key(key)
        else fmt_value(int(value) if key == "count" else value)
    )


# --- numbers, data quality, extra -----------------------------------------------------


def numbers(v: View) -> str:
    r = v.report
    tabs = []
    for label, data in (
        ("Latency percentiles", r.percentiles),
        ("Stage percentiles", r.stage_percentiles),
        ("Attribution", r.attribution),
    ):
        if data:
            tabs.append((label, _nested_table(data)))
    if r.throughput:
        tabs.append(
            (
                "Throughput",
                table(
                    ["measure", "value"],
                    [[esc(k), esc(fmt_value(x))] for k, x in r.throughput.items()],
                    [1],
                ),
            )
        )
    if not tabs:
        return ""
    return section(
        "numbers",
        "Numbers",
        panel(tabs_html("numbers", tabs)),
        "percentiles, never averages; durations in ms",
    )


def _nested_table(data: Mapping[str, Mapping[str, float]]) -> str:
    cols = sorted({k for x in data.values() for k in x}, key=_col_key)
    rows = [
        [esc(name)] + [esc(fmt_ms(data[name].get(c))) for c in cols]
        for name in sorted(data, key=stage_order)
    ]
    return table(["", *cols], rows, num_cols=range(1, len(cols) + 1))


def _col_key(c: str) -> tuple[float, str]:
    digits = c.lstrip("p")
    return (float(digits), c) if digits.replace(".", "", 1).isdigit() else (1e9, c)


def quality(v: View) -> str:
    q = v.report.data_quality
    tiles = [
        ("requests", f"{q.requests:,}"),
        ("spans", f"{q.spans:,}"),
        ("metric series", f"{q.series:,}"),
        ("events", f"{q.events:,}"),
        ("unattributed time", f"{q.unattributed_share:.1%}"),
        ("clock adjustments", f"{q.clock_adjustments:,}"),
    ]
    body = (
        '<div class="quality">'
        + "".join(f"<div><b>{esc(val)}</b><span>{esc(k)}</span></div>" for k, val in tiles)
        + "</div>"
    )
    if q.skipped_files:
        rows = [[esc(f.get("path", "?")), esc(f.get("reason", ""))] for f in q.skipped_files]
        body += '<h3 class="muted">Skipped files</h3>' + table(["file", "reason"], rows)
    if q.counts:
        body += "<h3>Records dropped or repaired</h3>" + table(
            ["counter", "count"], [[esc(k), esc(f"{n:,}")] for k, n in q.counts.items()], [1]
        )
    warns = list(q.warnings)
    if warns:
        body += '<ul class="warnlist">' + "".join(f"<li>{esc(w)}</li>" for w in warns) + "</ul>"
    if v.notes:
        body += '<ul class="notes">' + "".join(f"<li>{esc(n)}</li>" for n in v.notes) + "</ul>"
    return section("quality", "Data quality", panel(body))


def extra(v: View) -> str:
    """Every other section of the report (compare deltas, breakdowns, timings) as JSON, one
    collapsible block per key: complete, and out of the way."""
    sections = extra_dict(v.report.sections)
    if not sections:
        return ""
    blocks = []
    for key, value in sections.items():
        text = orjson.dumps(
            value,
            default=str,
            option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY,
        ).decode()
        blocks.append(
            f"<details><summary><code>{esc(key)}</code></summary>"
            f'<div class="cfg"><pre>{esc(text)}</pre></div></details>'
        )
    return section("extra", "More", panel("".join(blocks)), "other sections of the report, as JSON")
