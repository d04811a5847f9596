"""`tailtriage quantgate --baseline URL --candidate URL --eval FILE.jsonl [--budget 1pt]`: the
accuracy gate a quantized model must pass before it replaces the original (docs/quantgate.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import orjson
import typer
from rich.console import Console
from rich.table import Table

from tailtriage.cli._app import app


@app.command()
def quantgate(
    baseline: Annotated[str, typer.Option("--baseline", help="URL of the original model.")],
    candidate: Annotated[str, typer.Option("--candidate", help="URL of the quantized model.")],
    eval_file: Annotated[
        Path, typer.Option("--eval", help="Evaluation set (JSONL: id, type, prompt, answer).")
    ],
    model: Annotated[str, typer.Option("--model", help="Model name sent to both.")] = "default",
    budget: Annotated[
        str, typer.Option("--budget", help="Accuracy drop allowed, e.g. 1pt or 0.5pt.")
    ] = "1pt",
    concurrency: Annotated[int, typer.Option("--concurrency", help="Users per endpoint.")] = 8,
    small_model: Annotated[
        bool, typer.Option("--small-model", help="The model has under ~10B parameters.")
    ] = False,
    seed: Annotated[int, typer.Option("--seed", help="Bootstrap and id seed.")] = 0,
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Write the result as JSON.")
    ] = None,
) -> None:
    """Ask both endpoints every item of an evaluation set (exact match, multiple choice,
    numeric tolerance; code items are counted but not run), then report the accuracy change
    with a paired 95% confidence interval (bootstrap) and McNemar's exact test, overall and
    per task type, the latency and throughput gain measured in the same run, and a verdict
    against the budget: pass, fail or inconclusive (exit code 0, 1, 0).

    Example:

    `tailtriage quantgate --baseline http://127.0.0.1:8000 --candidate http://127.0.0.1:8001 --eval evals.jsonl --budget 1pt --json gate.json`
    """
    from tailtriage.loadgen.evalset import load_evalset
    from tailtriage.quantgate.ask import ask
    from tailtriage.quantgate.gate import gate, parse_budget

    budget_pt = parse_budget(budget)
    items = load_evalset(eval_file)
    console = Console(highlight=False)
    with console.status(f"asking {len(items)} items of {eval_file} to both endpoints…"):
        base = ask(baseline, model, items, concurrency=concurrency, seed=seed)
        cand = ask(candidate, model, items, concurrency=concurrency, seed=seed)
    report = gate(items, base, cand, budget_pt, seed=seed, small_model=small_model)

    table = Table(title=f"quantgate: {candidate} against {baseline} (budget -{budget_pt:g} pt)")
    for col in ("items", "n", "baseline", "candidate", "change", "95% CI", "McNemar p"):
        table.add_column(col, justify="left" if col == "items" else "right")
    rows = [("all", report.overall)] + [(f"type {g.name}", g.comparison) for g in report.by_type]
    rows += [(f"category {g.name}", g.comparison) for g in report.by_category]
    for name, cmp in rows:
        table.add_row(name, str(cmp.n), f"{cmp.baseline_acc:.1%}", f"{cmp.candidate_acc:.1%}",
                      f"{cmp.delta_pt:+.1f} pt", f"[{cmp.ci_low_pt:+.1f}, {cmp.ci_high_pt:+.1f}]",
                      f"{cmp.mcnemar_p:.3f}")  # fmt: skip
    console.print(table)
    b, c = report.baseline_speed, report.candidate_speed
    gain = report.throughput_gain_pct
    console.print(
        f"speed in this run: {b.output_tps:,.0f} → {c.output_tps:,.0f} output tokens/s"
        + (f" ({gain:+.1f}%)" if gain is not None else "")
        + (f"; TTFT p50 {b.ttft_p50_s * 1e3:.0f} → {c.ttft_p50_s * 1e3:.0f} ms"
           if b.ttft_p50_s is not None and c.ttft_p50_s is not None else "")
    )  # fmt: skip
    colour = {"pass": "green", "fail": "red"}.get(report.verdict, "yellow")
    console.print(f"[bold {colour}]verdict: {report.verdict.upper()}[/]")
    for line in report.reasons:
        console.print(f"  • {line}")
    console.print("known risk areas:")
    for area, why, n in report.risks:
        covered = f"{n} items here" if n else "[yellow]not covered by this set[/]"
        console.print(f"  • {area} ({covered}): {why}")
    if report.unsupported:
        console.print(f"{report.unsupported} code items not scored: running model output as "
                      "code needs a sandbox; use your own harness for them")  # fmt: skip
    if any(report.failed):
        console.print(f"[yellow]failed requests left out:[/] baseline {report.failed[0]}, "
                      f"candidate {report.failed[1]}")  # fmt: skip
    if json_out is not None:
        json_out.write_bytes(orjson.dumps(report.to_dict(), option=orjson.OPT_INDENT_2))
    if report.verdict == "fail":
        raise typer.Exit(1)
