"""`tailtriage advise parallelism --model M --gpu G --gpus N [...] [--json OUT]`: rank the
parallelism layouts of a GPU budget for a model under the SLO (docs/advise.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import orjson
import typer
from rich.console import Console
from rich.table import Table

from tailtriage.cli._app import app

advise_app = typer.Typer(
    name="advise",
    help="Advice on a deployment's shape before you change it (see `advise parallelism`).",
    no_args_is_help=True,
    rich_markup_mode="markdown",
)
app.add_typer(advise_app, name="advise")


def _ms(v: float | None) -> str:
    return "—" if v is None else f"{v * 1e3:,.1f}"


@advise_app.command("parallelism")
def parallelism(
    model: Annotated[
        str,
        typer.Option(
            "--model",
            help="Hugging Face name (meta-llama/Llama-3.1-70B) or, with "
            "--layers etc., a label for the architecture numbers.",
        ),
    ],
    gpu: Annotated[str, typer.Option("--gpu", help="H100-SXM-80GB, H200, A100-80GB, L40S …")],
    gpus: Annotated[int, typer.Option("--gpus", help="GPUs in all.")],
    nodes: Annotated[int, typer.Option("--nodes", help="Nodes the GPUs sit in.")] = 1,
    interconnect: Annotated[
        str | None,
        typer.Option(
            "--interconnect",
            help="Between nodes: ib, ethernet, nvlink (NVL72), "
            "pcie. On one node: the GPUs' link (nvlink, pcie). Default: NVLink when "
            "the GPU has it, else PCIe; ib between nodes.",
        ),
    ] = None,
    workload: Annotated[
        str | None,
        typer.Option(
            "--workload",
            help="A bundle/capture to read prompt and output lengths "
            "from, or prompt=N,output=N[,context=N]. Default prompt=1024,output=256.",
        ),
    ] = None,
    slo: Annotated[
        str | None, typer.Option("--slo", help='e.g. "p95 ttft < 2s, p95 tpot < 50ms"')
    ] = None,
    dtype: Annotated[str, typer.Option("--dtype", help="Weights: bf16, fp8, int8, awq …")] = "bf16",
    kv_dtype: Annotated[str, typer.Option("--kv-dtype", help="KV cache: bf16, fp8.")] = "bf16",
    layers: Annotated[int | None, typer.Option("--layers", help="Architecture: layers.")] = None,
    hidden: Annotated[int | None, typer.Option("--hidden", help="Hidden size.")] = None,
    heads: Annotated[int | None, typer.Option("--heads", help="Attention heads.")] = None,
    kv_heads: Annotated[int | None, typer.Option("--kv-heads", help="KV heads.")] = None,
    params_b: Annotated[
        float | None, typer.Option("--params-b", help="Billions of params.")
    ] = None,
    experts: Annotated[int, typer.Option("--experts", help="MoE: routed experts.")] = 0,
    experts_per_token: Annotated[
        int, typer.Option("--experts-per-token", help="MoE: experts per token.")
    ] = 0,
    active_params_b: Annotated[
        float, typer.Option("--active-params-b", help="MoE: billions active per token.")
    ] = 0.0,
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Write the ranking as JSON.")
    ] = None,
) -> None:
    """Rank the layouts of --gpus GPUs for a model — tensor parallel (TP), pipeline parallel
    (PP), TP×PP, data-parallel replicas and, for mixture-of-experts models, expert parallel —
    by predicted TTFT, TPOT and output tokens/s per GPU under the SLO, with the reason for
    each: memory fit (weights + KV cache, with the arithmetic), all-reduce cost on the link,
    pipeline stages and micro-batches, cross-node links.

    Examples:

    `tailtriage advise parallelism --model meta-llama/Llama-3.1-70B --gpu H100-SXM-80GB --gpus 8 --slo "p95 tpot < 50ms"`

    `tailtriage advise parallelism --model meta-llama/Llama-3.1-405B --gpu H100 --gpus 16 --nodes 2 --interconnect ethernet --dtype fp8`

    `tailtriage advise parallelism --model my-moe --layers 48 --hidden 2048 --heads 32 --kv-heads 4 --params-b 30.5 --experts 128 --experts-per-token 8 --active-params-b 3.3 --gpu H200 --gpus 4 --workload bundle/`
    """
    from tailtriage.advise.catalog import resolve_gpu, resolve_model, shape_from_numbers
    from tailtriage.advise.layouts import default_cluster
    from tailtriage.advise.parallelism import advise_parallelism
    from tailtriage.advise.workload import default_workload, from_capture, is_spec, parse_spec
    from tailtriage.analyses.slo import parse_slos
    from tailtriage.errors import AnalysisError, ConfigError
    from tailtriage.simulator.steptime import dtype_bytes

    numbers = (layers, hidden, heads, kv_heads, params_b)
    if any(v is not None for v in numbers):
        if layers is None or hidden is None or heads is None or kv_heads is None or not params_b:
            raise ConfigError("architecture numbers need all of --layers --hidden --heads "
                              "--kv-heads --params-b")  # fmt: skip
        entry = shape_from_numbers(
            model, params_b=params_b, layers=layers, hidden=hidden, heads=heads,
            kv_heads=kv_heads, experts=experts, experts_per_token=experts_per_token,
            active_params_b=active_params_b,
        )  # fmt: skip
    else:
        entry = resolve_model(model)
    spec = resolve_gpu(gpu)
    dtype_bytes(dtype), dtype_bytes(kv_dtype)  # unknown names raise ConfigError
    cluster = default_cluster(spec, gpus, nodes, interconnect)
    if workload is None:
        shape = default_workload()
    elif is_spec(workload):
        shape = parse_spec(workload)
    else:
        from tailtriage.store.input import load_capture

        shape = from_capture(load_capture(workload), workload)
    slos = parse_slos(slo) if slo else ()
    advice = advise_parallelism(entry, spec, cluster, shape, slos, dtype, kv_dtype)

    console = Console(highlight=False)
    where = f"{gpus} × {spec.name} in {nodes} node{'s' if nodes > 1 else ''}"
    links = cluster.intra if nodes == 1 else f"{cluster.intra} inside, {cluster.inter} between"
    table = Table(title=f"{entry.shape.name} ({dtype}) on {where} ({links})")
    for col in ("#", "layout", "fits", "TTFT ms", "TPOT ms", "batch", "TPOT@batch ms",
                "tok/s/GPU", "SLO"):  # fmt: skip
        table.add_column(col, justify="left" if col in ("layout", "SLO") else "right",
                         no_wrap=col == "layout")  # fmt: skip
    for i, p in enumerate(advice.layouts, 1):
        verdict = "[green]meets[/]" if p.meets_slo else "[red]misses[/]"
        if not p.memory.fits:
            verdict = "[dim]—[/]"
        table.add_row(
            str(i), p.layout.label, "yes" if p.memory.fits else "[red]no[/]", _ms(p.ttft_s),
            _ms(p.tpot_s), str(p.batch or "—"), _ms(p.tpot_at_batch_s),
            f"{p.throughput_per_gpu:,.0f}" if p.batch else "—", verdict if slos else "",
        )  # fmt: skip
    console.print(table)
    console.print(
        f"workload: {shape.source}: prompt {shape.prompt_tokens:,.0f}, output "
        f"{shape.output_tokens:,.0f}, longest context {shape.max_context:,} tokens. TTFT is "
        "idle (queueing adds to it); TPOT at batch 1 and at the batch that meets the SLO."
    )
    best = advice.best
    if best is not None:
        console.print(f"[bold]best: {best.layout.label}[/]")
        for line in best.why:
            console.print(f"  • {line}")
    if json_out is not None:
        json_out.write_bytes(orjson.dumps(advice.to_dict(), option=orjson.OPT_INDENT_2))
    if best is None:
        biggest = max(advice.layouts, key=lambda p: p.layout.engine_gpus)
        raise AnalysisError(
            f"{entry.shape.name} does not fit on {where}: {biggest.memory.arithmetic}"
        )
