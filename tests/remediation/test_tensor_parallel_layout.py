"""The tensor_parallel remediation asks `advise parallelism` before proposing a TP degree."""

from __future__ import annotations

import re
from typing import Any

from tailtriage.remediation.catalog import _advised_layout


def config(**values: Any) -> Any:
    return lambda key: values.get(key)


def test_a_degree_whose_weights_do_not_fit_is_not_proposed() -> None:
    # 70B bf16 on TP2 of H100: halving to TP1 puts 141 GB of weights on one 80 GB GPU
    current = config(**{"model.name": "llama-3.1-70b", "gpu.type": "H100", "gpu.tp": 2})
    assert _advised_layout(current, 2, 1) == (False, "")


def test_the_proposal_carries_the_advised_tpot() -> None:
    current = config(**{"model.name": "llama-3.1-70b", "gpu.type": "H100", "gpu.tp": 4})
    fits, note = _advised_layout(current, 4, 8)
    assert fits
    match = re.search(r"2 × TP4 -> TP8, TPOT at batch 1 ([\d.]+) -> ([\d.]+) ms", note)
    assert match, note
    assert float(match.group(2)) < float(match.group(1))


def test_unknown_model_or_gpu_leaves_the_proposal_as_it_was() -> None:
    assert _advised_layout(config(**{"model.name": "mystery"}), 2, 4) == (True, "")
