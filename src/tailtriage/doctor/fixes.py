"""One-line fixes that name the `tailtriage instrument` file closing a gap."""

from __future__ import annotations

from tailtriage.doctor.facts import Facts
from tailtriage.instrument import files


def instrument_command(facts: Facts) -> str:
    """The instrument command for the gateway and engine this telemetry comes from."""
    return files.command(facts.gateway, facts.engine)


def fix(facts: Facts, file: str, action: str) -> str:
    """``action`` plus where the config comes from, e.g. "add ... (instrument/engine-vllm.yaml
    from `tailtriage instrument --gateway istio --engine vllm --out instrument/`)"."""
    return f"{action} (instrument/{file} from `{instrument_command(facts)}`)"


def engine_file(facts: Facts) -> str:
    return files.engine_file(facts.engine or "vllm")


def gateway_file(facts: Facts) -> str:
    return files.gateway_file(facts.gateway or "istio")
