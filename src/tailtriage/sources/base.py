"""The Source plug-in protocol and its registry.

A source turns one input file into a Capture.  Formats are detected by content (``sniff``
gets the first bytes), never by file name.  Trace sources fill only ``spans``; requests and
stages are derived once, after every file of a bundle is read, because one trace's spans may
be spread over several files (gateway spans in one, engine spans in another)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from tailtriage.model import Capture

#: bytes handed to ``sniff``
SNIFF_BYTES = 64 * 1024


@dataclass(frozen=True)
class ReadOptions:
    """Options common to every source."""

    max_attribute_bytes: int = 64 * 1024  # longer attribute values are truncated (counted)
    #: called with the number of bytes of the file just consumed (for progress bars)
    progress: Callable[[int], None] | None = None


@runtime_checkable
class Source(Protocol):
    """Reads one input format into a Capture."""

    name: str  # registry name, e.g. "otlp_json"

    def sniff(self, head: bytes, path: Path) -> bool:
        """True when the first bytes of ``path`` look like this format."""
        ...

    def read(self, path: Path, options: ReadOptions) -> Capture:
        """Parse ``path``; raise ``ParseError`` (with file and position) on broken content."""
        ...


_REGISTRY: dict[str, Source] = {}


def register(source: Source) -> Source:
    """Add a source to the registry (later registrations with the same name replace it)."""
    _REGISTRY[source.name] = source
    return source


def registered() -> Iterator[Source]:
    """Sources in registration order (most specific first)."""
    _load_builtins()
    return iter(list(_REGISTRY.values()))


def get(name: str) -> Source:
    _load_builtins()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown source {name!r}; known: {', '.join(_REGISTRY)}") from None


def detect(path: Path) -> Source | None:
    """The first registered source whose ``sniff`` accepts the file's content, else None."""
    with open(path, "rb") as fh:
        head = fh.read(SNIFF_BYTES)
    for source in registered():
        if source.sniff(head, path):
            return source
    return None


_BUILTINS_LOADED = False


def _load_builtins() -> None:
    """Import the built-in source modules once; each registers itself at import."""
    global _BUILTINS_LOADED
    if _BUILTINS_LOADED:
        return
    _BUILTINS_LOADED = True
    import importlib

    for mod in BUILTIN_MODULES:
        try:
            importlib.import_module(f"tailtriage.sources.{mod}")
        except ModuleNotFoundError as exc:
            # a built-in module that does not exist yet must not break the others
            if exc.name != f"tailtriage.sources.{mod}":
                raise


#: built-in source modules, most specific format first
BUILTIN_MODULES: tuple[str, ...] = (
    "capture_file",
    "otlp_proto",
    "otlp_json",
    "otlp_metrics",
    "jaeger_domain",
    "jaeger",
    "zipkin",
    "prometheus_api",
    "exposition",
    "kubernetes",
    "vllm_run",
)
