"""The rolling-update section (terminal and HTML), read from ``report.sections.rollout`` (the
report's form of :class:`tailtriage.analyses.rollout.RolloutAnalysis`).

Latency by version first (the question an engineer asks: is the new version slower, or did
every version slow down while capacity was lost?), then the capacity dip, the strategy, the
new pods' weight loading and their warm-up after Ready."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rich import box
from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from tailtriage.renderers._format import clean, fmt_ms, fmt_window
from tailtriage.renderers._html_parts import panel, section, table
from tailtriage.renderers._svg import esc
from tailtriage.report import Report
from tailtriage.report_sections import rollout_dict

#: the key of the rollout analysis in the JSON report's ``extra`` object
KEY = "rollout"


@dataclass(frozen=True)
class VersionRow:
    replicaset: str
    new: bool
    pods: int
    requests: int
    ttft_p50: float | None  # seconds
    ttft_p95: float | None
    e2e_p95: float | None
    models: tuple[str, ...]


@dataclass(frozen=True)
class RolloutView:
    """What the section shows, in seconds."""

    window: tuple[float, float]
    new: str
    old: tuple[str, ...]
    versions: tuple[VersionRow, ...]
    lines: tuple[str, ...]  # strategy, capacity dip, weight loading, warm-up, notes


def _s(v: Any) -> float | None:
    return None if v is None else float(v) / 1000.0


def rollout_view(report: Report) -> RolloutView | None:
    """The section's content, or None when the report has no rollout (or a malformed one)."""
    if report.sections.rollout is None:
        return None
    d = rollout_dict(report.sections.rollout)
    try:
        return _view(d)
    except (KeyError, TypeError, ValueError):
        return None


def _view(d: Mapping[str, Any]) -> RolloutView:
    versions = tuple(
        VersionRow(
            str(v["replicaset"]),
            bool(v["new"]),
            int(v["pods"]),
            int(v["requests"]),
            _s(v.get("ttft_p50_ms")),
            _s(v.get("ttft_p95_ms")),
            _s(v.get("e2e_p95_ms")),
            tuple(str(m) for m in v.get("models") or ()),
        )
        for v in d.get("versions") or ()
    )
    lines = [
        f"strategy seen in the first step: maxSurge {int(d['max_surge'])}, "
        f"maxUnavailable {int(d['max_unavailable'])}; the rollout took "
        f"{float(d['duration_s']):.0f} s"
    ]
    before, during = _s(d.get("ttft_p95_before_ms")), _s(d.get("ttft_p95_during_ms"))
    if during is not None:
        lines.append(
            f"p95 TTFT {fmt_ms(during)} during the rollout"
            + (f", {fmt_ms(before)} before it" if before is not None else "")
        )
    dip = d.get("capacity_dip")
    if isinstance(dip, Mapping):
        lines.append(
            f"capacity: {int(dip['min_ready'])} of {int(dip['desired'])} replicas ready at the "
            f"lowest, {float(dip['seconds_below']):.0f} s below desired (from {dip['source']})"
        )
    if d.get("weight_load_s") is not None:
        swap = "; a model swap (the versions serve different models)" if d.get("model_swap") else ""
        lines.append(
            f"new pods: {float(d['weight_load_s']):.0f} s from container start to Ready "
            f"(weights + warm-up){swap}"
        )
    warm = [w for w in d.get("warmups") or () if w.get("slowdown") is not None]
    if warm:
        w = max(warm, key=lambda x: float(x["slowdown"]))
        lines.append(
            f"warm-up after Ready ({len(warm)} new pods): at worst {clean(str(w['pod']))} served "
            f"{fmt_ms(_s(w['ttft_p95_ms']))} p95 in the engine in its first "
            f"{float(w['window_s']):.0f} s, {fmt_ms(_s(w['steady_ttft_p95_ms']))} afterwards "
            f"(x{float(w['slowdown']):.2f})"
        )
    lines += [str(n) for n in d.get("notes") or ()]
    return RolloutView(
        window=(float(d["start"]), float(d["end"])),
        new=str(d["new_replicaset"]),
        old=tuple(str(x) for x in d.get("old_replicasets") or ()),
        versions=versions,
        lines=tuple(lines),
    )


def _cells(v: VersionRow) -> Sequence[str]:
    return (
        v.replicaset + (" (new)" if v.new else ""),
        str(v.pods),
        f"{v.requests:,}",
        fmt_ms(v.ttft_p50),
        fmt_ms(v.ttft_p95),
        fmt_ms(v.e2e_p95),
        ", ".join(v.models) or "—",
    )


_HEADERS = ("ReplicaSet", "pods", "requests", "p50 TTFT", "p95 TTFT", "p95 e2e", "model")


def terminal_section(report: Report) -> Iterator[RenderableType]:
    """The rich renderables of the section (nothing without a rollout)."""
    view = rollout_view(report)
    if view is None:
        return
    title = Text.assemble(
        ("Rolling update ", "bold"),
        clean(", ".join(view.old)),
        " → ",
        clean(view.new),
        ("  " + fmt_window(view.window), "dim"),
    )
    t = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, expand=False)
    for i, h in enumerate(_HEADERS):
        t.add_column(h, justify="right" if 0 < i < 6 else "left")
    for v in view.versions:
        t.add_row(*(Text(clean(c)) for c in _cells(v)))
    yield t
    for line in view.lines:
        yield Text("  " + clean(line))


def html_section(report: Report) -> str:
    """The HTML section (empty without a rollout)."""
    view = rollout_view(report)
    if view is None:
        return ""
    rows = [[esc(c) for c in _cells(v)] for v in view.versions]
    items = "".join(f"<li>{esc(line)}</li>" for line in view.lines)
    body = panel(table(_HEADERS, rows, num_cols=range(1, 6)) + f"<ul>{items}</ul>")
    sub = f"{', '.join(view.old)} → {view.new} · {fmt_window(view.window)}"
    return section("rollout", "Rolling update", body, sub)
