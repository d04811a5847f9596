"""`tailtriage collect --since 1h [--until T] [--namespace N] [--context C] [--prometheus URL]
[--traces URL] --out BUNDLE` (design 3.3, 3.4): gather an incident bundle from the live
sources in one command."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from tailtriage.cli._app import app
from tailtriage.errors import BackendError

console = Console(highlight=False, stderr=True, soft_wrap=True)


@app.command()
def collect(
    out: Annotated[Path, typer.Option("--out", "-o", help="Bundle folder to write.")],
    since: Annotated[
        str,
        typer.Option("--since", help="Window start: a duration ago (1h, 30m), unix s, RFC 3339."),
    ] = "1h",
    until: Annotated[str | None, typer.Option("--until", help="Window end (default: now).")] = None,
    namespace: Annotated[
        str | None, typer.Option("--namespace", "-n", help="Kubernetes namespace (default: all).")
    ] = None,
    context: Annotated[
        str | None, typer.Option("--context", help="kubeconfig context (default: current).")
    ] = None,
    kubeconfig: Annotated[
        str | None, typer.Option("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG).")
    ] = None,
    kubernetes: Annotated[
        bool | None,
        typer.Option(
            "--kubernetes/--no-kubernetes",
            help="Read the Kubernetes API (default: when a kubeconfig or a pod's account exists).",
        ),
    ] = None,
    prometheus: Annotated[
        str | None, typer.Option("--prometheus", help="Prometheus base URL.")
    ] = None,
    traces: Annotated[
        str | None,
        typer.Option(
            "--traces",
            help="Trace store: jaeger+http://HOST:16686, tempo+http://HOST:3200, http(s):// "
            "(probed), or an otel_traces table: clickhouse://USER@HOST:8123/DB?table=otel_traces "
            "(password from TAILTRIAGE_CLICKHOUSE_PASSWORD), chdb:///DIR?table=otel_traces.",
        ),
    ] = None,
    timeout: Annotated[
        float, typer.Option("--timeout", help="Seconds one request may take (a hang fails).")
    ] = 30.0,
    json: Annotated[
        Path | None, typer.Option("--json", help="Write the manifest as JSON to this file.")
    ] = None,
) -> None:
    """Gather an incident bundle (Kubernetes objects, Prometheus metrics, traces) in one go.

    Writes `kubectl get ... -o json` Lists, Prometheus `query_range` responses for the metric
    catalog, and the window's slowest traces, plus `manifest.json` (what was asked, what came
    back, what failed and why, what was redacted). A source that fails is one line; the
    others are kept. Exit 4 only when nothing could be read.

    Examples:

        tailtriage collect --since 1h -n llm --prometheus http://prometheus:9090 --out incident/

        tailtriage collect --since 2026-06-01T10:00:00Z --until 2026-06-01T11:00:00Z
        --traces jaeger+http://jaeger:16686 --no-kubernetes --out incident/

        tailtriage collect --since 30m --no-kubernetes --out incident/
        --traces 'clickhouse://reader@clickhouse:8123/otel?table=otel_traces'

    Then: `tailtriage triage incident/ --slo 'p95 ttft < 500ms'`.
    """
    from tailtriage.collect.bundle import CollectRequest, collect_bundle
    from tailtriage.collect.kubernetes import kubernetes_configured
    from tailtriage.model.timeparse import parse_time

    now = time.time()
    end = now if until is None else parse_time(until, "--until", now=lambda: now)
    start = parse_time(since, "--since", now=lambda: end)
    use_k8s = kubernetes if kubernetes is not None else kubernetes_configured(kubeconfig, context)
    request = CollectRequest(
        window=(start, end),
        namespace=namespace,
        kubernetes=use_k8s,
        kubeconfig=kubeconfig,
        context=context,
        prometheus=prometheus,
        traces=traces,
        timeout=timeout,
    )
    t0 = time.perf_counter()
    try:
        manifest = collect_bundle(request, out)
    except BackendError:
        _print_manifest(out, console)  # every source failed: their lines, then the error
        raise
    _print_manifest(out, console)
    console.print(f"collected in {time.perf_counter() - t0:.1f} s -> {escape(str(out))}")
    console.print(f"Next: tailtriage triage {escape(str(out))} --slo 'p95 ttft < 500ms'")
    if json is not None:
        json.write_bytes(manifest.to_json())


def _print_manifest(out: Path, console: Console) -> None:
    import orjson

    doc = orjson.loads((out / "manifest.json").read_bytes())
    for src in doc["sources"]:
        state = "[green]ok[/]" if src["files"] else "[red]failed[/]" if src["errors"] else "empty"
        console.print(
            f"{src['source']:<10} {state} {escape(src['target'])}: {len(src['files'])} files, "
            f"{src['records']} records"
        )
        for line in src["errors"][:5]:
            console.print(f"  [red]error[/] {escape(line)}")
        if len(src["errors"]) > 5:
            console.print(f"  ... {len(src['errors']) - 5} more errors in manifest.json")
        for line in src["notes"]:
            console.print(f"  note: {escape(line)}")
        for line in src["redactions"]:
            console.print(f"  redacted: {escape(line)}")
