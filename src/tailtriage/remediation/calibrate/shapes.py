"""A model outside the simulator's catalog: its shape estimated from the name it is served as.

Telemetry names the model (``gen_ai.request.model``, vLLM's ``model_name`` label) but not its
architecture.  A name outside ``steptime.MODELS`` still carries the two facts that set most of
an LLM's cost: its family and its parameter count (``DeepSeek-R1-Distill-Qwen-14B``: a Qwen,
14 billion parameters; ``Llama-3.3-70B-Instruct``: a Llama, 70 billion).  The weights read per
step and the FLOPs per token follow from the count; the KV bytes per token from the depth,
the KV heads and the head size, which are taken from the family's catalog shape nearest in
size (one with grouped-query attention where the family has one) and scaled to the count
the way dense families grow (depth ~ p^0.4, width ~ p^0.3:
Llama 3 8B -> 70B is 32 -> 80 layers, 4096 -> 8192 wide; head size and KV heads kept).

The estimate only has to be close: the roofline's efficiencies (MFU, MBU, step overhead) are
then fitted to the observed steps, and a measured KV-cache size (``vllm:kv_cache_usage_perc``)
overrides the one the shape implies.  A mixture-of-experts name (``8x7B``, ``30B-A3B``) or a name without a
parameter count gives no estimate (the calibration then fits a line and reports the gap).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tailtriage.simulator.config import ModelConfig
from tailtriage.simulator.steptime import MODELS, ModelShape

#: how a dense family's depth and width grow with its parameter count (exponents; see above)
DEPTH_EXPONENT = 0.4
WIDTH_EXPONENT = 0.3
#: parameter counts the estimate trusts (billions): outside, the name is more likely a tag
PARAMS_RANGE_B = (0.5, 1000.0)

_COUNT = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)b(?![a-z0-9])")
#: mixture-of-experts names: ``8x7B`` (experts x size), ``30B-A3B`` (active parameters)
_MOE = re.compile(r"\d+x\d+(?:\.\d+)?b|(?<![a-z0-9])a\d+(?:\.\d+)?b(?![a-z0-9])")


@dataclass(frozen=True)
class EstimatedShape:
    """A model's shape estimated from its name, and the catalog shape it was scaled from."""

    shape: ModelShape
    template: str


def _family(name: str) -> str:
    """``llama`` of ``llama-3.1-70b``: the leading letters of a catalog key or served name."""
    match = re.match(r"[a-z]+", name)
    return match.group(0) if match else ""


def params_of(name: str) -> float | None:
    """The parameter count (billions) a served model name states, e.g. 14 of ``...-Qwen-14B``."""
    text = name.lower()
    if _MOE.search(text):
        return None
    counts = [float(m.group(1)) for m in _COUNT.finditer(text)]
    counts = [c for c in counts if PARAMS_RANGE_B[0] <= c <= PARAMS_RANGE_B[1]]
    return counts[-1] if counts else None


def estimate_shape(names: Iterable[str]) -> EstimatedShape | None:
    """The shape of the first name that states a parameter count (see module doc)."""
    for raw in names:
        words = re.sub(r"[^a-z0-9.]+", "-", raw.lower()).split("-")
        params = params_of(raw)
        if params is None:
            continue
        # the family named in the last word that is one (``...-distill-qwen-14b``: a Qwen)
        families = {_family(k) for k in MODELS}
        family = next((_family(w) for w in reversed(words) if _family(w) in families), "")
        pool = [s for s in MODELS.values() if _family(s.name) == family] or list(MODELS.values())
        # grouped-query attention where the family has it: served models since 2024 use it
        pool = [s for s in pool if s.kv_heads < s.heads] or pool
        template = min(pool, key=lambda s: abs(math.log(s.params_b / params)))
        return EstimatedShape(_scaled(template, params, raw), template.name)
    return None


def _scaled(template: ModelShape, params: float, name: str) -> ModelShape:
    ratio = params / template.params_b
    head = template.head_dim
    layers = max(1, round(template.layers * ratio**DEPTH_EXPONENT))
    # heads: the width over the head size, a multiple of the KV heads (grouped-query attention)
    kv = template.kv_heads
    heads = max(kv, round(template.hidden * ratio**WIDTH_EXPONENT / head / kv) * kv)
    return ModelShape(name, params, layers, heads * head, heads, kv)


def model_shape(settings: Mapping[str, Any]) -> ModelShape | None:
    """The model shape inferred settings name: a catalog one, or one estimated from the name."""
    name = settings.get("model.name")
    if settings.get("model.params_b"):
        keys = ("params_b", "layers", "hidden", "heads", "kv_heads")
        return ModelConfig(str(name), **{k: settings[f"model.{k}"] for k in keys}).shape
    return MODELS.get(str(name)) if name else None
