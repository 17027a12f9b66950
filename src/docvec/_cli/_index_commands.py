"""The commands over an index: ingest, documents, delete, search, eval, serve, demo."""

from __future__ import annotations

import contextlib
import copy
import enum
import errno
import json
import os
import shlex
import signal
import socket
import sys
from pathlib import Path
from typing import Annotated, cast, get_args

import typer
from rich import box
from rich.markup import escape
from rich.table import Column, Table
from rich.text import Text

from .._config import Settings
from .._contract import IndexLike
from .._errors import ConfigError, StoreError
from .._fileio import MB
from .._index import Index
from .._records import DocumentSummary, IngestReport, ModeChoice, Search, SearchFilter, counted, shortened
from ._common import (
    CollectionOption,
    JsonFlag,
    ModelOption,
    app,
    err,
    errors,
    marked,
    open_index,
    out,
    program,
    read_index,
    settings,
    show_table,
)
from ._progress import IngestDisplay
from ._sharing import answering_reads

__all__: list[str] = []  # commands register themselves on the app


#: ``--mode``'s choices, as Typer lists them in the help: the modes' one spelling (docvec._config)
SearchModeChoice = enum.StrEnum(  # type: ignore[misc]
    "SearchModeChoice", {mode.replace("+", "_"): mode for mode in get_args(ModeChoice)}
)
#: the modes in words, for the help
_MODES = ", ".join(get_args(ModeChoice)[:-1]) + f" or {get_args(ModeChoice)[-1]}"


