"""Help pages in the command line's own words, not Python's: Typer 0.29 shows each parameter's Python type
(``--json <bool>``, ``--tag <list[str]>``) and wraps a required argument in braces (``{query}``). Here
options show click's kind of metavars (``INTEGER``, ``TEXT``, ``[auto|dense|...]``; nothing for a flag)
or the one a command names, and arguments their name in capitals (``QUERY``), as click and most tools
write them.
Typer is pinned (pyproject.toml); tests/test_cli.py reads the pages back."""

from __future__ import annotations

from typing import Any, get_args, get_origin

from typer.core import TyperArgument, TyperOption

_NAMES = {int: "INTEGER", float: "FLOAT", bool: "BOOLEAN"}


def _option_type(self: TyperOption, ctx: Any) -> str | None:
    if self.metavar is not None:
        return self.metavar
    if self.is_flag or self.count:
        return None
    desc = self.type_descriptor
    if desc.is_choice:
        return "[" + "|".join(str(getattr(c, "value", c)) for c in desc.choices or ()) + "]"
    if desc.is_path:
        return "PATH"
    annotation: Any = desc.annotation
    if get_origin(annotation) is list:
        annotation = get_args(annotation)[0]
    return _NAMES.get(annotation, "TEXT")


def _argument_type(self: TyperArgument, ctx: Any) -> str | None:
    return None  # the name says it (QUERY, PATHS...), the help text the rest


def _argument_name(self: TyperArgument) -> str:
    name = (self.metavar or self.name or "").upper()
    name = name if self.required else f"[{name}]"
    return name + ("..." if self.nargs != 1 else "")


def _argument_column(self: TyperArgument) -> str:
    return (self.metavar or self.name or "").upper() + ("..." if self.nargs != 1 else "")


def install() -> None:
    """Use these for every docvec command (idempotent)."""
    TyperOption.display_type_rich = _option_type  # type: ignore[method-assign]
    TyperArgument.display_type_rich = _argument_type  # type: ignore[method-assign,assignment]
    TyperArgument._usage_display_name = _argument_name  # type: ignore[method-assign]
    TyperArgument._rich_display_name = _argument_column  # type: ignore[method-assign]
