"""``tailtriage collect``: one incident bundle from the live sources of a window.

    manifest = collect_bundle(CollectRequest(window=(t0, t1), prometheus=URL), Path("bundle"))

Each source writes its files as soon as they come back and reports a ``SourceOutcome``; one
that fails leaves the others' files in place.  The manifest is written last, whatever
happened.  :class:`BackendError` only when no source could be read at all."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tailtriage.collect.manifest import Manifest, SourceOutcome
from tailtriage.errors import BackendError, ConfigError, TailtriageError
from tailtriage.sources._safety import DEFAULT_TIMEOUT_S


@dataclass(frozen=True)
class CollectRequest:
    """What to collect."""

    window: tuple[float, float]
    namespace: str | None = None
    kubernetes: bool = False
    kubeconfig: str | None = None
    context: str | None = None
    prometheus: str | None = None
    traces: str | None = None
    timeout: float = DEFAULT_TIMEOUT_S


def collect_bundle(request: CollectRequest, out: Path) -> Manifest:
    """Collect every source asked for into ``out``; the manifest says what came back."""
    start, end = request.window
    if not end > start:
        raise ConfigError(f"collect window: start {start} must be before end {end}")
    if not (request.kubernetes or request.prometheus or request.traces):
        raise ConfigError("nothing to collect: give --prometheus, --traces or Kubernetes access")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        # files of an earlier collection would be read as part of this window
        raise ConfigError(f"--out {out} exists and is not an empty folder; choose a new one")
    out.mkdir(parents=True, exist_ok=True)
    outcomes: list[SourceOutcome] = []
    try:
        if request.kubernetes:
            outcomes.append(_kubernetes(request, out))
        if request.prometheus:
            from tailtriage.collect.prometheus import collect_prometheus

            outcomes.append(
                collect_prometheus(
                    request.prometheus, out, request.window, request.namespace, request.timeout
                )
            )
        if request.traces:
            from tailtriage.collect.traces import collect_traces

            outcomes.append(collect_traces(request.traces, out, request.window, request.timeout))
    finally:
        manifest = Manifest(request.window, request.namespace, tuple(outcomes))
        manifest.write(out)
    if not any(o.ok for o in outcomes):
        lines = "; ".join(e for o in outcomes for e in o.errors[:1]) or "no data in the window"
        raise BackendError(f"nothing could be read: {lines}")
    return manifest


def _kubernetes(request: CollectRequest, out: Path) -> SourceOutcome:
    from tailtriage.collect.kubernetes import api_client, collect_kubernetes

    try:
        api = api_client(request.kubeconfig, request.context, request.timeout)
    except TailtriageError as exc:
        return SourceOutcome("kubernetes", request.context or "kubeconfig", errors=(str(exc),))
    with api:
        return collect_kubernetes(api, out, request.namespace, request.window, request.timeout)
