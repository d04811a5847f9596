"""The findings and remediations sections of the HTML report."""

from __future__ import annotations

from collections.abc import Sequence

from tailtriage.renderers import _charts as charts
from tailtriage.renderers._format import fmt_pct, fmt_value, predicted_for, slo_label
from tailtriage.renderers._html_parts import View, panel, section, swatch, table
from tailtriage.renderers._svg import esc
from tailtriage.report import Finding, Remediation, SloResult

# --- findings and remediations --------------------------------------------------------


def findings(v: View) -> str:
    fs = v.report.findings
    if not fs:
        return section("findings", "Findings", panel('<p class="muted">No findings.</p>'))
    return section(
        "findings",
        "Findings",
        "".join(_finding(i, f) for i, f in enumerate(fs, 1)),
        "ranked, most important first",
    )


def _confidence(c: float) -> str:
    w = max(0.0, min(1.0, c)) * 70
    return (
        f'<span class="conf"><svg viewBox="0 0 70 6" aria-hidden="true"><rect class="track" width="70" height="6" rx="3"/>'
        f'<rect class="fill" width="{w:.1f}" height="6" rx="3"/></svg>confidence {c:.2f}</span>'
    )


def _finding(i: int, f: Finding) -> str:
    stage = f'<span class="chip">{swatch(f.stage)}{esc(f.stage)}</span>' if f.stage else ""
    head = f'<div class="head"><span class="rank">#{i}</span><span class="cat">{esc(f.category)}</span>{stage}{_confidence(f.confidence)}</div>'
    rows = [
        [
            esc(e.signal),
            esc(fmt_value(e.value)),
            esc(e.detail)
            + (
                f' <span class="muted">(threshold {esc(fmt_value(e.threshold))})</span>'
                if e.threshold is not None
                else ""
            ),
            f'<span class="src">{esc(e.source)}</span>',
        ]
        for e in f.evidence
    ]
    ev = (
        table(["signal", "value", "evidence", "source"], rows, num_cols=[1], cls="evidence")
        if rows
        else ""
    )
    nxt = "".join(f"<li>Measure next: {esc(s)}</li>" for s in f.next_steps)
    return panel(
        head
        + f'<p class="summary">{esc(f.summary)}</p>'
        + (f'<p class="muted">{esc(f.rank_reason)}</p>' if f.rank_reason else "")
        + ev
        + (f'<ul class="next">{nxt}</ul>' if nxt else ""),
        "finding",
    )


def remediations(v: View) -> str:
    rems = v.report.remediations
    if not rems:
        return ""
    body = "".join(_remediation(i, r, v.report.slos) for i, r in enumerate(rems, 1))
    return section(
        "remediations",
        "Remediations",
        body,
        "predicted by the simulator calibrated on this capture",
    )


def _remediation(i: int, r: Remediation, slos: Sequence[SloResult]) -> str:
    preds = []
    meets_all = True
    for s in slos:
        p = predicted_for(r, s)
        if p is None or s.observed is None:
            continue
        meets_all &= p < s.spec.threshold
        preds.append(charts.prediction_chart(slo_label(s.spec), s.observed, p, s.spec.threshold))
    badge = (
        '<span class="badge ok">meets SLO</span>'
        if preds and meets_all
        else ('<span class="badge warn">not enough alone</span>' if preds else "")
    )
    head = f'<div class="head"><span class="rank">#{i}</span><span class="act">{esc(r.action)}</span>{badge}</div>'
    tp = r.predicted.get("throughput_change_pct")
    kv = [f"throughput <b>{esc(fmt_pct(tp))}</b>"]
    if r.addresses:
        kv.append("addresses " + ", ".join(f"<code>{esc(a)}</code>" for a in r.addresses))
    params = "".join(
        f"<li><code>{esc(k)}</code> = <code>{esc(fmt_value(x))}</code></li>"
        for k, x in r.parameters.items()
    )
    caveats = "".join(f'<p class="caveat">⚠ {esc(c)}</p>' for c in r.caveats)
    left = (
        f'<p class="summary">{esc(r.summary)}</p><p class="kv">{" · ".join(kv)}</p>'
        + (f'<ul class="kv">{params}</ul>' if params else "")
        + caveats
    )
    right = "".join(preds)
    cfg = ""
    if r.config:
        cid = f"cfg-{i}"
        cfg = f'<div class="cfg"><button type="button" data-copy="{cid}">Copy config</button><pre><code id="{cid}">{esc(r.config)}</code></pre></div>'
    return panel(
        head + f'<div class="body"><div>{left}</div><div>{right}</div></div>' + cfg,
        "rem" if meets_all or not preds else "rem miss",
    )
