"""The HTML report without a browser: self-contained, escaped, bounded in size, complete."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from dataclasses import replace
from html.parser import HTMLParser

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from renderers.report_builders import (
    HOSTILE,
    HOSTILE_SCRIPT,
    make_compare_report,
    make_empty_report,
    make_hostile_report,
    make_huge_report,
    make_nonfinite_report,
    make_report,
)
from tailtriage.analyses.results import PercentilePoint
from tailtriage.diagnosis.findings import Evidence, Finding
from tailtriage.renderers import render
from tailtriage.renderers.html import embed_json
from tailtriage.report import Report


class Tags(HTMLParser):
    """Collects start tags, and the text inside <script> elements."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[str] = []
        self.styles: list[str] = []
        self._in: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag in ("script", "style"):
            self._in = tag
            (self.scripts if tag == "script" else self.styles).append("")

    def handle_endtag(self, tag: str) -> None:
        self._in = None

    def handle_data(self, data: str) -> None:
        if self._in == "script":
            self.scripts[-1] += data
        elif self._in == "style":
            self.styles[-1] += data


def parse(page: str) -> Tags:
    t = Tags()
    t.feed(page)
    return t


def html_of(report: Report) -> str:
    return render(report, "html")


def test_page_is_offline() -> None:
    page = html_of(make_report())
    urls = re.findall(r"(?:https?|wss?|ftp)://[^\s\"'<>)]+", page)
    # the only URL is the SVG namespace, which is a name and is never fetched
    assert set(urls) == {"http://www.w3.org/2000/svg"}
    tags = parse(page).tags
    assert not [
        t
        for t, a in tags
        if t in ("link", "img", "iframe", "object", "embed") and a.get("href", "data:") != "data:,"
    ]
    assert not [a for t, a in tags if "src" in a]


def test_csp_allows_exactly_the_inline_script_and_style() -> None:
    page = html_of(make_report())
    tags = parse(page)
    csp = next(
        a["content"]
        for t, a in tags.tags
        if t == "meta" and a.get("http-equiv") == "Content-Security-Policy"
    )
    assert csp is not None and "default-src 'none'" in csp
    code = [
        s
        for (t, a), s in zip([x for x in tags.tags if x[0] == "script"], tags.scripts, strict=True)
        if "type" not in a
    ]
    assert len(code) == 1

    def digest(text: str) -> str:
        return "sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()

    assert f"script-src '{digest(code[0])}'" in csp
    assert f"style-src '{digest(tags.styles[0])}'" in csp
    assert not [a for t, a in tags.tags if "style" in a or any(k.startswith("on") for k in a)]


def test_hostile_values_are_escaped() -> None:
    page = html_of(make_hostile_report())
    assert HOSTILE not in page and HOSTILE_SCRIPT not in page
    tags = parse(page)
    assert [t for t, _ in tags.tags].count("script") == 2
    assert "img" not in [t for t, _ in tags.tags]
    assert "&lt;img src=x onerror=&quot;window.__pwned=1&quot;&gt;" in page


def test_embedded_json_cannot_close_its_script_and_round_trips() -> None:
    doc = {"a": HOSTILE_SCRIPT, "b": "<!-- x -->", "c": "\u2028&", HOSTILE: [1, 2.5]}
    raw = embed_json(doc)
    assert "</" not in raw and "<!--" not in raw and "<" not in raw and "\u2028" not in raw
    assert json.loads(raw) == doc


def test_embedded_json_is_the_report() -> None:
    tags = parse(html_of(make_hostile_report()))
    data_idx = [
        i
        for i, (t, a) in enumerate([x for x in tags.tags if x[0] == "script"])
        if a.get("type") == "application/json"
    ]
    assert len(data_idx) == 1
    doc = json.loads(tags.scripts[data_idx[0]])
    assert doc["title"] == make_hostile_report().title
    assert Report.from_dict(doc).findings[0].summary == make_hostile_report().findings[0].summary


def test_every_section_of_the_issue_is_present() -> None:
    page = html_of(make_report())
    for sid in (
        "summary",
        "decomposition",
        "timeline",
        "findings",
        "remediations",
        "request",
        "distributions",
        "replicas",
        "numbers",
        "quality",
    ):
        assert f'<section id="{sid}">' in page, sid
    svgs = re.findall(r"<svg class=\"chart[^\"]*\".*?</svg>", page, flags=re.S)
    # stage bars, percentile + timeline, waterfall, 2 CDFs, replicas, 3 prediction charts
    assert len(svgs) >= 10
    assert all("<title>" in s for s in svgs)
    assert "Copy config" in page and "averageValue: &quot;5&quot;" in page
    assert "vllm:num_requests_waiting" in page
    # the SLO threshold line appears in the charts that can show it
    assert page.count('class="slo"') >= 6


