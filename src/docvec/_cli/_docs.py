"""Pages of ``docs/`` written from docvec's own models: ``docs/settings.md`` from the settings model
(:class:`docvec._config.Settings`), every setting with its variable, type, default and description. A test
keeps the page in sync (``make docs`` writes it again).

python -m docvec._cli._docs docs/
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from types import NoneType, UnionType
from typing import Any, Literal, Union, get_args, get_origin

import annotated_types
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined
from pydantic_settings import BaseSettings

from .._config import Settings

__all__ = ["DOCS", "render_docs", "render_settings", "write_docs"]

_INTRO = """\
# Settings

<!-- Generated from docvec's settings model (src/docvec/_config.py) by `make docs`; edit the descriptions
there, not here. -->

docvec reads its settings from `DOCVEC_*` environment variables, then from a `.env` file in the working
folder; the library takes them as arguments too (`docvec.Settings(...)`, or keyword arguments of
`docvec.Index.open`), which come first. Nested settings take two underscores: `DOCVEC_EMBED__DIM=512`,
`DOCVEC_RENDER__WORKERS=2`. A value the settings refuse (out of its bounds, `MIN_PIXELS` above
`MAX_PIXELS`) is an error that names it. The same list as a JSON Schema: `schemas/settings.schema.json`.

What the model and embedder settings leave unset comes from the collection's live version: see
[Settings follow the collection](operations.md#settings-follow-the-collection).
"""

#: section title and introduction of each group of settings ("": the top level, else the nested field)
_SECTIONS = {
    "": ("docvec", ""),
    "embed": (
        "The embedder",
        "How the model runs. `dim`, `min_pixels` and `max_pixels` override the model's own values, and are "
        "checked against the model when it opens.",
    ),
    "render": ("Rendering", "How documents become page images (in worker processes)."),
}


def _home(value: object) -> str:
    """``value`` as text, the home folder written ``~`` (a default that depends on the machine)."""
    text, home = str(value), str(Path.home())
    return "~" + text[len(home) :] if text == home or text.startswith(home + "/") else text


def _type(annotation: Any) -> str:
    """A field's type in words: ``integer``, ``text``, ``one of `a`, `b```, ..."""
    if get_origin(annotation) in (Union, UnionType):
        kinds = [a for a in get_args(annotation) if a is not NoneType]
        return " or ".join(_type(a) for a in kinds)
    if get_origin(annotation) is Literal:
        return "one of " + ", ".join(f"`{a}`" for a in get_args(annotation))
    names = {bool: "true or false", int: "integer", float: "number", str: "text", Path: "path"}
    return names.get(annotation, getattr(annotation, "__name__", str(annotation)))


def _bounds(info: FieldInfo) -> str:
    """A field's numeric bounds, e.g. ``1 to 64`` or ``>= 0``."""
    low = high = None
    for m in info.metadata:
        if isinstance(m, annotated_types.Ge):
            low = f">= {m.ge}"
        elif isinstance(m, annotated_types.Gt):
            low = f"> {m.gt}"
        elif isinstance(m, annotated_types.Le):
            high = f"<= {m.le}"
        elif isinstance(m, annotated_types.Lt):
            high = f"< {m.lt}"
    if low and high and low.startswith(">=") and high.startswith("<="):
        return f"{low[3:]} to {high[3:]}"
    return ", ".join(b for b in (low, high) if b)


def _value(value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, float):
        return f"`{value:g}`"
    return f"`{_home(value)}`"


def _default(info: FieldInfo) -> str:
    if info.default_factory is not None:
        return _value(info.default_factory())  # type: ignore[call-arg]
    return "unset" if info.default is PydanticUndefined else _value(info.default)


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _rows(fields: dict[str, FieldInfo], prefix: str) -> list[str]:
    rows = ["| variable | type | default | description |", "| --- | --- | --- | --- |"]
    for name, info in fields.items():
        kind = _type(info.annotation)
        bounds = _bounds(info)
        if bounds:
            kind += f", {bounds}"
        cells = (f"`{prefix}{name.upper()}`", kind, _default(info), info.description or "")
        rows.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return rows


def render_settings() -> str:
    """The text of ``docs/settings.md``: every field of :class:`Settings` and of its nested settings, by
    the environment variable that sets it."""
    config = Settings.model_config
    prefix = str(config.get("env_prefix", "")).upper()
    delimiter = str(config.get("env_nested_delimiter") or "__")
    groups: dict[str, tuple[str, dict[str, FieldInfo]]] = {"": (prefix, {})}
    for name, info in Settings.model_fields.items():
        kind = info.annotation
        if isinstance(kind, type) and issubclass(kind, BaseSettings):
            groups[name] = (f"{prefix}{name.upper()}{delimiter}", dict(kind.model_fields))
        else:
            groups[""][1][name] = info
    parts = [_INTRO]
    for group, (variables, fields) in groups.items():
        title, intro = _SECTIONS.get(group, (group, ""))
        parts += [f"## {title} (`{variables}*`)", ""]
        parts += [intro, ""] if intro else []
        parts += [*_rows(fields, variables), ""]
    return "\n".join(parts)


#: file name under docs/ -> the function that renders it
DOCS: dict[str, Callable[[], str]] = {"settings.md": render_settings}


def render_docs() -> dict[str, str]:
    """Each generated page's expected text."""
    return {name: render() for name, render in DOCS.items()}


def write_docs(folder: Path) -> list[Path]:
    """Write every generated page into ``folder``; returns the files written."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in render_docs().items():
        path = folder / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


if __name__ == "__main__":  # pragma: no cover
    for p in write_docs(Path(sys.argv[1] if len(sys.argv) > 1 else "docs")):
        print(p)
