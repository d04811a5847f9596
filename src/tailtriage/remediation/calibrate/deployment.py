"""The deployment a calibration without ``--base`` replays: what the telemetry shows about
it (:mod:`.infer` reads names, :mod:`.observed` behaviour), applied over the simulator's
defaults - and, for every part it does not show, a :class:`~.gaps.Gap` instead of an abort."""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

from tailtriage.errors import ConfigError
from tailtriage.model import Capture
from tailtriage.remediation.calibrate.budget import budget_gap
from tailtriage.remediation.calibrate.gaps import Gap
from tailtriage.remediation.calibrate.infer import (
    dtype_from_kv,
    infer_cpu,
    infer_engine,
    infer_gateway,
    infer_hardware,
    infer_hpa,
    infer_hpa_settings,
    infer_kv_blocks,
    infer_nodes,
    infer_routing,
    infer_token_budget,
)
from tailtriage.remediation.calibrate.observed import (
    infer_hpa_signal,
    infer_kv_from_admission,
    infer_limit_from_gauges,
    infer_replica_groups,
    infer_routing_from_gauges,
)
from tailtriage.remediation.calibrate.shapes import model_shape
from tailtriage.simulator.config import HPA_SIGNALS, EngineConfig, ScenarioConfig, apply_overrides
from tailtriage.simulator.steptime import GPUS, kv_cache_blocks

STEP_TIME_GAP = Gap(
    "engine step time",
    "no request has prefill/decode stages with token counts",
    "the simulator's default step model for the model and GPU",
    "engine spans (vLLM's llm_request span: queued/prefill/decode times, token counts)",
)


def inferred_base(
    capture: Capture, *, sampled: float = 1.0
) -> tuple[ScenarioConfig, dict[str, Any], list[Gap]]:
    """The simulator's defaults with what the telemetry shows about the deployment applied
    (:mod:`.infer`, :mod:`.observed`), the evidence for each part, and what it did not show.
    Never raises on an unfamiliar deployment: a setting the simulator refuses is left at its
    default and listed as a gap.  ``sampled``: the traced share of the requests (see
    :func:`_unsampled`)."""
    settings: dict[str, Any] = {}
    evidence: dict[str, Any] = {}
    for name, infer in (
        ("hardware", infer_hardware),
        ("replica_groups", infer_replica_groups),
        ("hpa", infer_hpa),
        ("hpa_settings", infer_hpa_settings),
        ("gateway", infer_gateway),
        ("routing", infer_routing),
        ("engine", infer_engine),
        ("token_budget", infer_token_budget),
        ("kv_cache", partial(infer_kv_blocks, sampled=sampled)),
        ("cpu", infer_cpu),
    ):
        found, evidence[name] = infer(capture)
        settings.update(found)
    full_rate_kv = bool(evidence["kv_cache"].get("full_rate"))
    gaps = _hpa_gaps(capture, settings, evidence)
    if settings.get("hpa.enabled", True) is False:
        settings = {
            k: v for k, v in settings.items() if not k.startswith("hpa.") or k == "hpa.enabled"
        }
    if "engine.num_gpu_blocks" not in settings:
        seqs = int(settings.get("engine.max_num_seqs", EngineConfig().max_num_seqs))
        found, evidence["kv_admission"] = infer_kv_from_admission(capture, seqs)
        settings.update(found)
    if sampled < 1.0:
        limited = "gateway.concurrency_limit" in settings  # requests waited for a slot
        gaps += _unsampled(settings, sampled, full_rate_kv=full_rate_kv)
        if limited:
            found, evidence["limit_gauges"] = infer_limit_from_gauges(capture)
            settings.update(found)
            gaps = [g for g in gaps if not (found and g.part == "gateway.concurrency_limit")]
        settings.pop("gateway.routing", None)
        found, evidence["routing_gauges"] = infer_routing_from_gauges(capture)
        settings.update(found)
    found, evidence["nodes"] = infer_nodes(capture, int(settings.get("gpu.tp", 1)))
    settings.update(found)
    found, evidence["dtype"] = dtype_from_kv(settings)
    settings.update(found)
    gaps += _unfit_model(settings)
    gaps += _hardware_gaps(settings, evidence)
    gaps += budget_gap(capture, settings)
    config, refused = _apply_what_fits(ScenarioConfig(), settings)
    gaps += refused
    evidence["settings"] = {k: v for k, v in settings.items() if k not in _keys(refused)}
    return config, evidence, gaps