@app.command()
def ingest(
    paths: Annotated[list[str], typer.Argument(help="Files, folders and glob patterns of PDFs and images.")],
    recursive: Annotated[
        bool, typer.Option("--recursive/--no-recursive", help="Descend into folders.")
    ] = True,
    collection: CollectionOption = None,
    prune: Annotated[bool, typer.Option("--prune", help="Remove documents whose files are gone.")] = False,
    tag: Annotated[
        list[str] | None,
        typer.Option("--tag", help="KEY=VALUE metadata (repeatable); without it, documents keep theirs."),
    ] = None,
    model: ModelOption = None,
    progress_every: Annotated[
        float, typer.Option(help="Seconds between progress lines when not on a terminal (cron, CI).")
    ] = 30.0,
    multivector: Annotated[
        bool | None,
        typer.Option(
            "--multivector/--single-vector",
            help="A new collection keeps token vectors too (late interaction; default: DOCVEC_MULTIVECTOR, "
            "or what the collection is).",
            show_default=False,
        ),
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Index documents: render every page, embed it, store it; unchanged files are skipped, and take the
    run's tags if it gives any (--json: the run's summary, schemas/ingest-report.schema.json)."""
    s = settings(model=model, collection=collection, multivector=multivector)
    display = IngestDisplay(err, quiet=as_json, every=progress_every)
    try:
        with errors(), open_index(s) as index, answering_reads(index, s, command="ingest"), display:
            try:
                report = index.add(paths, tags=tag or (), recursive=recursive, prune=prune, progress=display)
            except StoreError as e:
                if e.partial is not None:  # the store stopped the run: say what it did before
                    _show_report(e.partial, as_json, prefix="stopped: ")
                raise
    except KeyboardInterrupt:
        err.print(
            f"interrupted: {display.kept()}; run the same command again to go on",
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(130) from None
    _show_report(report, as_json)
    if not report.ok:
        raise typer.Exit(1)


def _show_report(report: IngestReport, as_json: bool, prefix: str = "") -> None:
    if as_json:
        sys.stdout.write(report.model_dump_json() + "\n")
        return
    out.print(prefix + report.summary(), highlight=False, soft_wrap=True)  # one line, for a pipe too
    for f in report.failures:
        err.print(f"[red]failed:[/] {f}", highlight=False, soft_wrap=True)


@app.command()
def documents(collection: CollectionOption = None, as_json: JsonFlag = False) -> None:
    """List the indexed documents: id, name, pages, tags, when indexed (--json: a list of documents, each
    as schemas/api-document-summary.schema.json)."""
    s = settings(collection=collection)
    with errors(), read_index(s) as index:
        found = _all_documents(index)
    if as_json:
        sys.stdout.write(json.dumps([d.model_dump(mode="json") for d in found]) + "\n")
        return
    if not found:
        where = f"Qdrant at {s.qdrant_url}" if s.qdrant_url else str(s.data_dir)
        err.print(
            f"nothing is indexed in collection {s.collection!r} in {where} yet: `docvec ingest PATH` adds "
            "documents",
            highlight=False,
            soft_wrap=True,
        )
        return
    rows = [
        (
            d.doc_id,
            d.name,
            _pages_shown(d),
            "\n".join(f"{k}={v}" for k, v in d.tags.items()),
            d.ingested_at.strftime("%Y-%m-%d %H:%M"),
        )
        for d in found
    ]
    # Ids whole at any width (they are copied into `docvec delete`): a table where one fits beside the
    # others, else a document a few lines.
    if out.width < _NARROW:
        for doc_id, name, pages, tags, indexed in rows:
            out.print(doc_id, highlight=False, soft_wrap=True)
            out.print(f"  {name}, {pages} page{'' if pages == '1' else 's'}, {indexed}", highlight=False)
            for tag in tags.splitlines():
                out.print(f"  {tag}", highlight=False)
        return
    table = Table(
        Column("doc_id", no_wrap=True, min_width=32),
        Column("name", overflow="fold", ratio=2),
        Column("pages", no_wrap=True),
        Column("tags", overflow="fold", ratio=1),
        Column("indexed", no_wrap=True),
        box=box.SIMPLE_HEAD,
    )
    for row in rows:
        table.add_row(*row)
    out.print(table)


#: below this many columns, a table would cut ids or squeeze names to a few letters a line
_NARROW = 100


@app.command()
def delete(
    target: Annotated[
        str,
        typer.Argument(
            help="A document id (or its first digits, when only one id starts so), a file's path, or a "
            "folder (every document read from it and its subfolders)."
        ),
    ],
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Remove a folder's documents without asking first.")
    ] = False,
    collection: CollectionOption = None,
) -> None:
    """Remove a document (all its pages), or every document read from a folder, from the index."""
    s = settings(collection=collection)
    # a path is this shell's: made absolute here, where it was typed (a server works elsewhere)
    given = os.path.expanduser(target)
    if os.path.exists(given) or os.sep in given:
        target = os.path.abspath(given)
    if os.path.isdir(given):
        _delete_folder(s, target, yes=yes)
        return
    with errors(), read_index(s, removes=True) as index:
        named = _named_by(index, target)  # before they go: the answer names them, not the id's first digits
        n = index.delete(target)
    if not n:
        err.print(
            f"[bold red]error:[/] nothing indexed under {shortened(target)}", highlight=False, soft_wrap=True
        )
        raise typer.Exit(1)
    what = ", ".join(f"{d.name} ({d.doc_id})" for d in named) if named else target
    out.print(f"removed {counted(n, 'page')} of {what}", highlight=False, soft_wrap=True)


#: the most documents a folder's deletion names before it asks
_SHOWN = 10


def _delete_folder(s: Settings, folder: str, *, yes: bool) -> None:
    """``docvec delete FOLDER``: say which documents were read from ``folder``, ask (unless ``yes``), then
    remove them one by one (a document added meanwhile is not; one removed meanwhile is no error)."""
    with errors(), read_index(s) as index:  # only reads: the question is asked with no store held
        named = _named_by(index, folder)
    if not named:
        err.print(
            f"[bold red]error:[/] no document indexed was read from {shortened(folder)} or a folder in it",
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(1)
    pages = sum(d.page_count for d in named)
    out.print(
        f"{counted(len(named), 'document')} ({counted(pages, 'page')}) indexed from {folder}:",
        highlight=False,
        soft_wrap=True,
    )
    for d in named[:_SHOWN]:
        out.print(f"  {d.doc_id}  {os.path.relpath(d.source, folder)}", highlight=False, soft_wrap=True)
    if len(named) > _SHOWN:
        out.print(f"  ... and {len(named) - _SHOWN} more", highlight=False)
    if not yes:
        if not sys.stdin.isatty():
            err.print(
                "[bold red]error:[/] not removed: add --yes to remove them without a question",
                highlight=False,
                soft_wrap=True,
            )
            raise typer.Exit(1)
        if not typer.confirm(f"remove these {counted(len(named), 'document')}?", err=True):
            raise typer.Exit(1)
    with errors(), read_index(s, removes=True) as index:
        n = sum(index.delete(d.doc_id, by="doc_id") for d in named)
    out.print(
        f"removed {counted(len(named), 'document')} ({counted(n, 'page')}) read from {folder}",
        highlight=False,
        soft_wrap=True,
    )


def _pages_shown(d: DocumentSummary) -> str:
    """A document's pages for the listing: its page count, how many are searchable when some failed, or how
    far the writing of one still being written has got (none of its pages is searchable yet)."""
    if d.state == "writing":
        return f"writing: {d.pages_written} of {d.page_count}"
    return str(d.page_count) if d.pages_indexed == d.page_count else f"{d.pages_indexed} of {d.page_count}"


def _all_documents(index: IndexLike) -> list[DocumentSummary]:
    found: list[DocumentSummary] = []
    while True:
        page = index.documents(offset=len(found), limit=1000)
        found += page.documents
        if not page.documents or len(found) >= page.total:
            return found


def _named_by(index: IndexLike, target: str) -> list[DocumentSummary]:
    """The documents ``docvec delete TARGET`` is about: an id, the start of one, or what was read from a
    path (a file, or the files under a folder)."""
    path = os.path.abspath(os.path.expanduser(target))
    return [
        d
        for d in _all_documents(index)
        if d.doc_id.startswith(target) or d.source == path or d.source.startswith(path.rstrip("/") + "/")
    ]


@app.command()
def search(
    query: Annotated[str, typer.Argument(help="What to look for, in words.")],
    k: Annotated[int, typer.Option("-k", help="How many pages to return (1-100).")] = 5,
    filter_: Annotated[
        list[str] | None,
        typer.Option(
            "--filter",
            help="doc_id=ID, source=FILE_OR_FOLDER, or tag=KEY=VALUE (repeatable; all must hold).",
        ),
    ] = None,
    mode: Annotated[
        SearchModeChoice | None,
        typer.Option(
            metavar="MODE",  # the choices in the help, where they wrap between words
            help="dense, multi (MaxSim over every page), hybrid (dense prefetch, MaxSim rerank), text "
            "(keywords in the page's text), dense+text, multi+text or hybrid+text (one of the first three "
            "fused with text), or auto (hybrid on a multi-vector collection, fused with text where there "
            "is text); default: DOCVEC_SEARCH_MODE, else auto.",
            show_default=False,
        ),
    ] = None,
    prefetch: Annotated[
        int | None, typer.Option(help="Hybrid: pages the dense vector finds for MaxSim to rerank [100].")
    ] = None,
    with_text: Annotated[
        bool,
        typer.Option("--with-text", help="Give each hit's whole page text too (--json: its text field)."),
    ] = False,
    rerank: Annotated[
        int | None,
        typer.Option(
            metavar="N",
            help="A second stage: the reranker (DOCVEC_RERANK_MODEL) reads the first stage's best N pages "
            "(k to 100) with the query and orders them again; 0: off (default: DOCVEC_RERANK, 0; k when "
            "that is more).",
            show_default=False,
        ),
    ] = None,
    collection: CollectionOption = None,
    model: ModelOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Find the pages that best match a text query, with a snippet of each page's text where the
    collection keeps text; reranked, each hit has its rerank score too (--json: a list of hits,
    schemas/search-hits.schema.json)."""
    s = settings(model=model, collection=collection)
    with errors():
        # checked before the index is opened: a typo costs no loading
        request = Search.of(
            query,
            k=k,
            filter=SearchFilter.parse(filter_ or ()),
            **({"mode": mode.value} if mode else {}),
            **({"prefetch": prefetch} if prefetch is not None else {}),
            with_text=with_text,
            **({"rerank": rerank} if rerank is not None else {}),
        )
        with read_index(s) as index:
            hits = index.search(request)
    if as_json:
        sys.stdout.write(json.dumps([h.model_dump(mode="json") for h in hits]) + "\n")
        return
    if not hits:
        err.print("no matching pages")
        return
    # reranked: the reranker's score (the order) first, then the first stage's
    reranked = any(h.rerank_score is not None for h in hits)
    columns = [
        Column("rank", no_wrap=True),
        *([Column("rerank", no_wrap=True)] if reranked else []),
        Column("score", no_wrap=True),
        Column("document"),
        Column("page", no_wrap=True),
        Column("doc_id", no_wrap=True),  # whole: it is copied into --filter doc_id= and `docvec delete`
    ]
    rows = [
        (
            str(rank),
            *([f"{h.rerank_score:.4f}" if h.rerank_score is not None else "-"] if reranked else []),
            f"{h.score:+.4f}",
            h.name,
            str(h.page),
            h.doc_id,
        )
        for rank, h in enumerate(hits, start=1)
    ]
    # reranked, the first stage's score is the one a narrow terminal can do without (--json has it)
    show_table(columns, rows, optional=("score",) if reranked else ())
    for rank, h in enumerate(hits, start=1):
        if h.snippet is not None or h.text is not None:
            out.print(f"[bold]{rank}.[/] {escape(h.name)} page {h.page}", highlight=False, soft_wrap=True)
        # the whole text when asked for (it holds the snippet), else the snippet; indented, not padded to
        # the terminal's width (a pipe gets no trailing blanks)
        shown = Text(h.text) if h.text is not None else marked(h.snippet) if h.snippet is not None else None
        if shown is not None:
            for line in shown.wrap(out, max(out.width - 3, 20)):
                line.rstrip()
                out.print(Text("   ") + line, soft_wrap=True)


@app.command("eval")
def eval_(
    dataset: Annotated[
        Path, typer.Argument(help="Folder with queries.jsonl, qrels.tsv and corpus/ (see docs/cli.md).")
    ],
    k: Annotated[int, typer.Option("-k", help="Cut-off of recall@k (1-100).")] = 10,
    mode: Annotated[
        list[SearchModeChoice] | None,
        typer.Option(
            metavar="MODE",  # the choices in the help, where they wrap between words
            help=f"Search mode(s) to score, on the same index (repeatable): {_MODES}, as in `docvec search` "
            "(default: auto).",
            show_default=False,
        ),
    ] = None,
    rerank: Annotated[
        int,
        typer.Option(
            metavar="N",
            help="Also score each mode with the second stage: the reranker reads its best N pages (k to "
            "100) with the query (a column MODE+rerankN beside MODE); 0: no second stage.",
        ),
    ] = 0,
    rerank_model: Annotated[
        str | None,
        typer.Option(
            help="The reranker for --rerank: a model folder, LM,MMPROJ pair or registry name "
            "(default: DOCVEC_RERANK_MODEL).",
            show_default=False,
        ),
    ] = None,
    model: ModelOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Measure retrieval quality (nDCG@5, recall@k) on a dataset, indexed into a temporary store, per
    search mode, and with --rerank per mode with the reranker's second stage too (--json: the metrics as
    one object, each mode's under "modes", a reranked one as "MODE+rerankN")."""
    from .._evaluate import evaluate

    s = settings(model=model, rerank_model=rerank_model)
    with errors():
        modes: list[ModeChoice] = [cast(ModeChoice, m.value) for m in mode] if mode else ["auto"]
        report = evaluate(dataset, s, k=k, modes=modes, rerank=rerank)
    if as_json:
        sys.stdout.write(json.dumps(report.to_dict()) + "\n")
        return
    table = Table("metric", *report.modes)
    table.add_row("queries", *[str(report.queries)] * len(report.modes))
    table.add_row("pages indexed", *[str(report.pages_indexed)] * len(report.modes))
    table.add_row("nDCG@5", *[f"{v.ndcg_at_5:.4f}" for v in report.modes.values()])
    table.add_row(f"recall@{report.k}", *[f"{v.recall_at_k:.4f}" for v in report.modes.values()])
    if report.unknown_judged:
        table.add_row("judged ids not in the corpus", *[str(len(report.unknown_judged))] * len(report.modes))
    out.print(table)
    if report.documents_failed:
        err.print(f"[yellow]{report.documents_failed} corpus documents could not be indexed[/]")


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8000,
    log_level: Annotated[str, typer.Option(help="debug, info, warning or error (to stderr).")] = "info",
) -> None:
    """Serve the search page (/) and the REST API (docs at /docs) with uvicorn."""
    import uvicorn

    from ..api import create_app

    s = settings(log_level=log_level.upper())
    # opened here, not in the app's start-up, so that a busy store or a bad model is one line, not a traceback
    with errors():
        index = Index.open(s)
        try:
            index.prepare()
        except BaseException:
            index.close()
            raise
    try:
        with errors():
            sock = _listen(host, port)  # a port taken is one line too, and no banner first
    except BaseException:
        index.close()
        raise
    try:
        base = f"http://{host}:{port}"
        app = create_app(s, index=index)
        # other docvec processes on this machine find the store held, and send their work here, with the
        # token that makes them the server's owner
        index.advertise(f"http://{_local(host)}:{port}", token=app.state.access.owner_token)
        store = f"Qdrant at {s.qdrant_url}" if s.qdrant_url else f"the embedded store in {s.data_dir}"
        err.print(
            f"docvec serves {base}/ (search page) and {base}/docs (API)\n"
            f"  collection {s.collection!r} in {store}: {index.count()} pages\n"
            f"  model {index.model} ({index.embedder.files.language_model.name})"
            + _access_line(s)
            + _reranker_line(index),
            highlight=False,
            soft_wrap=True,
        )
        # uvicorn's request log goes to stdout by default: all of the server's log goes to stderr here
        config = copy.deepcopy(uvicorn.config.LOGGING_CONFIG)
        for handler in config["handlers"].values():
            handler["stream"] = "ext://sys.stderr"
        server = uvicorn.Server(
            uvicorn.Config(
                app,
                host=host,
                port=port,
                log_level=log_level.lower(),
                log_config=config,
                # X-Forwarded-For names the client only from the proxies DOCVEC_TRUSTED_PROXIES names (the
                # app does that itself); uvicorn's own default trusts 127.0.0.1
                proxy_headers=False,
                # a stop (Ctrl-C, SIGTERM) waits this long for the requests under way, then the app's
                # shutdown stops the running job at its next page: no request holds the server longer
                timeout_graceful_shutdown=_GRACEFUL_S,
            )
        )
        # SIGTERM (a service manager's stop, `docker stop`) stops it as Ctrl-C does: uvicorn shuts the app
        # down, then raises the signal again, which this handler turns into a clean exit (the index closed
        # below) instead of the default's abrupt end
        previous = signal.signal(signal.SIGTERM, _terminated)
        try:
            with contextlib.suppress(KeyboardInterrupt, _Terminated):  # as in uvicorn.run
                server.run(sockets=[sock])
        finally:
            signal.signal(signal.SIGTERM, previous)
    finally:
        sock.close()
        index.close()


class _Terminated(Exception):
    """SIGTERM, once uvicorn has stopped the server."""


def _terminated(signum: int, frame: object) -> None:
    raise _Terminated


#: seconds a stopping server waits for requests under way (a search, an upload being received)
_GRACEFUL_S = 5


def _access_line(s: Settings) -> str:
    """The banner's words on who may do what (docs/api.md, "Who may do what")."""
    readers = "readers need the key (DOCVEC_API_KEY)" if s.api_key else "readers need no key"
    operators = (
        "operators their key (DOCVEC_OPERATOR_KEY)"
        if s.operator_key
        else "the operator's endpoints answer this machine's programs only"
    )
    roots = ", ".join(str(r) for r in s.ingest_roots) or "none (DOCVEC_INGEST_ROOTS)"
    return f"\n  {readers}; {operators}; folders POST /ingest may read: {roots}"


def _reranker_line(index: Index) -> str:
    """The banner's line about the reranker (loaded by :meth:`Index.prepare`), or nothing without one."""
    s = index.settings
    if not s.rerank_model:
        return ""
    rr = index.reranker()
    default = (
        f"{s.rerank} pages a search by default, k when it asks for more (DOCVEC_RERANK)"
        if s.rerank
        else "only searches that ask for it rerank (DOCVEC_RERANK=0)"
    )
    return (
        f"\n  reranker {s.rerank_model} ({rr.files.language_model.name}): {_size(rr.weights_bytes)} of "
        f"weights (memory-mapped), {default}"
    )


def _size(n: int) -> str:
    """A size in bytes for people: 4.3 GB, 812 MB, 1.2 MB."""
    if n >= 1024 * MB:
        return f"{n / (1024 * MB):.1f} GB"
    return f"{n // MB} MB" if n >= 10 * MB else f"{n / MB:.1f} MB"


def _listen(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` (as uvicorn binds one), or :class:`ConfigError` saying why not."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        sock = socket.socket(family, kind, proto)
    except OSError as e:
        raise ConfigError(f"cannot listen on {host}:{port}: {e.strerror or e}") from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as e:
        sock.close()
        taken = e.errno == errno.EADDRINUSE
        why = "another server listens there; choose another with --port" if taken else (e.strerror or str(e))
        raise ConfigError(f"cannot listen on {host}:{port}: {why}") from None
    sock.set_inheritable(True)
    return sock


def _local(host: str) -> str:
    """The address a process on this machine reaches a server listening on ``host`` at."""
    if host in ("", "0.0.0.0", "::"):
        return "127.0.0.1"
    return f"[{host}]" if ":" in host else host


@app.command()
def demo(
    model_dir: Annotated[
        Path | None, typer.Option(help="Where to build the tiny model; default: the cache folder.")
    ] = None,
) -> None:
    """Build the offline test model, index the sample documents shipped with docvec, run one search.

    The index goes to DOCVEC_DATA_DIR (default: a demo folder under the cache), never to a real one.
    """
    from .._model._registry import REGISTRY_NAME, tiny_model_dir
    from ._demo import NEXT_COMMANDS, run_demo, sample_documents

    s = settings()
    if "data_dir" not in s.model_fields_set:  # named by neither the environment nor .env
        s = s.model_copy(update={"data_dir": s.cache_dir / "demo-data"})
    # the index records the model that made it, by the name later commands find it by
    s = s.model_copy(update={"model": str(model_dir.resolve()) if model_dir else REGISTRY_NAME})
    with errors():
        run_demo(s, model_dir=model_dir or tiny_model_dir(s.cache_dir), console=out)
    model = shlex.quote(str(model_dir)) if model_dir else REGISTRY_NAME
    exe = shlex.quote(program())
    values = {
        "model": model,
        "data": shlex.quote(str(s.data_dir)),
        "docvec": exe,
        "samples": shlex.quote(str(sample_documents())),
    }
    out.print(
        "\nNext, the demo index from the command line (paste into this shell):\n"
        + "\n".join(f"  {line.format(**values)}" for line in NEXT_COMMANDS),
        highlight=False,
        soft_wrap=True,
    )
