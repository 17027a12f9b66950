"""What every ``docvec`` command shares: the app, the consoles, one-line errors, settings, options."""

from __future__ import annotations

import dataclasses
import logging
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from pydantic import BaseModel, ValidationError
from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.measure import Measurement
from rich.table import Column, Table
from rich.text import Text

from .._config import Settings
from .._contract import IndexLike
from .._errors import ConfigError, DocvecError, InputError, NotFoundError
from .._model._profiles import PROFILES, RERANKER_PROFILES
from .._text._snippet import Snippet

__all__ = [
    "CollectionOption",
    "JsonFlag",
    "ModelOption",
    "app",
    "checked",
    "err",
    "errors",
    "marked",
    "models_app",
    "open_index",
    "out",
    "program",
    "read_index",
    "settings",
    "show_table",
]

M = TypeVar("M", bound=BaseModel)


def _summary() -> str:
    # the families from the profiles, as `docvec collections list` names them: none left out, none stale
    families = [p.name for p in PROFILES]
    rerankers = [p.name for p in RERANKER_PROFILES]
    return (
        f"docvec: visual document retrieval through llama.cpp, with vision-language embedding models (the "
        f"families {', '.join(families[:-1])} and {families[-1]}) and a reranker ({', '.join(rerankers)}); "
        "`docvec models list` names them."
    )


app = typer.Typer(help=_summary(), no_args_is_help=True, pretty_exceptions_enable=False)
models_app = typer.Typer(help="Build, convert and download models.", no_args_is_help=True)
app.add_typer(models_app, name="models")

out = Console()
err = Console(stderr=True)

# Options several commands share, defined once.
ModelOption = Annotated[
    str | None, typer.Option("--model", "-m", help="Model folder, LM,MMPROJ pair or registry name.")
]
CollectionOption = Annotated[str | None, typer.Option(help="Collection (default: DOCVEC_COLLECTION).")]
JsonFlag = Annotated[
    bool, typer.Option("--json", help="Print JSON instead of a table (its schema: in the description above).")
]