#: inferred from the traced requests alone, so meaningless when traces are sampled
_PER_REQUEST = ("gateway.concurrency_limit",)


def _unsampled(
    settings: dict[str, Any], sampled: float, *, full_rate_kv: bool = False
) -> list[Gap]:
    """Correct what the traced requests under-count when traces are sampled: the KV blocks
    they held are ``sampled`` of the engine's (unless ``full_rate_kv``: already scaled by the
    running gauge), the CPU per traced request and token covers the untraced ones too; a
    limit or routing read from requests in flight cannot be read."""
    if "engine.num_gpu_blocks" in settings and not full_rate_kv:
        settings["engine.num_gpu_blocks"] = int(settings["engine.num_gpu_blocks"] / sampled)
    for key in ("cpu.per_request_core_s", "cpu.per_token_core_s"):
        if key in settings:
            settings[key] = settings[key] * sampled
    gaps = []
    for key in _PER_REQUEST:
        if settings.pop(key, None) is not None:
            gaps.append(
                Gap(
                    key,
                    f"read from requests in flight, but only {sampled:.1%} are traced",
                    "the simulator's default",
                    "vLLM's running/waiting gauges, or unsampled gateway spans",
                )
            )
    return gaps


def _keys(gaps: list[Gap]) -> set[str]:
    return {g.part for g in gaps}


def _apply_what_fits(
    config: ScenarioConfig, settings: Mapping[str, Any]
) -> tuple[ScenarioConfig, list[Gap]]:
    """``config`` with ``settings`` applied; a setting the simulator refuses (alone or with
    the others) is left out and returned as a gap instead of aborting the calibration."""
    try:
        return apply_overrides(config, settings), []
    except ConfigError:
        pass
    kept: dict[str, Any] = {}
    gaps = []
    for key, value in settings.items():
        try:
            apply_overrides(config, {**kept, key: value})
        except ConfigError as exc:
            why = f"inferred {value!r}, which the simulator refuses: {exc}"
            gaps.append(Gap(key, why, "the simulator's default", "the deployment's spec (--base)"))
            continue
        kept[key] = value
    return apply_overrides(config, kept), gaps


def _hpa_gaps(capture: Capture, settings: dict[str, Any], evidence: dict[str, Any]) -> list[Gap]:
    """An HPA metric the simulator does not produce is modelled from its recorded series
    (``hpa.signal_weights``); what could not be read about the HPA is a gap."""
    if settings.get("hpa.enabled", True) is False:
        return []
    metric = settings.get("hpa.metric")
    if metric is None:
        return [
            Gap(
                "hpa.metric",
                "the HPA's metric is named by no spec series or rescale event",
                "CPU utilisation at the simulator's default target",
                "kube_horizontalpodautoscaler_spec_target_metric (kube-state-metrics) or the "
                "HPA's events",
            )
        ]
    gaps = []
    if metric not in (*HPA_SIGNALS[:-1], "cpu"):
        found, evidence["hpa_signal"] = infer_hpa_signal(capture, str(metric))
        if found:
            settings.update(found)
        else:
            why = evidence["hpa_signal"].get("note", "not fitted")
            gaps.append(
                Gap(
                    "hpa.metric",
                    f"{metric}: {why}",
                    "CPU utilisation at the simulator's default target",
                    f"the {metric} series the HPA read, beside vLLM's running/waiting gauges",
                )
            )
            settings.pop("hpa.metric", None)
            settings.pop("hpa.target", None)
            return gaps
    if "hpa.target" not in settings:
        gaps.append(
            Gap(
                "hpa.target",
                f"no spec series and no scale-up matched to {metric}'s values",
                "the simulator's default target",
                "kube_horizontalpodautoscaler_spec_target_metric",
            )
        )
    return gaps


