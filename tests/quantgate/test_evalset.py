"""Evaluation-set parsing and scoring (shared by quantgate and serve-sim --eval)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tailtriage.errors import ParseError
from tailtriage.loadgen.evalset import EvalItem, is_correct, load_evalset
from tailtriage.loadgen.server.answers import load_answerer, wrong_answer


def test_scoring_by_type() -> None:
    mc = EvalItem("1", "mc", "q", "B")
    assert is_correct(mc, "The answer is B) because") and not is_correct(mc, "A")
    num = EvalItem("2", "numeric", "q", "1,234.5", tolerance=0.1)
    assert is_correct(num, "so it is 1234.55") and not is_correct(num, "1235")
    assert not is_correct(num, "no number at all")
    ex = EvalItem("3", "exact", "q", "Paris")
    assert is_correct(ex, "Answer: paris.") and not is_correct(ex, "Paris, France")
    assert is_correct(EvalItem("4", "code", "q", "x"), "x") is None


def test_wrong_answers_are_scored_wrong() -> None:
    for item in (EvalItem("1", "mc", "q", "A"), EvalItem("2", "numeric", "q", "0", 0.5),
                 EvalItem("3", "exact", "q", "yes")):  # fmt: skip
        assert is_correct(item, wrong_answer(item)) is False
        assert is_correct(item, item.answer) is True


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        ("{not json", "not JSON"),
        ('{"type": "essay", "prompt": "p", "answer": "a"}', "essay"),
        ('{"type": "numeric", "prompt": "p", "answer": "many"}', "not a number"),
        ('{"prompt": 3, "answer": "a"}', "string prompt"),
    ],
)
def test_a_broken_line_names_file_and_line(tmp_path: Path, line: str, needle: str) -> None:
    path = tmp_path / "e.jsonl"
    path.write_text('{"id": "a", "prompt": "p", "answer": "x"}\n\n' + line + "\n")
    with pytest.raises(ParseError, match=needle) as err:
        load_evalset(path)
    assert f"{path}:line 3" in str(err.value)


def test_the_answerer_is_wrong_for_a_fixed_share_chosen_by_the_seed(eval_file: Path) -> None:
    items = [i for i in load_evalset(eval_file)]
    a = load_answerer(eval_file, 0.3, seed=1)
    again = load_answerer(eval_file, 0.3, seed=1)
    other = load_answerer(eval_file, 0.3, seed=2)
    assert a.wrong == again.wrong and a.wrong != other.wrong
    assert 0.15 * len(items) < len(a.wrong) < 0.45 * len(items)
    assert not load_answerer(eval_file, 0.0, seed=1).wrong
    for item in items:
        right = is_correct(item, a.answer(item.prompt))
        assert right is None or right == (item.id not in a.wrong)