def test_compare_report_has_a_before_after_section() -> None:
    page = html_of(make_compare_report())
    assert '<section id="compare">' in page and 'href="#compare"' in page
    assert '<span class="badge ok">improved</span>' in page
    assert '<span class="badge neutral">no significant change</span>' in page
    assert "<b>pending</b>" in page  # a stage that moved
    bars = re.search(r'<section id="decomposition">.*?</section>', page, flags=re.S)
    assert (
        bars is not None and ">before</text>" in bars.group(0) and ">after</text>" in bars.group(0)
    )
    assert ">incident</text>" not in bars.group(0)


def test_a_compare_section_of_another_shape_is_refused_when_read() -> None:
    doc = make_compare_report().to_dict()
    for extra in ({"compare": "nope"}, {"compare": {"slos": [1, "x", {"metric": 3}]}}):
        with pytest.raises((KeyError, TypeError, AttributeError)):
            Report.from_dict({**doc, "extra": extra})
    page = html_of(Report.from_dict({**doc, "extra": {}}))
    assert page.rstrip().endswith("</html>") and 'id="compare"' not in page


def _svg_numbers(page: str) -> list[str]:
    attrs = re.findall(r'\b(?:x|y|x1|x2|y1|y2|cx|cy|r|width|height|d)="([^"]*)"', page)
    return [a for a in attrs if re.search(r"nan|inf", a, flags=re.I)]


def test_nonfinite_values_are_not_drawn() -> None:
    page = html_of(make_nonfinite_report())
    assert _svg_numbers(page) == []
    assert "non-finite values not drawn" in page


finite_or_not = st.floats(allow_nan=True, allow_infinity=True) | st.floats(0, 10)


@settings(max_examples=25, deadline=None)
@given(values=st.lists(st.tuples(finite_or_not, finite_or_not), min_size=1, max_size=12))
def test_any_numbers_give_valid_svg(values: list[tuple[float, float]]) -> None:
    base = make_report()
    charts = replace(
        base.charts,
        cdfs={"ttft": tuple(values)},
        series={"q": tuple(values)},
        waterfall=tuple(("prefill", a, b, "s") for a, b in values),
        percentile_series=tuple(
            PercentilePoint(1_764_000_000.0 + i, 1_764_000_001.0 + i, 1, ((95.0, b),))
            for i, (_, b) in enumerate(values)
        ),
        replicas={f"r{i}": {"count": a, "ttft_p95": b} for i, (a, b) in enumerate(values)},
    )
    page = html_of(replace(base, charts=charts))
    assert _svg_numbers(page) == []


def test_empty_report_renders_a_page_without_charts() -> None:
    page = html_of(make_empty_report())
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert "No findings." in page
    assert '<svg class="chart' not in page


def test_huge_report_stays_small() -> None:
    huge = make_huge_report()
    page = html_of(huge)
    assert len(page.encode()) < 5_000_000
    assert len(page.encode()) < 1_000_000  # the bound has plenty of margin
    # the reductions are reported, not silent
    for what in ("events:", "replicas:", "waterfall:", "percentile over time:"):
        assert what in page


@pytest.mark.slow
def test_report_of_a_100k_request_capture_stays_small() -> None:
    import numpy as np

    from builders import capture_from_arrays
    from tailtriage.pipeline.analyze import analyze

    rng = np.random.default_rng(3)
    n = 100_000
    arrival = 1_700_000_000 + np.sort(rng.uniform(0, 3600, n))
    stages = {
        "ingress": rng.lognormal(np.log(0.05), 0.2, n),
        "pending": rng.exponential(0.05, n),
        "prefill": rng.lognormal(np.log(0.3), 0.4, n),
        "decode": rng.lognormal(np.log(2.0), 0.3, n),
    }
    cap = capture_from_arrays(arrival, stages, replica=[f"llm-{i % 200}" for i in range(n)])
    report = analyze(cap, "p95 ttft < 500ms")
    page = html_of(report)
    assert len(page.encode()) < 5_000_000
    assert '<section id="distributions">' in page


@settings(max_examples=40, deadline=None)
@given(text=st.text(max_size=200))
def test_any_input_text_stays_text(text: str) -> None:
    f = Finding("rollout", "pending", 0.5, text, (Evidence(text, text, text),), (text,))
    r = replace(
        make_report(),
        title=text,
        findings=(f,),
        charts=replace(
            make_report().charts,
            replicas={text or "x": {"count": 1.0, "ttft_p95": 0.1}},
            events=((1_764_000_950.0, "other", text, text),),
        ),
    )
    tags = parse(html_of(r))
    names = {t for t, _ in tags.tags}
    allowed = {
        "html",
        "head",
        "meta",
        "link",
        "title",
        "style",
        "body",
        "header",
        "div",
        "h1",
        "h2",
        "h3",
        "span",
        "nav",
        "a",
        "main",
        "section",
        "p",
        "b",
        "small",
        "svg",
        "desc",
        "rect",
        "line",
        "path",
        "circle",
        "text",
        "table",
        "thead",
        "tbody",
        "tr",
        "th",
        "td",
        "ul",
        "li",
        "code",
        "pre",
        "button",
        "footer",
        "script",
        "details",
        "summary",
        "br",
    }
    assert names <= allowed, names - allowed
    assert [t for t, _ in tags.tags].count("script") == 2


