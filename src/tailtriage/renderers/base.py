"""The Renderer plug-in protocol and its name registry.

A renderer turns a :class:`~tailtriage.report.Report` into text (terminal, JSON, HTML).
Renderers are registered by a short lowercase name; any other renderer can be named by its
import path, ``package.module:ClassName`` (pyinstrument's escape hatch), so a third-party
renderer needs no plug-in machinery."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, TypeVar, runtime_checkable

from tailtriage import outputs
from tailtriage.errors import ConfigError
from tailtriage.report import Report


@runtime_checkable
class Renderer(Protocol):
    """Turns a Report into text.  Constructed with keyword options, then ``render`` is pure."""

    name: str
    #: extension (without dot) of a file this renderer writes, e.g. ``"html"``
    output_file_extension: str

    def render(self, report: Report) -> str:
        """The whole output as one string."""
        ...


#: a renderer class, or any callable taking keyword options and returning a Renderer
RendererFactory = Callable[..., Renderer]
_F = TypeVar("_F", bound=RendererFactory)

_REGISTRY: dict[str, RendererFactory] = {}

#: built-in renderer modules; each registers itself when imported
BUILTIN_MODULES: tuple[str, ...] = ("terminal", "jsonrenderer", "html")


def register(name: str) -> Callable[[_F], _F]:
    """Class decorator: ``@register("html")`` makes the renderer available by that name."""

    def deco(factory: _F) -> _F:
        _REGISTRY[name] = factory
        return factory

    return deco


def registered_names() -> list[str]:
    """Names of the registered renderers, sorted (feeds CLI choices and error messages)."""
    _load_builtins()
    return sorted(_REGISTRY)


def get(name: str) -> RendererFactory:
    """The renderer factory for a registered ``name`` or an import path ``pkg.mod:Class``."""
    _load_builtins()
    if name in _REGISTRY:
        return _REGISTRY[name]
    if ":" in name:
        return _from_import_path(name)
    known = ", ".join(registered_names())
    raise ConfigError(
        f"unknown renderer {name!r}; known: {known} (or an import path pkg.mod:Class)"
    )


def _from_import_path(path: str) -> RendererFactory:
    module_name, _, attr = path.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"cannot import renderer {path!r}: {exc}") from None
    if not callable(obj):
        raise ConfigError(f"renderer {path!r} is not a class or factory")
    factory: RendererFactory = obj
    return factory


def make(fmt: str, **options: Any) -> Renderer:
    """An instance of the renderer ``fmt`` built with ``options``; bad options are a ConfigError."""
    factory = get(fmt)
    try:
        renderer = factory(**options)
    except TypeError as exc:
        raise ConfigError(f"renderer {fmt!r} does not accept these options: {exc}") from None
    if not isinstance(renderer, Renderer):
        raise ConfigError(f"renderer {fmt!r} does not follow the Renderer protocol")
    return renderer


def render(report: Report, fmt: str = "terminal", **options: Any) -> str:
    """Render ``report`` with the renderer named ``fmt`` (a registered name or import path)."""
    return make(fmt, **options).render(report)


def write_report(report: Report, path: str | Path, fmt: str | None = None, **options: Any) -> Path:
    """Render ``report`` into the file ``path`` (UTF-8).  Without ``fmt`` the format comes from
    the file's extension (``.html``/``.htm`` -> html, ``.json`` -> json, else terminal)."""
    p = Path(path)
    text = render(report, fmt or format_for_path(p), **options)
    # atomic for a regular file (a reader never sees half a report), into a FIFO or device
    return outputs.write_text(p, text)


def format_for_path(path: Path) -> str:
    """Guess the renderer from a file name's extension."""
    suffix = path.suffix.lower().lstrip(".")
    return {"html": "html", "htm": "html", "json": "json"}.get(suffix, "terminal")


_BUILTINS_LOADED = False


def _load_builtins() -> None:
    global _BUILTINS_LOADED
    if _BUILTINS_LOADED:
        return
    _BUILTINS_LOADED = True
    for mod in BUILTIN_MODULES:
        importlib.import_module(f"tailtriage.renderers.{mod}")
