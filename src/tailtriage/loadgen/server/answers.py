"""serve-sim's evaluation mode: answer the items of an evaluation set, wrong at a set rate.

Which items are answered wrongly is fixed by the seed (and the item's id), so two servers with
different rates or seeds stand in for a baseline model and a quantized candidate, and an
accuracy comparison over real HTTP has a known truth."""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from tailtriage.errors import ConfigError
from tailtriage.loadgen.evalset import EvalItem, load_evalset, parse_number

#: the answer to a prompt that is not in the evaluation set
UNKNOWN: Final = "I do not know."


def wrong_answer(item: EvalItem) -> str:
    """An answer ``is_correct`` rejects, of the item's own kind."""
    if item.type == "mc":
        letter = item.answer.strip().upper()[:1] or "A"
        return "B" if letter == "A" else "A"
    if item.type == "numeric":
        value = parse_number(item.answer) or 0.0
        return f"{value + max(1.0, abs(value)) + 10 * item.tolerance:g}"
    return f"not {item.answer}"


@dataclass(frozen=True, slots=True)
class EvalAnswerer:
    """Prompt -> answer text for every item of an evaluation set."""

    answers: dict[str, str]
    wrong: frozenset[str]  # ids answered wrongly

    def answer(self, prompt: str) -> str:
        return self.answers.get(prompt.strip(), UNKNOWN)


def load_answerer(path: Path, error_rate: float, seed: int) -> EvalAnswerer:
    if not 0.0 <= error_rate <= 1.0:
        raise ConfigError(f"--eval-error-rate {error_rate}: must be in [0, 1]")
    answers: dict[str, str] = {}
    wrong: set[str] = set()
    for item in load_evalset(path):
        # one draw per (seed, id): the same item is wrong on every request and every run
        bad = random.Random(f"tailtriage.serve-sim.eval/{seed}/{item.id}").random() < error_rate
        if bad:
            wrong.add(item.id)
        answers[item.prompt.strip()] = wrong_answer(item) if bad else item.answer
    return EvalAnswerer(answers, frozenset(wrong))