def test_real_compare_report_shows_before_and_after() -> None:
    import numpy as np

    from builders import capture_from_arrays
    from tailtriage.pipeline.compare import compare

    rng = np.random.default_rng(11)
    n = 1500

    def cap(pending: float) -> object:
        return capture_from_arrays(
            1_700_000_000 + np.sort(rng.uniform(0, 300, n)),
            {
                "ingress": rng.uniform(0.02, 0.06, n),
                "pending": rng.exponential(pending, n),
                "prefill": rng.lognormal(np.log(0.25), 0.3, n),
                "decode": rng.uniform(1, 2, n),
            },
        )

    report = compare(cap(0.3), cap(0.01), "p95 ttft < 500ms")  # type: ignore[arg-type]
    page = html_of(report)
    assert '<section id="compare">' in page
    assert '<span class="badge ok">improved</span>' in page
    text = render(report, "terminal", width=100)
    assert "Before and after" in text and "improved" in text


def test_an_slo_without_data_is_shown_as_no_data() -> None:
    base = make_report()
    nodata = replace(
        base.slos[0], observed=None, breached=False, count=0, ci_low=None, ci_high=None
    )
    page = html_of(replace(base, slos=(nodata,)))
    card = re.search(r'<div class="card nodata">.*?</div></div>', page, flags=re.S)
    assert card is not None and "no data" in card.group(0) and ">met<" not in card.group(0)


def test_summary_names_the_top_ranked_fix_not_the_lowest_latency_one() -> None:
    """A quantization predicted faster but ranked lower (accuracy risk) is not the headline."""
    import dataclasses

    from tailtriage.remediation.actions import Remediation
    from tailtriage.renderers import render

    base = make_report()
    spec = base.slos[0].spec
    key = f"{spec.metric}_p{spec.percentile:g}"
    ranked = (
        Remediation("hpa_metric", ("scaling_lag",), "scale on queue", predicted={key: 0.35}),
        Remediation("quantization", ("compute_saturation",), "fp8", predicted={key: 0.29}),
    )
    page = render(dataclasses.replace(base, remediations=ranked), "html")
    assert "Top recommended fix: <b>hpa_metric</b>" in page


def test_over_time_axis_is_the_capture_window_and_older_pod_events_are_clipped() -> None:
    """Pod events from hours before the capture must not stretch the time axis: the requests'
    window fills the chart and the old events are a counted marker at the left edge."""
    import numpy as np

    from builders import capture_from_arrays, make_events

    rng = np.random.default_rng(11)
    n = 600
    t0 = 1_700_000_000.0
    arrival = t0 + np.sort(rng.uniform(0, 600, n))
    stages = {"prefill": rng.lognormal(np.log(0.3), 0.4, n), "decode": np.full(n, 1.0)}
    old = [(t0 - 7200.0 + 60 * i, "pod_created") for i in range(3)]
    inside = [(t0 + 300.0, "pod_created")]
    cap = capture_from_arrays(arrival, stages).replace(events=make_events([*old, *inside]))

    from tailtriage.pipeline.analyze import analyze

    page = html_of(analyze(cap, "p95 ttft < 500ms"))
    timeline = re.search(r'<section id="timeline">.*?</section>', page, re.S)
    assert timeline is not None
    svgs = re.findall(r"<svg .*?</svg>", timeline.group(0), re.S)
    events_svg = next(s for s in svgs if "Kubernetes events" in s)
    dots = [float(x) for x in re.findall(r'<circle cx="([\d.]+)"[^>]*class="ev ', events_svg)]
    assert len(dots) == 1  # only the event inside the window is a dot...
    # ...and it sits mid-axis (t0 + 300 s of a 600 s capture), not squeezed to the right edge
    assert 0.35 < (dots[0] - 140.0) / (960.0 - 20.0 - 140.0) < 0.65
    mark = re.search(r'<text [^>]*class="clipmark"[^>]*data-tip="([^"]*)"[^>]*>([^<]*)</text>',
                     events_svg)  # fmt: skip
    assert mark is not None
    assert mark.group(2) == "◀ 3" and "3 pod_created events earlier" in mark.group(1)
