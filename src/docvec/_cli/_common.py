"""What every ``docvec`` command shares: the app, the consoles, one-line errors, settings, options."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from pydantic import BaseModel, ValidationError
from rich.console import Console
from rich.text import Text

from .._config import Settings
from .._contract import IndexLike
from .._errors import ConfigError, DocvecError, InputError, NotFoundError
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
]

M = TypeVar("M", bound=BaseModel)

app = typer.Typer(
    help="docvec: visual document retrieval with vision-language embedding models through llama.cpp.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
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
    """docvec: visual document retrieval with vision-language embedding models through llama.cpp."""


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


def open_index(s: Settings, *, create: bool = True) -> IndexLike:
    """The index the command works on: its own, or the running server's when ``docvec serve`` holds the
    embedded store (said in one line on stderr, as is waiting for another command to finish)."""
    from .._connect import connect

    def say(message: str) -> None:
        err.print(message, style="dim", highlight=False, soft_wrap=True)

    return connect(s, create=create, notify=say)


def read_index(s: Settings) -> IndexLike:
    """The index for a command that only reads (or removes what is there): never made by it. A data folder
    that does not exist is an error naming it, not an empty index (a mistyped DOCVEC_DATA_DIR)."""
    if not s.qdrant_url and not s.data_dir.is_dir():
        raise NotFoundError(
            f"there is no docvec data folder at {s.data_dir} (DOCVEC_DATA_DIR): nothing is indexed there; "
            "`docvec ingest PATH` makes it"
        )
    return open_index(s, create=False)


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
