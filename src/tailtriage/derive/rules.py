"""Stage mapping rules kept as data (``stage_rules.yaml``), extendable with a user file.

A :class:`Rule` says which spans it matches and what they mean (stage, inference level,
synthesised engine intervals).  Rules are compiled to one SQL ``CASE`` expression so the
matching runs vectorised inside DuckDB over every span at once; regular expressions are
therefore RE2 (DuckDB's ``regexp_matches``, a search anywhere in the text)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Final

import yaml

from tailtriage.errors import ConfigError
from tailtriage.model.vocabulary import STAGES

#: inference levels, most specific last: the request's timings come from the highest
INFERENCE_LEVELS: Final = {"client": 1, "http": 2, "genai": 3, "engine": 4}
#: engine intervals a rule may synthesise inside its span, by code (0: none): ``vllm_latency``
#: cuts queue / prefill / decode from vLLM's ``gen_ai.latency.*``; ``first_token`` cuts the span
#: at its engine TTFT (before: prefill, queue included; after: decode) - Dynamo's aggregated
#: ``engine.generate``, whose ``ttft_ms`` is its only split
SYNTHESIZERS: Final = ("vllm_latency", "first_token")
_KINDS: Final = ("SERVER", "CLIENT", "INTERNAL", "PRODUCER", "CONSUMER")


@dataclass(frozen=True)
class Rule:
    id: str
    stage: str
    names: tuple[str, ...] = ()
    name_regex: str | None = None
    kinds: tuple[str, ...] = ()
    service_regex: str | None = None
    #: key -> None (present) or a regex on the value's text
    attributes: tuple[tuple[str, str | None], ...] = ()
    any_attributes: tuple[tuple[str, str | None], ...] = ()
    inference: str | None = None
    synthesize: str | None = None

    @property
    def level(self) -> int:
        return INFERENCE_LEVELS.get(self.inference or "", 0)

    @property
    def synth_code(self) -> int:
        """1 + the synthesizer's index in SYNTHESIZERS, 0 when none (both derivations)."""
        return SYNTHESIZERS.index(self.synthesize) + 1 if self.synthesize else 0


@dataclass(frozen=True)
class RuleSet:
    rules: tuple[Rule, ...]

    def attribute_keys(self) -> tuple[str, ...]:
        keys: dict[str, None] = {}
        for r in self.rules:
            for k, _ in r.attributes + r.any_attributes:
                keys[k] = None
        return tuple(keys)


