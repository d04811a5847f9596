"""The request shape a layout is sized for: prompt and output lengths and the longest context.

From a capture (its requests' token counts) or a spec such as ``prompt=2048,output=256``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np

from tailtriage.errors import ConfigError, InsufficientDataError
from tailtriage.model.capture import Capture

#: a chat-like default when no workload is given (ShareGPT-style means, rounded)
DEFAULT_PROMPT: Final = 1024
DEFAULT_OUTPUT: Final = 256
#: the context a layout must hold for one request: this quantile of prompt + output, so one
#: outlier does not decide the fit but the tail the SLO is about does
CONTEXT_QUANTILE: Final = 99.0


@dataclass(frozen=True, slots=True)
class WorkloadShape:
    prompt_tokens: float  # mean prompt length
    output_tokens: float  # mean output length
    max_context: int  # tokens one request may hold in the KV cache
    source: str

    @property
    def mean_context(self) -> float:
        """Tokens an average running sequence holds (its prompt and half its output)."""
        return self.prompt_tokens + self.output_tokens / 2


def default_workload() -> WorkloadShape:
    return WorkloadShape(
        DEFAULT_PROMPT, DEFAULT_OUTPUT, DEFAULT_PROMPT + DEFAULT_OUTPUT,
        f"default (prompt={DEFAULT_PROMPT},output={DEFAULT_OUTPUT})",
    )  # fmt: skip


def parse_spec(text: str) -> WorkloadShape:
    """``prompt=2048,output=256[,context=8192]`` (tokens)."""
    values: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, raw = part.partition("=")
        if not sep or key.strip() not in ("prompt", "output", "context"):
            raise ConfigError(
                f"--workload {text!r}: expected prompt=N,output=N[,context=N], got {part!r}"
            )
        try:
            values[key.strip()] = int(raw)
        except ValueError:
            raise ConfigError(
                f"--workload {text!r}: {key.strip()} must be a whole number"
            ) from None
    if "prompt" not in values or "output" not in values:
        raise ConfigError(f"--workload {text!r}: needs prompt=N and output=N")
    if min(values.values()) <= 0:
        raise ConfigError(f"--workload {text!r}: token counts must be > 0")
    context = values.get("context", values["prompt"] + values["output"])
    return WorkloadShape(float(values["prompt"]), float(values["output"]), context, text)


def from_capture(capture: Capture, source: str) -> WorkloadShape:
    """Mean lengths and the p99 context of the capture's requests with both token counts."""
    req = capture.requests
    prompt = np.asarray(req["prompt_tokens"].to_numpy(zero_copy_only=False), dtype=np.float64)
    output = np.asarray(req["output_tokens"].to_numpy(zero_copy_only=False), dtype=np.float64)
    ok = np.isfinite(prompt) & np.isfinite(output) & (prompt > 0)
    if not ok.any():
        raise InsufficientDataError(
            f"{source}: no request carries prompt and output token counts; give "
            "--workload prompt=N,output=N instead"
        )
    prompt, output = prompt[ok], output[ok]
    context = int(np.ceil(np.percentile(prompt + output, CONTEXT_QUANTILE)))
    return WorkloadShape(
        float(prompt.mean()), float(output.mean()), context,
        f"{source} ({int(ok.sum())} requests with token counts)",
    )  # fmt: skip


def is_spec(text: str) -> bool:
    """Whether ``--workload`` is a spec (``prompt=...``) rather than a path to read."""
    return "=" in text and not Path(text).exists()
