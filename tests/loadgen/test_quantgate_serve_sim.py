"""`tailtriage quantgate` end to end over real HTTP: two serve-sim engines answer the same
evaluation set (`serve-sim --eval`), one wrong on a seeded share of the items; the gate must
measure exactly that share and decide against the budget."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

import tailtriage.cli.commands  # noqa: F401  (registers the commands)
from tailtriage.cli._app import app
from tailtriage.loadgen.evalset import load_evalset
from tailtriage.loadgen.server.answers import load_answerer
from tailtriage.loadgen.server.sim import SimSettings

from .servers import serve_sim_process, sim_server

pytestmark = pytest.mark.slow


@pytest.fixture
def eval_file(tmp_path: Path) -> Path:
    """20 items of each scored kind and one code item."""
    rows: list[dict[str, object]] = [
        {"id": "code-0", "type": "code", "answer": "def f(): return 1", "prompt": "Write f."}
    ]
    for i in range(20):
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
        rows.append({"id": f"ex-{i}", "type": "exact", "answer": f"City {i}",
                     "prompt": f"Which city is number {i}?"})  # fmt: skip
    path = tmp_path / "evals.jsonl"
    path.write_bytes(b"\n".join(orjson.dumps(r) for r in rows) + b"\n")
    return path


def _gate(base: int, cand: int, eval_file: Path, out: Path, budget: str = "1pt") -> int:
    result = CliRunner().invoke(app, [
        "quantgate", "--baseline", f"http://127.0.0.1:{base}", "--candidate",
        f"http://127.0.0.1:{cand}", "--eval", str(eval_file), "--budget", budget,
        "--json", str(out),
    ])  # fmt: skip
    assert result.exit_code in (0, 1), result.output
    return result.exit_code


def test_a_candidate_wrong_on_a_seeded_share_fails_the_gate(
    eval_file: Path, tmp_path: Path
) -> None:
    truth = load_answerer(eval_file, 0.3, seed=7)
    scored = [i for i in load_evalset(eval_file) if i.type != "code"]
    wrong = sum(i.id in truth.wrong for i in scored)
    out = tmp_path / "gate.json"
    with (
        sim_server(SimSettings(eval_file=eval_file)) as base,
        serve_sim_process(
            "--eval", str(eval_file), "--eval-error-rate", "0.3", "--eval-seed", "7"
        ) as cand,  # fmt: skip
    ):
        code = _gate(base, cand, eval_file, out)
    doc = orjson.loads(out.read_bytes())
    assert code == 1 and doc["verdict"] == "fail"
    overall = doc["overall"]
    assert overall["n"] == len(scored) and overall["baseline_accuracy"] == 1.0
    assert overall["only_baseline_right"] == wrong and overall["only_candidate_right"] == 0
    assert overall["delta_pt"] == pytest.approx(-100 * wrong / len(scored), abs=0.01)
    assert doc["unsupported_code_items"] == 1
    assert set(doc["by_type"]) == {"mc", "numeric", "exact"}
    assert doc["speed"]["baseline"]["output_tokens_per_s"] > 0


def test_an_equally_accurate_candidate_passes(eval_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "gate.json"
    with (
        sim_server(SimSettings(eval_file=eval_file)) as base,
        sim_server(SimSettings(eval_file=eval_file, eval_seed=3)) as cand,
    ):
        code = _gate(base, cand, eval_file, out, budget="5pt")
    doc = orjson.loads(out.read_bytes())
    assert code == 0 and doc["verdict"] == "pass"
    assert doc["overall"]["delta_pt"] == 0.0 and doc["overall"]["mcnemar_p"] == 1.0
