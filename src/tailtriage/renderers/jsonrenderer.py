"""The JSON report (design 3.5): ``Report.to_dict()`` serialised.

Named ``jsonrenderer`` so it cannot shadow the standard library's ``json`` module."""

from __future__ import annotations

import math
from typing import Any

import orjson

from tailtriage.renderers.base import register
from tailtriage.report import Report


@register("json")
class JSONRenderer:
    """Schema-versioned JSON, indented, keys in the report's order.

    :param indent: indent by two spaces (False gives one compact line).
    """

    name = "json"
    output_file_extension = "json"

    def __init__(self, indent: bool = True):
        self.indent = indent

    def render(self, report: Report) -> str:
        return dumps(report.to_dict(), indent=self.indent)


def dumps(doc: Any, indent: bool = True) -> str:
    """JSON text of ``doc``; NaN/inf become null (JSON has no such numbers) and numpy values
    and other objects in free-form sections degrade to plain JSON values."""
    option = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS
    if indent:
        option |= orjson.OPT_INDENT_2
    return orjson.dumps(_finite(doc), default=_fallback, option=option).decode("utf-8") + "\n"


def _finite(v: Any) -> Any:
    # orjson already writes NaN as null; this keeps +/-inf from becoming null silently too
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {k: _finite(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_finite(x) for x in v]
    return v


def _fallback(v: Any) -> Any:
    if isinstance(v, set | frozenset):
        return sorted(v, key=str)
    return str(v)
