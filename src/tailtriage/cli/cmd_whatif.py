"""`tailtriage whatif PATH --slo ... --set key=value [--set ...] [--json OUT]` (design 3.4)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import orjson
import typer
import yaml
from rich.console import Console
from rich.table import Table

from tailtriage.cli._app import app
from tailtriage.errors import ConfigError


def parse_set(items: list[str]) -> dict[str, Any]:
    """``["engine.max_num_batched_tokens=128", "hpa.metric=vllm:num_requests_waiting"]`` ->
    a dict of typed values (YAML scalars: 128 is an int, 0.5 a float, true a bool)."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"bad --set {item!r}: expected key=value, e.g. hpa.min_replicas=4")
        try:
            value = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError:
            value = raw
        out[key] = value
    return out


def _fmt_ms(v: float | None) -> str:
    return "—" if v is None else f"{v * 1000:,.1f} ms"


def _fmt_pct(v: float | None) -> str:
    return "" if v is None else f"{v:+.1f}%"


@app.command()
def whatif(
    path: Annotated[str, typer.Argument(help="Bundle folder, file or saved capture.")],
    slo: Annotated[str, typer.Option("--slo", help='e.g. "p95 ttft < 500ms"')],
    set_: Annotated[
        list[str] | None,
        typer.Option("--set", help="A change to try, e.g. engine.max_num_batched_tokens=128"),
    ] = None,
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Write the result as JSON.")
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Simulator seed (same for both runs).")] = 0,
) -> None:
    """Predict what a change does: calibrate the simulator to PATH, replay it with and without
    the --set changes, and show observed vs calibrated baseline vs predicted per SLO."""
    from tailtriage.analyses.slo import parse_slos
    from tailtriage.pipeline.load import load_capture
    from tailtriage.remediation.whatif import whatif as run_whatif

    specs = parse_slos(slo)
    overrides = parse_set(set_ or [])
    console = Console(highlight=False)
    with console.status("calibrating the simulator and replaying…"):
        capture = load_capture(path)
        pred = run_whatif(capture, specs, overrides, seed=seed)
    table = Table(
        title="what-if: " + (", ".join(f"{k}={v}" for k, v in overrides.items()) or "no change")
    )
    for col in ("SLO", "observed", "calibrated baseline", "model error", "predicted", "change"):
        table.add_column(col, justify="left" if col == "SLO" else "right")
    for s in pred.slos:
        verdict = ""
        if s.predicted is not None:
            verdict = " [green]meets[/]" if s.predicted <= s.spec.threshold else " [red]breaches[/]"
        table.add_row(
            str(s.spec),
            _fmt_ms(s.observed),
            _fmt_ms(s.baseline),
            _fmt_pct(s.model_error_pct),
            _fmt_ms(s.predicted) + verdict,
            _fmt_pct(s.change_pct),
        )
    console.print(table)
    console.print(
        f"throughput: capacity {pred.baseline.capacity_tps:,.0f} → "
        f"{pred.predicted.capacity_tps:,.0f} output tokens per replica-second "
        f"({pred.throughput_change_pct:+.1f}%); served {pred.baseline.served_rps:.2f} → "
        f"{pred.predicted.served_rps:.2f} req/s (observed {pred.observed.served_rps:.2f})"
    )
    for w in pred.warnings:
        console.print(f"[yellow]warning:[/] {w}")
    if json_out is not None:
        json_out.write_bytes(orjson.dumps(pred.to_dict(), option=orjson.OPT_INDENT_2))
