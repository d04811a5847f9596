"""`tailtriage simulate` (see design 3.4): run a scenario, save its capture / bundle / summary."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated

import orjson
import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from tailtriage.cli._app import app
from tailtriage.errors import ConfigError
from tailtriage.outputs import check_output_folder, check_outputs, write_bytes

console = Console(highlight=False)


@app.command()
def simulate(
    scenario: Annotated[
        str | None,
        typer.Argument(help="Scenario YAML file or built-in name (see --list)."),
    ] = None,
    out: Annotated[
        Path | None, typer.Option("--out", help="Write an incident bundle (real formats) here.")
    ] = None,
    output: Annotated[
        Path | None, typer.Option("-o", "--output", help="Save the capture as a DuckDB file.")
    ] = None,
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Write a JSON summary (percentiles, stages).")
    ] = None,
    seed: Annotated[int | None, typer.Option(help="Random seed (default: the scenario's).")] = None,
    set_: Annotated[
        list[str] | None,
        typer.Option("--set", help="Override a setting: key=value (dotted, repeatable)."),
    ] = None,
    list_: Annotated[bool, typer.Option("--list", help="List the built-in scenarios.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
) -> None:
    """Simulate a serving stack and write what its telemetry would show.

    Example: `tailtriage simulate canonical-example --set hpa.metric=vllm:num_requests_waiting
    --json summary.json -o capture.duckdb`
    """
    from tailtriage.simulator import builtin_scenarios, parse_override, resolve_scenario
    from tailtriage.simulator import simulate as run_simulation
    from tailtriage.simulator.output import incident_window
    from tailtriage.simulator.summary import summarize

    if list_:
        _print_list(builtin_scenarios())
        return
    if scenario is None:
        raise ConfigError("give a scenario (YAML file or built-in name); see --list")
    scenario_file = Path(scenario) if Path(scenario).is_file() else None
    check_outputs(inputs=[scenario_file], outputs=[output, json_out])
    check_output_folder(out, inputs=[scenario_file, output, json_out])
    cfg = resolve_scenario(scenario)
    overrides = dict(parse_override(s) for s in set_ or [])
    if overrides:
        from tailtriage.simulator import apply_overrides

        cfg = apply_overrides(cfg, overrides)
    total = cfg.duration_s
    with Progress(
        TextColumn(f"simulating [bold]{cfg.name}[/]"),
        BarColumn(),
        TextColumn("{task.completed:>6.0f}/{task.total:.0f} s simulated"),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        disable=quiet,
        transient=True,
    ) as bar:
        task = bar.add_task("sim", total=total)
        capture = run_simulation(cfg, seed=seed, progress=lambda t: bar.update(task, completed=t))
    window = incident_window(cfg)
    t0 = cfg.start_unix_s
    summary = {
        "scenario": cfg.name,
        "seed": capture.metadata.seed,
        "overrides": overrides,
        "all": summarize(capture),
        "incident": summarize(capture, (t0 + window[0], t0 + window[1])) if window else None,
    }
    if output is not None:
        capture.save(output)
        console.print(f"capture: {output}", markup=False)
    if out is not None:
        from tailtriage.simulator.bundle import write_bundle

        write_bundle(capture, out)
        console.print(f"bundle: {out}", markup=False)
    if json_out is not None:
        write_bytes(json_out, orjson.dumps(summary, option=orjson.OPT_INDENT_2))
        console.print(f"summary: {json_out}", markup=False)
    _print_summary(summary)


def _print_list(scenarios: dict[str, str]) -> None:
    table = Table(title="built-in scenarios", show_lines=False)
    table.add_column("name", style="bold")
    table.add_column("description")
    for name, desc in scenarios.items():
        table.add_row(name, desc)
    console.print(table)


def _print_summary(summary: Mapping[str, object]) -> None:
    for key in ("all", "incident"):
        part = summary.get(key)
        if not isinstance(part, dict):
            continue
        ttft, e2e = part["ttft"], part["e2e"]
        console.print(
            f"[bold]{key}[/]: {part['requests']} requests ({part['failed']} failed), "
            f"{part['throughput_rps']} req/s; TTFT p50/p95/p99 "
            f"{ttft['p50_ms']}/{ttft['p95_ms']}/{ttft['p99_ms']} ms; "
            f"e2e p95 {e2e['p95_ms']} ms"
        )
        dec = part.get("ttft_p95_decomposition_ms") or {}
        if dec:
            console.print(
                "  p95 TTFT band: " + ", ".join(f"{k} {v:.0f} ms" for k, v in dec.items())
            )
