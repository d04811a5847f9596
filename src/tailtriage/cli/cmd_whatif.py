"""`tailtriage whatif PATH --slo ... --set key=value [--set ...] [--json OUT]` (design 3.4)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import orjson
import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from tailtriage.cli._app import app
from tailtriage.outputs import check_outputs, write_bytes


def parse_set(items: list[str]) -> dict[str, Any]:
    """``["engine.max_num_batched_tokens=128", "hpa.metric=vllm:num_requests_waiting"]`` ->
    a dict of typed values (YAML scalars: 128 is an int, 0.5 a float, true a bool)."""
    from tailtriage.simulator.config import parse_override

    return dict(parse_override(item) for item in items)


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
    base: Annotated[
        str | None,
        typer.Option(
            "--base",
            help="Scenario YAML or built-in name with the deployment's settings the telemetry "
            "cannot show (model, GPU, engine flags, HPA spec); the rest is fitted to PATH.",
        ),
    ] = None,
) -> None:
    """Predict what a change does: calibrate the simulator to PATH, replay it with and without
    the --set changes, and show observed vs calibrated baseline vs predicted per SLO.

    Example: `tailtriage whatif bundle/ --slo "p95 ttft < 500ms" --base canonical-example
    --set engine.max_num_batched_tokens=128`"""
    from tailtriage.analyses.slo import parse_slos
    from tailtriage.remediation.whatif import MODEL_TOLERANCE_PCT
    from tailtriage.remediation.whatif import whatif as run_whatif
    from tailtriage.simulator.catalog import resolve_scenario
    from tailtriage.store.input import load_capture

    specs = parse_slos(slo)
    check_outputs(
        inputs=[path, base if base and Path(base).is_file() else None], outputs=[json_out]
    )
    overrides = parse_set(set_ or [])
    base_config = resolve_scenario(base) if base else None
    console = Console(highlight=False)
    with console.status("calibrating the simulator and replaying…"):
        capture = load_capture(path)
        pred = run_whatif(capture, specs, overrides, seed=seed, base=base_config)
    table = Table(
        title="what-if: " + (", ".join(f"{k}={v}" for k, v in overrides.items()) or "no change")
    )
    cols = ("SLO", "observed", "calibrated baseline", "model error", "predicted", "change")
    for col in (*cols, "anchored"):
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
            _fmt_ms(s.corrected) + ("" if s.within_tolerance else " [yellow](low confidence)[/]"),
        )
    console.print(table)
    console.print(
        "anchored = observed × predicted / calibrated baseline (the change applied to what was "
        f"observed); low confidence where the model error exceeds {MODEL_TOLERANCE_PCT:.0f}%"
    )
    console.print(
        f"throughput: a full engine step does {pred.baseline.step_capacity_tps:,.0f} → "
        f"{pred.predicted.step_capacity_tps:,.0f} tokens/s ({pred.throughput_change_pct:+.1f}%); "
        f"served {pred.baseline.served_rps:.2f} → {pred.predicted.served_rps:.2f} req/s "
        f"(observed {pred.observed.served_rps:.2f})"
    )
    for w in pred.warnings:
        console.print(f"[yellow]warning:[/] {escape(w)}")
    if json_out is not None:
        write_bytes(json_out, orjson.dumps(pred.to_dict(), option=orjson.OPT_INDENT_2))