def _unfit_model(settings: dict[str, Any]) -> list[Gap]:
    """A model whose weights leave no room for a KV cache on the GPUs read (a name's shape
    estimated too large, GPUs per pod not exported): the model is dropped, the step time is
    then fitted as a line, rather than a replay that cannot start."""
    shape, gpu = model_shape(settings), settings.get("gpu.type")
    if shape is None or gpu not in GPUS or "engine.num_gpu_blocks" in settings:
        return []
    gpus = int(settings.get("gpu.tp", 1)) * int(settings.get("gpu.pp", 1))
    try:
        kv_cache_blocks(shape, GPUS[gpu], gpus=gpus, dtype=str(settings.get("model.dtype", "bf16")))
    except ConfigError as exc:
        for key in [k for k in settings if k.startswith("model.")]:
            settings.pop(key)
        return [Gap("model.name", str(exc), "a step time fitted as a line",
                    "DCGM's gpu label per pod (GPUs per replica)")]  # fmt: skip
    return []


def _hardware_gaps(settings: Mapping[str, Any], evidence: Mapping[str, Any]) -> list[Gap]:
    """Model or GPU not named (or not in the catalog): the step time is fitted as a line; the
    KV cache, unless inferred from the telemetry, is sized for the simulator's defaults.  A
    model outside the catalog whose shape was estimated from its name (:mod:`.shapes`) is a
    gap too: its efficiencies are fitted, its KV bytes per token are an estimate."""
    gaps = []
    hw = evidence.get("hardware", {})
    if "model.params_b" in settings and hw.get("shape_from"):
        gaps.append(
            Gap(
                "model shape",
                f"{settings['model.name']} is not in the simulator's catalog; its shape is "
                f"estimated from its name ({settings['model.params_b']:g}B parameters, "
                f"{settings['model.layers']} layers, scaled from {hw['shape_from']})",
                "the roofline on that shape, its efficiencies fitted to the observed steps",
                "the model's config.json numbers in a --base (model.params_b, layers, hidden, "
                "heads, kv_heads)",
            )
        )
    known = "model.name" in settings and "gpu.type" in settings
    if not known:
        named = ", ".join(hw.get("model_names", [])) or "none"
        gaps.append(
            Gap(
                "model.name / gpu.type",
                f"model names seen: {named}; GPU: {hw.get('gpu') or 'not named'} "
                "(not both in the simulator's catalog)",
                "a step time fitted to the observed prefill/decode stages (a line: less safe "
                "far outside the observed batch sizes than a roofline)",
                "gen_ai.request.model on spans and DCGM's modelName label, for a catalog "
                "model and GPU",
            )
        )
    if "engine.num_gpu_blocks" not in settings and not known:
        gaps.append(KV_GAP)
    return gaps


KV_GAP = Gap(
    "engine.num_gpu_blocks",
    "no KV-cache usage gauge, and the engine never queued below its sequence ceiling",
    "a KV cache sized for the simulator's default model and GPU",
    "vllm:kv_cache_usage_perc with vllm:num_requests_running/waiting",
)


def kv_for_unknown_hardware(
    capture: Capture, base: ScenarioConfig, *, sampled: float = 1.0
) -> tuple[ScenarioConfig, dict[str, Any], list[Gap]]:
    """A base that names no hardware the roofline knows and no KV-cache size: the cache's
    size is read from the telemetry (usage gauge, else admission under queueing)."""
    found, part = infer_kv_blocks(capture, sampled=sampled)
    evidence = {"kv_cache": part}
    if not found:
        found, evidence["kv_admission"] = infer_kv_from_admission(capture, base.engine.max_num_seqs)
    if not found:
        return base, {"kv": evidence}, [KV_GAP]
    if sampled < 1.0:
        _unsampled(found, sampled, full_rate_kv=bool(part.get("full_rate")))
    config, gaps = _apply_what_fits(base, found)
    return config, {"kv": evidence, "settings": found}, gaps
