"""The engine's token budget, fitted by replay where the telemetry does not show it.

``max_num_batched_tokens`` decides how a long prompt shares its steps with the other requests'
decodes: within the budget, prefilled whole in one long step (every decode beside it stalls
for it: prefill interference), or chunked into budget-sized pieces.  vLLM shows it only in its
tokens-per-step histogram (``vllm:iteration_tokens_total``, :func:`.infer.infer_token_budget`);
without that, the calibration assumes 2048 tokens and lists the assumption as a gap
(:func:`budget_gap`).  2048 is vLLM's serving default on GPUs under 70 GiB and on A100s; on
larger ones ``EngineArgs.get_batch_defaults`` gives 8192 (vLLM PR #17885).  Assuming 8192
there was tried on the tuning corpus, whose engines run either, and replayed no better
(docs/simulator-validation.md, stop 36); the gap says which to pass.

Where a long-prompt minority makes the budget matter (some prompts several times the assumed
budget), one more replay tries a budget that prefills them whole, and the calibration keeps
whichever replays the observed percentiles better (the same score as every other choice it
makes): an incident engine that stalled its decodes behind whole 10k-token prefills then
replays as it ran, and a chunking fix is predicted against that engine, not the default."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import numpy as np

from tailtriage.model import Capture
from tailtriage.remediation.calibrate.gaps import Gap
from tailtriage.simulator.config import EngineConfig, ScenarioConfig, apply_overrides
from tailtriage.simulator.workload import Workload

#: the simulator key fitted here (and the calibration gap's part)
BUDGET_KEY: Final = "engine.max_num_batched_tokens"
#: a prompt this many times the assumed budget is chunked into that many steps or prefilled
#: in one: the two engines differ in how long every decode beside it stalls
LONG_PROMPT_FACTOR: Final = 4
#: at least this share of such prompts, for the difference to reach a percentile's tail
LONG_PROMPT_SHARE: Final = 0.01
#: the largest budget tried: vLLM serves up to this per step on one replica in practice
#: (the order of max_model_len for long-context serving); longer prompts are chunked anyway
MAX_BUDGET: Final = 65536


def budget_candidate(config: ScenarioConfig, workload: Workload) -> int | None:
    """A budget that prefills the long-prompt minority whole (the smallest power of two at
    least its 99th percentile, at most MAX_BUDGET), or None where no minority makes the
    budget matter."""
    budget = config.engine.max_num_batched_tokens
    prompts = np.asarray(workload.prompt_tokens, dtype=float)
    if prompts.size == 0:
        return None
    long = prompts[prompts >= LONG_PROMPT_FACTOR * budget]
    if long.size < LONG_PROMPT_SHARE * prompts.size or long.size == 0:
        return None
    want = float(np.percentile(long, 99))
    candidate = min(MAX_BUDGET, 1 << int(np.ceil(np.log2(max(want, 1.0)))))
    return candidate if candidate > budget else None


def with_budget(config: ScenarioConfig, budget: int) -> ScenarioConfig:
    return apply_overrides(config, {BUDGET_KEY: budget})


def budget_gap(capture: Capture, settings: Mapping[str, Any]) -> list[Gap]:
    """The engine's token budget and chunking, when nothing showed them and some prompt is
    longer than the default budget (then they decide how a long prompt shares its steps
    with other requests' decodes: what prefill interference and its fixes turn on)."""
    if BUDGET_KEY in settings or capture.requests.num_rows == 0:
        return []
    default = EngineConfig()
    prompts = capture.requests["prompt_tokens"].to_numpy(zero_copy_only=False).astype(float)
    if not np.any(prompts[np.isfinite(prompts)] > default.max_num_batched_tokens):
        return []
    return [
        Gap(
            BUDGET_KEY,
            "no vllm:iteration_tokens_total histogram: how many tokens a step takes, and so "
            "whether long prompts are chunked, does not show",
            f"{default.max_num_batched_tokens} tokens per step with chunked prefill (vLLM's "
            "serving default on GPUs under 70 GiB and on A100s; on larger GPUs it has been "
            "8192 since vLLM PR #17885); a fix that changes the budget or chunking is predicted "
            "against it",
            "vllm:iteration_tokens_total (vLLM's tokens-per-step histogram), or the engine's "
            "flags in a --base (engine.max_num_batched_tokens, engine.chunked_prefill)",
        )
    ]
