"""Models and GPUs by the names people type.

Model shapes come from each model's ``config.json`` on the Hugging Face hub (the repository
named is the source; parameter counts are the model cards' totals).  A model outside the
catalog is given by its architecture numbers (:func:`shape_from_numbers`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from tailtriage.errors import ConfigError
from tailtriage.simulator.steptime import GPUS, MODELS, GpuSpec, ModelShape


@dataclass(frozen=True, slots=True)
class CatalogModel:
    """A model shape and where its numbers come from."""

    shape: ModelShape
    source: str


def _hf(repo: str) -> str:
    return f"https://huggingface.co/{repo}/blob/main/config.json"


# fmt: off
_CATALOG: Final[dict[str, CatalogModel]] = {
    # dense: num_hidden_layers, hidden_size, num_attention_heads, num_key_value_heads
    "meta-llama/Llama-3.1-8B": CatalogModel(
        ModelShape("meta-llama/Llama-3.1-8B", 8.03, 32, 4096, 32, 8), _hf("meta-llama/Llama-3.1-8B")),
    "meta-llama/Llama-3.1-70B": CatalogModel(
        ModelShape("meta-llama/Llama-3.1-70B", 70.6, 80, 8192, 64, 8), _hf("meta-llama/Llama-3.1-70B")),
    "meta-llama/Llama-3.1-405B": CatalogModel(
        ModelShape("meta-llama/Llama-3.1-405B", 405.85, 126, 16384, 128, 8),
        _hf("meta-llama/Llama-3.1-405B")),
    "Qwen/Qwen2.5-72B": CatalogModel(
        ModelShape("Qwen/Qwen2.5-72B", 72.7, 80, 8192, 64, 8), _hf("Qwen/Qwen2.5-72B")),
    "Qwen/Qwen2.5-32B": CatalogModel(
        ModelShape("Qwen/Qwen2.5-32B", 32.8, 64, 5120, 40, 8), _hf("Qwen/Qwen2.5-32B")),
    # mixture of experts: + num_local_experts / num_experts / n_routed_experts and
    # num_experts_per_tok; active parameters from the model cards
    "mistralai/Mixtral-8x7B-v0.1": CatalogModel(
        ModelShape("mistralai/Mixtral-8x7B-v0.1", 46.7, 32, 4096, 32, 8,
                   active_params_b=12.9, experts=8, experts_per_token=2),
        _hf("mistralai/Mixtral-8x7B-v0.1")),
    "mistralai/Mixtral-8x22B-v0.1": CatalogModel(
        ModelShape("mistralai/Mixtral-8x22B-v0.1", 141.0, 56, 6144, 48, 8,
                   active_params_b=39.0, experts=8, experts_per_token=2),
        _hf("mistralai/Mixtral-8x22B-v0.1")),
    "Qwen/Qwen3-30B-A3B": CatalogModel(
        ModelShape("Qwen/Qwen3-30B-A3B", 30.5, 48, 2048, 32, 4, active_params_b=3.3,
                   experts=128, experts_per_token=8, head_size=128),
        _hf("Qwen/Qwen3-30B-A3B")),
    "Qwen/Qwen3-235B-A22B": CatalogModel(
        ModelShape("Qwen/Qwen3-235B-A22B", 235.0, 94, 4096, 64, 4, active_params_b=22.0,
                   experts=128, experts_per_token=8, head_size=128),
        _hf("Qwen/Qwen3-235B-A22B")),
    # DeepSeek-V3 caches MLA's compressed latent: kv_lora_rank 512 + qk_rope_head_dim 64
    "deepseek-ai/DeepSeek-V3": CatalogModel(
        ModelShape("deepseek-ai/DeepSeek-V3", 671.0, 61, 7168, 128, 128, active_params_b=37.0,
                   experts=256, experts_per_token=8, kv_elems_per_layer=576),
        _hf("deepseek-ai/DeepSeek-V3")),
}
# fmt: on

#: what people call a GPU -> the simulator's GPU entry
_GPU_ALIASES: Final[dict[str, str]] = {
    "h100-sxm-80gb": "H100",
    "h100-sxm": "H100",
    "h100-80gb": "H100",
    "h200-sxm-141gb": "H200",
    "h200-141gb": "H200",
    "a100-80gb": "A100",
    "a100-sxm-80gb": "A100",
    "a100-sxm4-80gb": "A100",
    "a100-40gb": "A100-40GB",
    "a100-sxm4-40gb": "A100-40GB",
    "l40s-48gb": "L40S",
    "l4-24gb": "L4",
}


def resolve_model(name: str) -> CatalogModel:
    """A catalog entry by Hugging Face name (case-insensitive) or a simulator shape name."""
    for key, entry in _CATALOG.items():
        if key.lower() == name.lower():
            return entry
    if name.lower() in MODELS:
        return CatalogModel(MODELS[name.lower()], "tailtriage.simulator.steptime.MODELS")
    known = ", ".join([*_CATALOG, *MODELS])
    raise ConfigError(
        f"unknown model {name!r}; known: {known}; or give --layers --hidden --heads --kv-heads "
        "--params-b (and --experts --experts-per-token --active-params-b for MoE)"
    )


def shape_from_numbers(
    name: str,
    *,
    params_b: float,
    layers: int,
    hidden: int,
    heads: int,
    kv_heads: int,
    experts: int = 0,
    experts_per_token: int = 0,
    active_params_b: float = 0.0,
) -> CatalogModel:
    """A model given by its architecture numbers (config.json of a model outside the catalog)."""
    if min(params_b, layers, hidden, heads, kv_heads) <= 0:
        raise ConfigError("--params-b, --layers, --hidden, --heads and --kv-heads must be > 0")
    if heads % kv_heads or hidden % heads:
        raise ConfigError(f"--heads {heads} must divide --hidden {hidden} and be a multiple "
                          f"of --kv-heads {kv_heads}")  # fmt: skip
    if experts and not 0 < experts_per_token <= experts:
        raise ConfigError("--experts-per-token must be in 1..--experts")
    if experts and not 0 < active_params_b < params_b:
        raise ConfigError("a mixture-of-experts model needs 0 < --active-params-b < --params-b")
    shape = ModelShape(name, params_b, layers, hidden, heads, kv_heads,
                       active_params_b=active_params_b if experts else 0.0,
                       experts=experts, experts_per_token=experts_per_token)  # fmt: skip
    return CatalogModel(shape, "architecture numbers given on the command line")


def resolve_gpu(name: str) -> GpuSpec:
    """A GPU by simulator name (``H100``) or marketing name (``H100-SXM-80GB``)."""
    for key, spec in GPUS.items():
        if key.lower() == name.lower():
            return spec
    alias = _GPU_ALIASES.get(name.lower())
    if alias is not None:
        return GPUS[alias]
    known = ", ".join([*GPUS, *(a.upper() for a in _GPU_ALIASES)])
    raise ConfigError(f"unknown GPU {name!r}; known: {known}")
