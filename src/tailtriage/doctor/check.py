"""The Check plug-in protocol and its name registry.

A check is a pure function of the :class:`~tailtriage.doctor.facts.Facts` that returns the gaps
it finds (none when the telemetry it looks for is there)::

    @register("dcgm", group="metrics")
    def dcgm(facts: Facts) -> Iterable[Gap]:
        if not facts.metrics.any_prefix("DCGM_FI_"):
            yield Gap(...)

Checks live one module per group (``checks_traces``, ``checks_sampling``,
``checks_kubernetes``, ``checks_metrics``); importing a module registers its checks."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from tailtriage.doctor.facts import Facts
from tailtriage.doctor.gap import Gap


class CheckFunction(Protocol):
    """Facts in, the gaps found out; never raises on missing data (that is what it reports)."""

    def __call__(self, facts: Facts) -> Iterable[Gap]: ...


@dataclass(frozen=True)
class Check:
    name: str
    group: str  # traces | sampling | kubernetes | metrics
    run: CheckFunction
    #: needs span attributes (not available when only requests/stages came back)
    needs_spans: bool = False


_REGISTRY: dict[str, Check] = {}

#: built-in check modules, in the order their gaps are listed
BUILTIN_MODULES: tuple[str, ...] = (
    "checks_traces",
    "checks_sampling",
    "checks_kubernetes",
    "checks_metrics",
)


def register(
    name: str, *, group: str, needs_spans: bool = False
) -> Callable[[CheckFunction], CheckFunction]:
    """Function decorator: ``@register("dcgm", group="metrics")`` adds the check by that name."""

    def deco(fn: CheckFunction) -> CheckFunction:
        _REGISTRY[name] = Check(name, group, fn, needs_spans)
        return fn

    return deco


def registered() -> tuple[Check, ...]:
    """Every registered check, built-ins first, in registration order."""
    for mod in BUILTIN_MODULES:
        importlib.import_module(f"tailtriage.doctor.{mod}")
    return tuple(_REGISTRY.values())
