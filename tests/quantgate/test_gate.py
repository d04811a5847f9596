"""The paired statistics and the verdict, on answers whose truth is known."""

from __future__ import annotations

import pytest

from tailtriage.errors import ConfigError
from tailtriage.loadgen.evalset import EvalItem
from tailtriage.loadgen.request import RequestRecord
from tailtriage.quantgate.ask import EndpointRun
from tailtriage.quantgate.gate import gate, parse_budget
from tailtriage.quantgate.paired import compare


def test_identical_answers_mean_no_change() -> None:
    c = compare([True, False] * 50, [True, False] * 50)
    assert c.delta_pt == 0 and c.ci_low_pt == 0 and c.ci_high_pt == 0 and c.mcnemar_p == 1.0


def test_mcnemar_counts_only_discordant_items() -> None:
    # 10 items flip from right to wrong and none the other way: p = 2 x 0.5^10
    base = [True] * 100
    cand = [False] * 10 + [True] * 90
    c = compare(base, cand)
    assert (c.only_baseline, c.only_candidate) == (10, 0)
    assert c.mcnemar_p == pytest.approx(2 / 1024)
    assert c.delta_pt == pytest.approx(-10.0)
    assert c.ci_low_pt < -10.0 < c.ci_high_pt < 0.0
    # concordant items added on both sides do not change the test, they narrow the interval
    wide = compare(base + [False] * 100, cand + [False] * 100)
    assert wide.mcnemar_p == c.mcnemar_p
    assert wide.ci_high_pt - wide.ci_low_pt < c.ci_high_pt - c.ci_low_pt


def _items(n: int, kind: str = "exact") -> list[EvalItem]:
    return [EvalItem(f"{kind}-{i}", kind, f"q{i}", "yes", category="math" if i % 2 else "")
            for i in range(n)]  # fmt: skip


def _run(answers: list[str | None], tokens: int = 10, wall: float = 1.0) -> EndpointRun:
    rec = RequestRecord("r", "t" * 32, "s" * 16, 0, 0, "m", None, 0.0, 0.1, 0.1, 0.5, "ok",
                        None, None, 200, 5, tokens, ())  # fmt: skip
    return EndpointRun("http://x", tuple(answers), (rec,), wall)


def test_verdicts_follow_the_interval_against_the_budget() -> None:
    items = _items(400)
    right: list[str | None] = ["yes"] * 400
    same = gate(items, _run(right), _run(right, tokens=20), 1.0)
    assert same.verdict == "pass" and same.throughput_gain_pct == pytest.approx(100.0)
    worse = gate(items, _run(right), _run(["no"] * 40 + ["yes"] * 360), 1.0)
    assert worse.verdict == "fail"  # -10 pt with a CI well below -1 pt
    few = _items(20)
    unsure = gate(few, _run(["yes"] * 20), _run(["no"] + ["yes"] * 19), 1.0)
    assert unsure.verdict == "inconclusive" and "add items" in unsure.reasons[0]


def test_failed_requests_and_code_items_are_left_out_and_counted() -> None:
    items = [*_items(10), EvalItem("c", "code", "write", "x")]
    base = _run(["yes"] * 10 + ["x"])
    cand = _run([None, *["yes"] * 9, "x"])
    report = gate(items, base, cand, 1.0)
    assert report.overall.n == 9 and report.unsupported == 1 and report.failed == (0, 1)
    areas = {area: n for area, _, n in report.risks}
    assert areas["math and code"] == 5 and areas["long-context retrieval"] == 0


def test_budget_parsing() -> None:
    assert parse_budget("1pt") == 1.0 and parse_budget("0.5 pt") == 0.5 and parse_budget("2") == 2
    with pytest.raises(ConfigError, match="--budget"):
        parse_budget("1%")
