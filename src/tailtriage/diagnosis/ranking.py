"""Rank findings by what they explain, and say why the first is first.

A rule reports its *evidence strength* (a noisy-OR of independent supporting signals,
``rule.combine``) and its *impact*: the seconds of the SLO percentile its stages explain - their
Shapley share of the incident's excess over the baseline when the analysis computed the
attribution (they add up to observed - baseline), else their growth in the p95 band.

* **explained share** = impact / the metric's excess (the attribution's observed - baseline; else
  the band's summed stage growth; else the band itself without a baseline).  For a per-token
  metric (ITL/TPOT), whose tail has no stage decomposition, the excess is observed - threshold.
* **rank score** = strength x max(share, ``MIN_RANK_SHARE``) x severity, where severity is
  how far the finding's SLO is breached (observed / threshold - 1), so a TTFT and an ITL finding
  compare by the breach each explains (a finding about a metric without an SLO, while other
  metrics have one, breaches nothing asked about: the floor ``MIN_SEVERITY``).  A *stage gap*
  (``insufficient_telemetry`` on a stage whose causes the capture cannot tell apart) names
  telemetry to add, not a cause: it ranks after every cause found.
* **confidence** (reported) = strength x coverage, coverage = share / ``PRIMARY_SHARE`` clipped
  to [``COVERAGE_FLOOR``, 1]: the chance that the finding is *the* cause grows with the evidence
  and with how much of the excess it accounts for; a strongly evidenced cause that explains a
  sliver is a secondary one.  The corpus runner's reliability table (confidence bin -> hit rate)
  checks it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from tailtriage.diagnosis import thresholds as T
from tailtriage.diagnosis.context import DiagnosisContext
from tailtriage.diagnosis.findings import Finding


def metric_excess(ctx: DiagnosisContext, metric: str | None) -> float:
    """Seconds by which ``metric``'s percentile exceeds its reference (see module doc)."""
    d = ctx.decomposition
    if d is not None and (metric is None or metric == d.metric):
        shap = [v.get("shapley", 0.0) for v in ctx.attribution.values()]
        if shap:
            return max(sum(max(x, 0.0) for x in shap), 0.0)
        grew = [s.seconds - s.baseline_seconds for s in d.stages if s.baseline_seconds is not None]
        if grew:
            return sum(max(g, 0.0) for g in grew)
        return d.total
    slo = ctx.slo(metric) if metric else ctx.primary
    if slo is None or slo.observed is None:
        return 0.0
    return max(slo.observed - slo.spec.threshold, 0.0)


def explained_share(ctx: DiagnosisContext, f: Finding) -> float:
    total = metric_excess(ctx, f.metric)
    if total <= 0:
        return 0.0
    return min(max(f.impact / total, 0.0), 1.0)


def severity(ctx: DiagnosisContext, metric: str | None) -> float:
    slo = ctx.slo(metric) if metric else ctx.primary
    if slo is None and metric and ctx.slos:
        # no SLO on the metric it explains (a TTFT-stage cause under per-token SLOs only):
        # it breaches nothing the user asked about
        return T.MIN_SEVERITY
    if slo is None or slo.observed is None or slo.spec.threshold <= 0:
        return 1.0
    return max(slo.observed / slo.spec.threshold - 1.0, T.MIN_SEVERITY)


def coverage(share: float) -> float:
    return min(max(share / T.PRIMARY_SHARE, T.COVERAGE_FLOOR), 1.0)


def _score(strength: float, share: float, sev: float) -> float:
    return strength * max(share, T.MIN_RANK_SHARE) * sev


def rank(ctx: DiagnosisContext, findings: Iterable[Finding]) -> tuple[Finding, ...]:
    """Findings best first, each with its explained share, its confidence as the chance of
    being the cause, and (the first) the sentence saying why it is first."""
    scored = []
    for f in findings:
        share = explained_share(ctx, f)
        sev = severity(ctx, f.metric)
        scored.append((_score(f.confidence, share, sev), share, f))
    # a stage gap says what telemetry to add, not what happened: it ranks after every cause
    # that was found (alone, it leads)
    scored.sort(key=lambda x: (_is_stage_gap(x[2]), -x[0], x[2].category))
    out = []
    for i, (_, share, f) in enumerate(scored):
        reason = _why_first(scored) if i == 0 else ""
        out.append(
            replace(
                f,
                confidence=round(f.confidence * coverage(share), 3),
                explained_share=round(share, 3),
                rank_reason=reason,
            )
        )
    return tuple(out)


def _is_stage_gap(f: Finding) -> bool:
    return f.category == "insufficient_telemetry" and f.rule == "gaps" and f.stage is not None


def _why_first(scored: list[tuple[float, float, Finding]]) -> str:
    _, share, top = scored[0]
    what = f"it explains {share:.0%} of the p95 excess over baseline"
    if top.metric and top.metric not in ("ttft", "e2e"):
        what = f"it explains {share:.0%} of the {top.metric} excess over its SLO"
    text = f"Ranked first: {what} with evidence strength {top.confidence:.2f}"
    if len(scored) > 1:
        _, s2, nxt = scored[1]
        text += f"; next, {nxt.category} explains {s2:.0%} at strength {nxt.confidence:.2f}"
    return text + "."
