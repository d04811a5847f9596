"""The self-contained HTML report: one offline file, charts as inline SVG.

No CDN, no chart library: the charts are drawn in Python (``_charts``), the stylesheet and a
small script (tooltips, tabs, copy buttons) are inlined from ``html_resources/``.  Hostile
input stays inert twice over: every value is HTML-escaped, and a Content-Security-Policy
lets only this page's own script and stylesheet run (by hash), with no network at all."""

from __future__ import annotations

import base64
import hashlib
from functools import cache
from importlib import resources

import orjson

from tailtriage.renderers import _html_sections as sec
from tailtriage.renderers._aggregate import thin_report
from tailtriage.renderers._format import fmt_window
from tailtriage.renderers._html_findings import findings, remediations
from tailtriage.renderers._html_parts import View, nav_links
from tailtriage.renderers._rollout import html_section
from tailtriage.renderers._svg import esc
from tailtriage.renderers.base import register
from tailtriage.report import Report

_NAV = (
    ("summary", "Summary"),
    ("compare", "Before / after"),
    ("decomposition", "Decomposition"),
    ("timeline", "Over time"),
    ("rollout", "Rollout"),
    ("findings", "Findings"),
    ("remediations", "Remediations"),
    ("request", "Tail request"),
    ("distributions", "Distributions"),
    ("replicas", "Replicas"),
    ("numbers", "Numbers"),
    ("quality", "Data quality"),
    ("extra", "More"),
)


@register("html")
class HTMLRenderer:
    """One offline HTML file.

    :param embed_json: embed the (aggregated) JSON report, for the page's download button.
    """

    name = "html"
    output_file_extension = "html"

    def __init__(self, embed_json: bool = True):
        self.embed_json = embed_json

    def render(self, report: Report) -> str:
        thinned = thin_report(report)
        view = View.of(thinned.report, thinned.notes)
        parts = {
            "summary": sec.summary(view),
            "compare": sec.comparison(view),
            "decomposition": sec.decomposition(view),
            "timeline": sec.over_time(view),
            "rollout": html_section(view.report),
            "findings": findings(view),
            "remediations": remediations(view),
            "request": sec.tail_request(view),
            "distributions": sec.distributions(view),
            "replicas": sec.replicas(view),
            "numbers": sec.numbers(view),
            "quality": sec.quality(view),
            "extra": sec.extra(view),
        }
        nav = nav_links([(sid, title) for sid, title in _NAV if parts[sid]])
        body = _header(thinned.report) + nav + "<main>" + "".join(parts.values()) + "</main>"
        data = embed_json(thinned.report.to_dict()) if self.embed_json else ""
        return _page(thinned.report.title, body, data)


def embed_json(doc: object) -> str:
    """JSON safe inside ``<script type="application/json">``: ``<``, ``>`` and ``&`` become
    ``\\u003c``-style escapes (so neither ``</script>`` nor ``<!--`` can appear) and the JS
    line separators are escaped too.  ``JSON.parse`` reads it back unchanged."""
    raw = orjson.dumps(
        doc, default=str, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY
    ).decode()
    for ch, rep in (
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("&", "\\u0026"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        raw = raw.replace(ch, rep)
    return raw


def _header(r: Report) -> str:
    kind = {"triage": "triage report", "analyze": "analysis", "compare": "comparison"}.get(
        r.kind, r.kind
    )
    meta = [f"{r.data_quality.requests:,} requests", f"{r.data_quality.spans:,} spans"]
    if r.windows is not None:
        meta.append(f"incident {fmt_window(r.windows.incident)}")
    spans = "".join(f"<span>{esc(m)}</span>" for m in meta)
    return (
        f'<header class="top"><div class="brand">tailtriage · {esc(kind)}</div>'
        f'<h1>{esc(r.title)}</h1><div class="meta">{spans}</div></header>'
    )


@cache
def _resource(name: str) -> str:
    return (
        resources.files("tailtriage.renderers")
        .joinpath("html_resources", name)
        .read_text(encoding="utf-8")
    )


def _sha256(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode()


def _page(title: str, body: str, data: str) -> str:
    css, js = _resource("report.css"), _resource("report.js")
    # only this stylesheet and this script may run; nothing may be fetched (img-src data: is
    # for the empty favicon, which stops the browser from asking for /favicon.ico)
    csp = (
        f"default-src 'none'; style-src '{_sha256(css)}'; script-src '{_sha256(js)}'; "
        "img-src data:; base-uri 'none'; form-action 'none'"
    )
    data_tag = f'<script type="application/json" id="report-data">{data}</script>' if data else ""
    download = '<button type="button" id="download-json">Download JSON</button>' if data else ""
    version = _version()
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{esc(csp)}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="generator" content="tailtriage">'
        '<link rel="icon" href="data:,">'
        f"<title>{esc(title)}</title><style>{css}</style></head>"
        f"<body>{body}"
        f"<footer>tailtriage {esc(version)} · report schema v1 · durations are percentiles, never averages · {download}</footer>"
        '<div id="tt" role="tooltip" hidden></div>'
        f"{data_tag}<script>{js}</script></body></html>\n"
    )


@cache
def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("tailtriage")
    except PackageNotFoundError:
        return "dev"
