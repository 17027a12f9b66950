"""The commands over a collection's versions: reindex, collections list and drop, gc."""

from __future__ import annotations

import json
import shlex
import sys
from typing import Annotated

import typer
from rich.table import Column

from .._records import ReindexReport, ReindexSpec, counted
from ._common import (
    CollectionOption,
    JsonFlag,
    app,
    checked,
    err,
    errors,
    open_index,
    out,
    read_index,
    settings,
    show_table,
)
from ._progress import IngestDisplay
from ._sharing import answering_reads

__all__: list[str] = []  # commands register themselves on the app

collections_app = typer.Typer(help="The versions behind a collection.", no_args_is_help=True)
app.add_typer(collections_app, name="collections")


def _help(field: str) -> str:
    # one description of each reindex option: the spec's (docvec.ReindexSpec)
    return str(ReindexSpec.model_fields[field].description)


_THEIRS = " (default: the collection's)"


@app.command()
def reindex(
    model: Annotated[str | None, typer.Option("--model", "-m", help=_help("model") + _THEIRS)] = None,
    dim: Annotated[int | None, typer.Option(help=_help("dim") + _THEIRS)] = None,
    max_pixels: Annotated[int | None, typer.Option(help=_help("max_pixels") + _THEIRS)] = None,
    multivector: Annotated[
        bool | None,
        typer.Option(
            "--multivector/--single-vector", help=_help("multivector") + _THEIRS, show_default=False
        ),
    ] = None,
    token_pool: Annotated[int | None, typer.Option(help=_help("token_pool") + _THEIRS)] = None,
    text: Annotated[
        bool | None,
        typer.Option(
            "--text/--no-text",
            help=_help("text") + _THEIRS + "; adding text to a collection embeds no page again",
            show_default=False,
        ),
    ] = None,
    drop_old: Annotated[bool, typer.Option("--drop-old", help=_help("drop_old"))] = False,
    allow_loss: Annotated[bool, typer.Option("--allow-loss", help=_help("allow_loss"))] = False,
    collection: CollectionOption = None,
    progress_every: Annotated[
        float, typer.Option(help="Seconds between progress lines when not on a terminal (cron, CI).")
    ] = 30.0,
    as_json: JsonFlag = False,
) -> None:
    """Rebuild a collection with another model, vector size, page budget or text, from what the index holds
    (stored page images; source files only when pages must be rendered again), and switch to it when it is
    complete; searches read the old version until then, from other shells too (this command answers them
    while it runs). With --text, pages indexed while OCR could not run get their text now. Run again after
    an interruption: it goes on where it stopped (--json: the report, schemas/reindex-report.schema.json).
    A new version that lacks pages the live one has is not switched to (exit 2) unless --allow-loss."""
    s = settings(collection=collection)
    display = IngestDisplay(err, quiet=as_json, every=progress_every)
    options = {"model": model, "dim": dim, "max_pixels": max_pixels, "multivector": multivector, "text": text}
    try:
        with errors():
            spec = checked(
                ReindexSpec, **options, token_pool=token_pool, drop_old=drop_old, allow_loss=allow_loss
            )
            with open_index(s) as index, answering_reads(index, s, command="reindex"), display:
                report = index.reindex(spec, progress=display)
    except KeyboardInterrupt:
        err.print(
            "interrupted: the collection still reads its old version; run the same command again to go on "
            "from where this one stopped",
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(130) from None
    _show(report, as_json)
    if report.switched and model is not None and "model" in s.model_fields_set and model != s.model:
        # the model this shell's settings name no longer makes the collection's vectors: searches would fail
        err.print(
            f"[yellow]the collection's model is now {model!r}: this shell's model setting "
            f"(DOCVEC_MODEL) still names {s.model!r}, which cannot search it. Unset it (`unset "
            "DOCVEC_MODEL`: a collection's own model is used when none is named) or set "
            f"DOCVEC_MODEL={shlex.quote(model)}.[/]",
            highlight=False,
            soft_wrap=True,
        )
    if report.pages_missing and not report.switched:
        # the switch the command was for did not happen: an error, though the report above is whole
        err.print(
            f"[bold red]error:[/] collection {report.collection!r} did not switch to {report.new_version}: "
            f"it lacks {counted(report.pages_missing, 'page')} that {report.old_version} has; run again "
            "to try them again (it resumes), or --allow-loss to switch without them",
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(2)
    if report.failures:
        raise typer.Exit(1)


def _show(report: ReindexReport, as_json: bool) -> None:
    if as_json:
        sys.stdout.write(report.model_dump_json() + "\n")
        return
    out.print(report.summary(), highlight=False, soft_wrap=True)
    for source in report.vanished:
        err.print(f"[yellow]gone:[/] {source}", highlight=False, soft_wrap=True)
    for f in report.failures:
        err.print(f"[red]failed:[/] {f}", highlight=False, soft_wrap=True)


@collections_app.command("list")
def list_versions(collection: CollectionOption = None, as_json: JsonFlag = False) -> None:
    """The collection's versions: which is live, their model, vector size, page budget and pages (--json:
    a list, schemas/versions.schema.json)."""
    s = settings(collection=collection)
    with errors(), read_index(s) as index:
        versions = index.versions()
    if as_json:
        sys.stdout.write(json.dumps([v.model_dump(mode="json") for v in versions]) + "\n")
        return
    if not versions:
        err.print(f"collection {s.collection!r} has no versions yet: `docvec ingest PATH` makes its first")
        return
    columns = [
        Column("version", no_wrap=True),
        Column("live", no_wrap=True),
        Column("state", no_wrap=True),
        Column("model"),
        Column("profile"),
        Column("dim", no_wrap=True),
        Column("max_pixels", no_wrap=True),
        Column("pages", no_wrap=True),
        Column("created", no_wrap=True),
    ]
    rows = [
        (
            v.version,
            "yes" if v.live else "",
            v.state,
            v.model or "?",
            v.profile or "?",
            str(v.dim or "?"),
            str(v.max_pixels or "?"),
            str(v.pages),
            v.created_at.strftime("%Y-%m-%d %H:%M") if v.created_at else "",
        )
        for v in versions
    ]
    # the columns a narrow terminal can do without, least needed first: the model names the profile
    left_out = show_table(columns, rows, optional=("max_pixels", "profile", "created"))
    if left_out:
        err.print(
            f"(left out at this width: {', '.join(left_out)}; --json has them)",
            style="dim",
            highlight=False,
            soft_wrap=True,
        )


@collections_app.command("drop")
def drop_version(
    version: Annotated[str, typer.Argument(help="A version that is not live, e.g. docvec.v1.")],
    collection: CollectionOption = None,
) -> None:
    """Delete a version of the collection that is not live, and the page images no version uses any more."""
    s = settings(collection=collection)
    with errors(), read_index(s, removes=True) as index:
        freed = index.drop_version(version)
    out.print(
        f"dropped {version}; page store: {freed.files_removed} files removed ({freed.bytes_freed} bytes)",
        highlight=False,
    )


@app.command()
def gc(collection: CollectionOption = None, as_json: JsonFlag = False) -> None:
    """Remove the page images that no version of any collection shows, and the uploaded files no document
    uses and no queued upload needs (--json: the counts)."""
    s = settings(collection=collection)
    with errors(), read_index(s, removes=True) as index:
        report = index.gc()
    if as_json:
        sys.stdout.write(report.model_dump_json() + "\n")
        return
    out.print(
        f"page store: {report.files_removed} files removed ({report.bytes_freed} bytes), "
        f"{report.files_kept} kept\n"
        f"uploads: {report.uploads_removed} unused files removed ({report.upload_bytes_freed} bytes)",
        highlight=False,
    )
