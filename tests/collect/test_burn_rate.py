"""Burn-rate evaluation against a stub Prometheus HTTP API: which bucket stands for the
threshold, the PromQL asked, and when a window pair pages (the real server: the
integration test of `watch`)."""

from __future__ import annotations

import pytest
from tests.collect.fakes import Reply, Route, serve

from tailtriage.analyses.slo import parse_slos
from tailtriage.collect.burn_rate import BurnWindow, evaluate

LES = ["0.1", "0.25", "0.5", "1.0", "+Inf"]


def _stub(bad_ratio: dict[str, float | None], asked: list[str]) -> Route:
    def route(path: str, query: dict[str, str]) -> Reply:
        assert path == "/api/v1/query"
        q = query["query"]
        asked.append(q)
        if q.startswith("group by (le)"):
            rows = [{"metric": {"le": le}, "value": [0, "1"]} for le in LES]
            return 200, {"status": "success", "data": {"resultType": "vector", "result": rows}}
        window = q.rsplit("[", 1)[1].split("]", 1)[0]
        ratio = bad_ratio[window]
        rows = [] if ratio is None else [{"metric": {}, "value": [0, str(ratio)]}]
        return 200, {"status": "success", "data": {"resultType": "vector", "result": rows}}

    return route


PAIR = (BurnWindow(3600.0, 300.0, 14.4),)


@pytest.mark.parametrize(
    ("long_ratio", "short_ratio", "pages"),
    [(0.9, 0.9, True), (0.9, 0.5, False), (0.5, 0.9, False), (None, None, False)],
)
def test_a_pair_pages_only_when_both_windows_burn(
    long_ratio: float | None, short_ratio: float | None, pages: bool
) -> None:
    (slo,) = parse_slos("p95 ttft < 500ms")
    asked: list[str] = []
    with serve(_stub({"3600s": long_ratio, "300s": short_ratio}, asked)) as url:
        ev = evaluate(url, slo, 1e9, namespace="llm", windows=PAIR)
    assert ev.breached is pages and ev.bucket_le == 0.5 and ev.note == ""
    burn = dict(ev.burn)
    if long_ratio is None:
        assert burn == {300.0: None, 3600.0: None}  # no traffic: no burn, no page
    else:
        assert burn[3600.0] == pytest.approx(long_ratio / 0.05)
    ratio_q = asked[-1]
    assert 'le="0.5"' in ratio_q and 'namespace="llm"' in ratio_q
    assert "vllm:time_to_first_token_seconds_bucket" in ratio_q
    assert "vllm:time_to_first_token_seconds_count" in ratio_q


def test_a_threshold_between_buckets_uses_the_one_below_and_says_so() -> None:
    (slo,) = parse_slos("p99 ttft < 800ms")
    asked: list[str] = []
    with serve(_stub({"3600s": 0.5, "300s": 0.5}, asked)) as url:
        ev = evaluate(url, slo, 1e9, windows=PAIR)
    assert ev.bucket_le == 0.5 and "used le=0.5" in ev.note
    assert ev.breached  # 0.5 / 0.01 = 50x
    (tiny,) = parse_slos("p95 ttft < 50ms")
    with serve(_stub({}, [])) as url:
        none = evaluate(url, tiny, 1e9, windows=PAIR)
    assert not none.breached and "no ttft histogram bucket" in none.note
