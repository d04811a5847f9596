"""An evaluation set of every kind, written to a temporary file."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest


def eval_lines(n_each: int = 20) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for i in range(n_each):
        rows.append(
            {
                "id": f"mc-{i}",
                "type": "mc",
                "answer": "ABCD"[i % 4],
                "prompt": f"Question {i}: pick one. A) a B) b C) c D) d",
            }
        )
        rows.append(
            {
                "id": f"num-{i}",
                "type": "numeric",
                "answer": str(i * 7 + 0.5),
                "tolerance": 0.01,
                "category": "math",
                "prompt": f"What is {i} * 7 + 0.5?",
            }
        )
        rows.append(
            {
                "id": f"ex-{i}",
                "type": "exact",
                "answer": f"City {i}",
                "category": "retrieval",
                "prompt": f"Which city is number {i}?",
            }
        )
    rows.append(
        {
            "id": "code-0",
            "type": "code",
            "answer": "def f(): return 1",
            "prompt": "Write f returning 1.",
        }
    )
    return rows  # fmt: skip


@pytest.fixture
def eval_file(tmp_path: Path) -> Path:
    path = tmp_path / "evals.jsonl"
    path.write_bytes(b"\n".join(orjson.dumps(r) for r in eval_lines()) + b"\n")
    return path