def _version(value: bool) -> None:
    if value:
        from .. import __version__

        out.print(f"docvec {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """The app's options; its help is the app's (``_summary``)."""


@contextmanager
def errors() -> Iterator[None]:
    """Show docvec's errors as one clear line and exit 2, instead of a traceback."""
    try:
        yield
    except DocvecError as e:
        err.print(f"[bold red]error:[/] {e}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None


class _Stderr(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` is when a record comes, not when logging was set up: a caller
    that swaps stderr (a test runner, a notebook) and closes its stream gets no 'Logging error'."""

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass


def open_index(s: Settings, *, create: bool = True, reads_only: bool = False) -> IndexLike:
    """The index the command works on: its own, or the running server's when ``docvec serve`` holds the
    embedded store, or, for a command that only reads (``reads_only``), the command's that holds it (said
    in one line on stderr, as is waiting for another command to finish)."""
    from .._connect import connect

    def say(message: str) -> None:
        err.print(message, style="dim", highlight=False, soft_wrap=True)

    return connect(s, create=create, notify=say, reads_only=reads_only)


def read_index(s: Settings, *, removes: bool = False) -> IndexLike:
    """The index for a command that only reads, or that only removes what is there (``removes``: it waits
    for a command that holds the store, where a reader is answered by it): never made by it. A data folder
    that does not exist is an error naming it, not an empty index (a mistyped DOCVEC_DATA_DIR)."""
    if not s.qdrant_url and not s.data_dir.is_dir():
        raise NotFoundError(
            f"there is no docvec data folder at {s.data_dir} (DOCVEC_DATA_DIR): nothing is indexed there; "
            "`docvec ingest PATH` makes it"
        )
    return open_index(s, create=False, reads_only=not removes)


def settings(*, log_level: str | None = None, **overrides: Any) -> Settings:
    """The settings from the environment with the command's options on top; logging set up to match."""
    with errors():
        try:
            s = Settings(**{k: v for k, v in overrides.items() if v is not None})
        except ValidationError as e:
            # the setting and the rule, never the value: a refused value may be a key
            problems = [
                (f"DOCVEC_{'__'.join(str(p) for p in err['loc']).upper()}", err["msg"]) for err in e.errors()
            ]
            raise ConfigError(
                "; ".join(f"{name}: {msg.removeprefix('Value error, ')}" for name, msg in problems)
            ) from None
        except ValueError as e:
            raise ConfigError(str(e)) from None
    level = (log_level or s.log_level).upper()
    logging.basicConfig(
        level=level, format="%(levelname)s %(name)s: %(message)s", handlers=[_Stderr()], force=True
    )
    # libraries that print their own copy of every warning: theirs is enough
    for name in ("huggingface_hub",):
        logging.getLogger(name).propagate = False
    if level != "DEBUG":
        # llama.cpp's own notes (its warnings, about features embeddings do not use) are for debugging
        logging.getLogger("docvec.llama").setLevel(logging.WARNING)
    return s


def checked(kind: type[M], /, **values: Any) -> M:
    """A ``kind`` built from a command's options (those left unset left out); a value it refuses is an
    :class:`~docvec.InputError` naming the option."""
    try:
        return kind(**{k: v for k, v in values.items() if v is not None})
    except ValidationError as e:
        first = e.errors()[0]
        option = "--" + "-".join(str(p) for p in first.get("loc", ())).replace("_", "-")
        raise InputError(f"{option}: {first.get('msg', 'invalid')}") from None


def program() -> str:
    """How to run ``docvec`` again, exactly: the command next to this Python when there is one."""
    exe = Path(sys.executable).with_name("docvec")
    return str(exe) if exe.is_file() else "docvec"


def marked(snippet: Snippet) -> Text:
    """A snippet for the terminal: the query's terms in bold (plain text in a pipe)."""
    shown = Text(snippet.text)
    for start, end in snippet.marks:
        shown.stylize("bold", start, end)
    return shown


def show_table(
    columns: Sequence[Column],
    rows: Sequence[Sequence[str | Text]],
    *,
    console: Console | None = None,
    optional: Sequence[str] = (),
    most_lines: int | None = None,
) -> list[str]:
    """Print ``rows`` under ``columns`` at the console's width (a pipe's is 80, or COLUMNS) without ever
    breaking a word: names and ids stay whole, to be read and copied. The columns whose headers
    ``optional`` names are left out, in that order, until the table fits (and, with ``most_lines``, until
    its rows take no more lines than that each, on average); rows that fit in no table are printed one
    record each (``header: value``, every column). The headers left out, for the caller to say where to
    find them.

    Cells are plain text (a file name with brackets in it is no markup)."""
    console = console or out
    cells = [[c if isinstance(c, Text) else Text(c) for c in row] for row in rows]
    shown = list(range(len(columns)))
    for header in (None, *optional):
        if header is not None:
            shown = [i for i in shown if str(columns[i].header) != header]
        table = Table(
            *(dataclasses.replace(columns[i], _cells=[]) for i in shown),
            box=box.HEAVY_HEAD,
            show_edge=False,  # no frame: its four columns go to the cells
            pad_edge=False,
        )
        for row in cells:
            table.add_row(*(row[i] for i in shown))
        if not _fit(table, console):
            continue
        last = header == (optional[-1] if optional else None)
        # the header counts as a row: it may wrap too
        if most_lines and not last and len(console.render_lines(table)) > most_lines * (len(cells) + 1):
            continue
        console.print(table)
        return [str(columns[i].header) for i in range(len(columns)) if i not in shown]
    _show_records([str(c.header) for c in columns], cells, console)
    return []


def _fit(table: Table, console: Console) -> bool:
    """Give each column of ``table`` a width such that it fits the console and no cell breaks a word (a
    column is at least as wide as its longest word, a ``no_wrap`` one as its longest line), the table as
    few lines tall as that allows; False when the console is too narrow for that. (Rich's own squeezing
    narrows the widest columns first, words or not.)"""
    wide = console.options.update_width(1 << 16)
    ranges: list[tuple[int, int]] = []
    for column in table.columns:
        sizes = [Measurement.get(console, wide, c) for c in (column.header, *column.cells)]
        longest = max(m.maximum for m in sizes)
        ranges.append((longest if column.no_wrap else max(m.minimum for m in sizes), longest))
    # the borders and padding: what the table measures beyond its columns, each one wide
    for column in table.columns:
        column.width = 1
    room = console.width - (Measurement.get(console, wide, table).maximum - len(table.columns))
    for column in table.columns:
        column.width = None
    if sum(most for _, most in ranges) <= room:
        return True  # every cell on one line: Rich lays it out as it is
    if sum(least for least, _ in ranges) > room:
        return False
    texts = [
        [c if isinstance(c, Text) else Text(str(c)) for c in (column.header, *column.cells)]
        for column in table.columns
    ]
    widths = _widths(texts, ranges, room)
    for column, width in zip(table.columns, widths, strict=True):
        column.width = width
    return True


def _widths(texts: list[list[Text]], ranges: list[tuple[int, int]], room: int) -> list[int]:
    """Column widths between each one's least and most, ``room`` in all at most: the space beyond the
    least goes, a few characters at a time, where it saves the most lines per character given (the
    table's, then its cells')."""
    # lines[c][w][r]: the lines row r takes in column c at width w
    lines = [
        {
            w: [sum(len(_fill(ln, w)) for ln in t.plain.split("\n")) for t in col]
            for w in range(least, most + 1)
        }
        for col, (least, most) in zip(texts, ranges, strict=True)
    ]
    widths = [least for least, _ in ranges]

    def height(ws: list[int]) -> int:
        # the table's lines first; then its cells', so that a cell wraps less even where its row does not
        rows: list[tuple[int, ...]] = list(zip(*(lines[c][w] for c, w in enumerate(ws)), strict=True))
        return sum(max(r) for r in rows) * 10_000 + sum(sum(r) for r in rows)

    spare = room - sum(widths)
    tall = height(widths)
    while spare > 0:
        best: tuple[float, int, int, int] | None = None
        for c, (_, most) in enumerate(ranges):
            for w in range(widths[c] + 1, min(widths[c] + spare, most) + 1):
                if lines[c][w] == lines[c][w - 1]:
                    continue  # no cell of the column wraps less at this width than one narrower
                h = height([*widths[:c], w, *widths[c + 1 :]])
                if h < tall and (best is None or (tall - h) / (w - widths[c]) > best[0]):
                    best = ((tall - h) / (w - widths[c]), c, w - widths[c], h)
        if best is None:
            break
        _, c, more, tall = best
        widths[c] += more
        spare -= more
    # what saves no line is shared in proportion to what each column would still take
    wants = [most - w for w, (_, most) in zip(widths, ranges, strict=True)]
    while spare > 0 and any(wants):
        gives = [min(w, spare * w // sum(wants)) for w in wants]
        if not any(gives):
            gives[wants.index(max(wants))] = 1
        widths = [w + g for w, g in zip(widths, gives, strict=True)]
        wants = [w - g for w, g in zip(wants, gives, strict=True)]
        spare -= sum(gives)
    return widths


def _show_records(headers: list[str], rows: list[list[Text]], console: Console) -> None:
    """Each row as a record: its first cell, then ``header: value`` for each other one that has a value,
    filled into lines of the console's width and broken between words only."""
    width = console.width
    for row in rows:
        # a cell of several lines (a model's scores) is one value of several parts
        first, *rest = (
            "; ".join(" ".join(ln.split()) for ln in c.plain.splitlines() if ln.strip()) for c in row
        )
        fields = [first, *(f"{h}: {v}" for h, v in zip(headers[1:], rest, strict=True) if v)]
        lines = [""]
        for field in fields:
            for word_group in _fill(field, width - 2):
                line = lines[-1]
                if line and cell_len(line) + 2 + cell_len(word_group) > width:
                    lines.append("  " + word_group)
                else:
                    lines[-1] = f"{line}  {word_group}" if line else word_group
        for line in lines:
            console.print(line, highlight=False, soft_wrap=True, markup=False)


def _fill(text: str, width: int) -> list[str]:
    """``text`` in pieces no wider than ``width``, broken between words only (a longer word stays whole)."""
    pieces = [""]
    for word in text.split(" "):
        if pieces[-1] and cell_len(pieces[-1]) + 1 + cell_len(word) > width:
            pieces.append(word)
        else:
            pieces[-1] = f"{pieces[-1]} {word}" if pieces[-1] else word
    return pieces