def _sql_str(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def _attr_cond(key: str, regex: str | None, col: Mapping[str, str]) -> str:
    c = col[key]
    if regex is None:
        return f"({c} IS NOT NULL)"
    return f"coalesce(regexp_matches({c}, {_sql_str(regex)}), false)"


def rule_condition(rule: Rule, attr_col: Mapping[str, str]) -> str:
    """SQL boolean over columns ``name``, ``kind``, ``service`` and extracted attributes."""
    conds = []
    if rule.names:
        conds.append(f"name IN ({', '.join(_sql_str(n) for n in rule.names)})")
    if rule.name_regex:
        conds.append(f"regexp_matches(name, {_sql_str(rule.name_regex)})")
    if rule.kinds:
        conds.append(f"kind IN ({', '.join(_sql_str(k) for k in rule.kinds)})")
    if rule.service_regex:
        conds.append(f"coalesce(regexp_matches(service, {_sql_str(rule.service_regex)}), false)")
    conds += [_attr_cond(k, v, attr_col) for k, v in rule.attributes]
    if rule.any_attributes:
        conds.append(
            "(" + " OR ".join(_attr_cond(k, v, attr_col) for k, v in rule.any_attributes) + ")"
        )
    return " AND ".join(conds) if conds else "true"


def rule_case_sql(rules: RuleSet, attr_col: Mapping[str, str]) -> str:
    """``CASE`` giving the index of the first matching rule, or -1."""
    whens = [f"WHEN {rule_condition(r, attr_col)} THEN {i}" for i, r in enumerate(rules.rules)]
    return "CASE " + " ".join(whens) + " ELSE -1 END" if whens else "-1"


# -- loading --------------------------------------------------------------------------------
def _conds(raw: Any, where: str) -> tuple[tuple[str, str | None], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: must be a mapping of attribute key to true or a regex")
    out: list[tuple[str, str | None]] = []
    for k, v in raw.items():
        if v is True:
            out.append((str(k), None))
        elif isinstance(v, str):
            _check_regex(v, where)
            out.append((str(k), v))
        else:
            raise ConfigError(f"{where}.{k}: must be true or a regex string")
    return tuple(out)


def _check_regex(rx: str, where: str) -> None:
    try:
        re.compile(rx.replace("(?i)", ""))
    except re.error as exc:
        raise ConfigError(f"{where}: invalid regular expression {rx!r}: {exc}") from exc


def _as_list(raw: Any, where: str) -> tuple[str, ...]:
    if raw is None:
        return ()
    if isinstance(raw, str):
        return (raw,)
    if isinstance(raw, Sequence) and all(isinstance(x, str) for x in raw):
        return tuple(raw)
    raise ConfigError(f"{where}: must be a string or a list of strings")


def parse_rule(raw: Any, where: str) -> Rule:
    """One rule from its YAML mapping; ConfigError naming ``where`` when it is invalid."""
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: a rule must be a mapping")
    match = raw.get("match", {})
    if not isinstance(match, Mapping):
        raise ConfigError(f"{where}.match: must be a mapping")
    unknown = set(match) - {
        "name",
        "name_regex",
        "kind",
        "service_regex",
        "attributes",
        "any_attributes",
    }
    if unknown:
        raise ConfigError(f"{where}.match: unknown condition(s) {', '.join(sorted(unknown))}")
    stage = raw.get("stage")
    if stage not in STAGES:
        raise ConfigError(f"{where}.stage: {stage!r} is not one of {', '.join(STAGES)}")
    inference = raw.get("inference")
    if inference is not None and inference not in INFERENCE_LEVELS:
        raise ConfigError(f"{where}.inference: must be one of {', '.join(INFERENCE_LEVELS)}")
    synth = raw.get("synthesize")
    if synth is not None and synth not in SYNTHESIZERS:
        raise ConfigError(f"{where}.synthesize: must be one of {', '.join(SYNTHESIZERS)}")
    kinds = tuple(k.upper() for k in _as_list(match.get("kind"), f"{where}.match.kind"))
    if any(k not in _KINDS for k in kinds):
        raise ConfigError(f"{where}.match.kind: kinds are {', '.join(_KINDS)}")
    for key in ("name_regex", "service_regex"):
        if match.get(key) is not None:
            _check_regex(str(match[key]), f"{where}.match.{key}")
    return Rule(
        id=str(raw.get("id", where)),
        stage=str(stage),
        names=_as_list(match.get("name"), f"{where}.match.name"),
        name_regex=match.get("name_regex"),
        kinds=kinds,
        service_regex=match.get("service_regex"),
        attributes=_conds(match.get("attributes"), f"{where}.match.attributes"),
        any_attributes=_conds(match.get("any_attributes"), f"{where}.match.any_attributes"),
        inference=inference,
        synthesize=synth,
    )


def parse_rules(text: str, origin: str) -> tuple[Rule, ...]:
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{origin}: invalid YAML: {exc}") from exc
    items = doc.get("rules") if isinstance(doc, Mapping) else doc
    if not isinstance(items, list):
        raise ConfigError(f"{origin}: expected a list of rules (or a mapping with 'rules:')")
    return tuple(parse_rule(r, f"{origin}: rules[{i}]") for i, r in enumerate(items))


def builtin_rules() -> tuple[Rule, ...]:
    text = resources.files("tailtriage.derive").joinpath("stage_rules.yaml").read_text("utf-8")
    return parse_rules(text, "stage_rules.yaml")


def load_rules(user: str | Path | None = None) -> RuleSet:
    """The user's rules (if any) followed by the built-in ones."""
    extra: tuple[Rule, ...] = ()
    if user is not None:
        p = Path(user)
        try:
            text = p.read_text("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{p}: cannot read rules file ({exc})") from exc
        extra = parse_rules(text, str(p))
    return RuleSet(extra + builtin_rules())
