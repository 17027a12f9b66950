"""The ``docvec`` command line."""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer
from rich.console import Console
from rich.table import Table

from ._config import EmbedSettings, Settings
from ._errors import ConfigError, DocvecError

app = typer.Typer(
    help="docvec: visual document retrieval with jina-embeddings-v4 through llama.cpp.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
models_app = typer.Typer(help="Build, convert and download models.", no_args_is_help=True)
app.add_typer(models_app, name="models")

out = Console()
err = Console(stderr=True)


@contextmanager
def _errors() -> Iterator[None]:
    """Show docvec's errors as one clear line and exit 2, instead of a traceback."""
    try:
        yield
    except DocvecError as e:
        err.print(f"[bold red]error:[/] {e}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None


# Options several commands share, defined once.
ModelOption = Annotated[
    str | None, typer.Option("--model", "-m", help="Model folder, LM,MMPROJ pair or registry name.")
]
CollectionOption = Annotated[str | None, typer.Option(help="Collection (default: DOCVEC_COLLECTION).")]
JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table (described below).")]


def _settings(**overrides: Any) -> Settings:
    with _errors():
        try:
            s = Settings(**{k: v for k, v in overrides.items() if v is not None})
        except ValueError as e:
            raise ConfigError(str(e)) from None
    logging.basicConfig(level=s.log_level, format="%(levelname)s %(name)s: %(message)s")
    return s


def _embed_settings(s: Settings, **overrides: object) -> EmbedSettings:
    data = s.embed.model_dump()
    data.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return EmbedSettings(**data)
    except ValueError as e:
        raise ConfigError(str(e)) from None


@app.command()
def embed(
    model: ModelOption = None,
    query: Annotated[
        list[str] | None, typer.Option("--query", "-q", help="A search query (repeatable).")
    ] = None,
    passage: Annotated[
        list[str] | None, typer.Option("--passage", "-p", help="A text passage (repeatable).")
    ] = None,
    image: Annotated[
        list[Path] | None, typer.Option("--image", "-i", help="An image file (repeatable).")
    ] = None,
    dim: Annotated[int | None, typer.Option(help="Vector size (Matryoshka; default: the model's).")] = None,
    threads: Annotated[int | None, typer.Option(help="CPU threads.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Embed queries, passages and images and print the vectors (--json: a list of {kind, input, vector},
    schemas/embed-output.schema.json)."""
    from ._embed import Embedder

    s = _settings(model=model)
    if not (query or passage or image):
        err.print("[bold red]error:[/] give at least one --query, --passage or --image")
        raise typer.Exit(2)
    with _errors():
        es = _embed_settings(s, dim=dim, threads=threads)
        inputs: list[tuple[str, str]] = []
        vectors: list[np.ndarray] = []
        with Embedder.open(s.model, es) as emb:
            if query:
                vectors.append(emb.embed_queries(query))
                inputs += [("query", q) for q in query]
            if passage:
                vectors.append(emb.embed_passages(passage))
                inputs += [("passage", p) for p in passage]
            if image:
                vectors.append(emb.embed_images(image))
                inputs += [("image", str(p)) for p in image]
    mat = np.concatenate(vectors)
    if as_json:
        rows = [
            {"kind": k, "input": t, "vector": [round(float(x), 7) for x in v]}
            for (k, t), v in zip(inputs, mat, strict=True)
        ]
        sys.stdout.write(json.dumps(rows) + "\n")
        return
    table = Table("kind", "input", "dim", "vector")
    for (k, t), v in zip(inputs, mat, strict=True):
        head = " ".join(f"{x:+.4f}" for x in v[:6])
        table.add_row(k, t, str(len(v)), f"[{head} ...]")
    out.print(table)


@app.command()
def ingest(
    paths: Annotated[list[str], typer.Argument(help="Files, folders and glob patterns of PDFs and images.")],
    recursive: Annotated[
        bool, typer.Option("--recursive/--no-recursive", help="Descend into folders.")
    ] = True,
    collection: CollectionOption = None,
    prune: Annotated[bool, typer.Option("--prune", help="Remove documents whose files are gone.")] = False,
    tag: Annotated[list[str] | None, typer.Option("--tag", help="KEY=VALUE metadata (repeatable).")] = None,
    model: ModelOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Index documents: render every page, embed it, store it; unchanged files are skipped (--json: the
    run's summary, schemas/ingest-report.schema.json)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from ._index import Index

    s = _settings(model=model, collection=collection)
    with (
        _errors(),
        Index.open(s) as index,
        Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=err,
            transient=True,
            disable=as_json or not err.is_terminal,
        ) as bar,
    ):
        task = bar.add_task("pages", total=None)

        def progress(path: str, done: int, total: int) -> None:
            bar.update(task, description=Path(path).name[:40], completed=done, total=total)

        report = index.add(paths, tags=tag or (), recursive=recursive, prune=prune, progress=progress)
    if as_json:
        sys.stdout.write(report.model_dump_json() + "\n")
    else:
        out.print(
            f"indexed {report.documents_indexed} documents ({report.pages_indexed} pages); "
            f"skipped {report.documents_skipped} unchanged ({report.pages_skipped} pages); "
            f"failed {report.documents_failed} documents, {report.pages_failed} pages"
            + (f"; removed {report.documents_removed}" if report.documents_removed else "")
        )
        for f in report.failures:
            where = f"{f.path} page {f.page}" if f.page else f.path
            err.print(f"[red]failed:[/] {where}: {f.reason}", highlight=False, soft_wrap=True)
    if not report.ok:
        raise typer.Exit(1)


@app.command()
def delete(
    target: Annotated[str, typer.Argument(help="A document id, or the path of an indexed file.")],
    collection: CollectionOption = None,
) -> None:
    """Remove a document (all its pages) from the index."""
    from ._index import Index

    s = _settings(collection=collection)
    with _errors(), Index.open(s) as index:
        n = index.delete(target)
    if not n:
        err.print(f"[bold red]error:[/] nothing indexed under {target}")
        raise typer.Exit(1)
    out.print(f"removed {n} pages of {target}")


@app.command()
def search(
    query: Annotated[str, typer.Argument(help="What to look for, in words.")],
    k: Annotated[int, typer.Option("-k", help="How many pages to return (1-100).")] = 5,
    filter_: Annotated[
        list[str] | None,
        typer.Option(
            "--filter", help="doc_id=ID, source=PATH_PREFIX, or a tag KEY=VALUE (repeatable; all must hold)."
        ),
    ] = None,
    collection: CollectionOption = None,
    model: ModelOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Find the pages that best match a text query (--json: a list of hits {doc_id, source, page, score,
    tags}, schemas/search-hits.schema.json)."""
    from ._index import Index
    from ._records import SearchFilter

    s = _settings(model=model, collection=collection)
    with _errors():
        flt = SearchFilter.parse(filter_ or ())
        # the query and -k are checked before the model is loaded: a typo costs no loading
        with Index.open(s) as index:
            hits = index.search(query, k, flt)
    if as_json:
        sys.stdout.write(json.dumps([h.model_dump(mode="json") for h in hits]) + "\n")
        return
    if not hits:
        err.print("no matching pages")
        return
    table = Table("rank", "score", "document", "page", "doc_id")
    for rank, h in enumerate(hits, start=1):
        table.add_row(str(rank), f"{h.score:+.4f}", Path(h.source).name, str(h.page), h.doc_id)
    out.print(table)


@app.command("eval")
def eval_(
    dataset: Annotated[
        Path, typer.Argument(help="Folder with queries.jsonl, qrels.tsv and corpus/ (BEIR/ViDoRe style).")
    ],
    k: Annotated[int, typer.Option("-k", help="Cut-off of recall@k (1-100).")] = 10,
    model: ModelOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Measure retrieval quality (nDCG@5, recall@k) on a dataset, indexed into a temporary store (--json:
    the metrics as one object)."""
    from ._evaluate import evaluate

    s = _settings(model=model)
    with _errors():
        report = evaluate(dataset, s, k=k)
    if as_json:
        sys.stdout.write(json.dumps(report.to_dict()) + "\n")
        return
    table = Table("metric", "value")
    table.add_row("queries", str(report.queries))
    table.add_row("pages indexed", str(report.pages_indexed))
    table.add_row("nDCG@5", f"{report.ndcg_at_5:.4f}")
    table.add_row(f"recall@{report.k}", f"{report.recall_at_k:.4f}")
    out.print(table)
    if report.documents_failed:
        err.print(f"[yellow]{report.documents_failed} corpus documents could not be indexed[/]")


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8000,
) -> None:
    """Serve the search API (OpenAPI at /docs) and the search page (/) with uvicorn."""
    import uvicorn

    from .api import create_app

    s = _settings()
    with _errors():
        uvicorn.run(create_app(s), host=host, port=port, log_level=s.log_level.lower())


@models_app.command("tiny")
def models_tiny(
    out_dir: Annotated[Path, typer.Argument(help="Folder for the checkpoint (hf/) and its GGUFs.")],
    seed: Annotated[int, typer.Option(help="Random seed of the weights.")] = 0,
    outtype: Annotated[str, typer.Option(help="GGUF type: f16, bf16 or f32.")] = "f16",
) -> None:
    """Build the offline test model: a random-weight Qwen2.5-VL of the real architecture, and its GGUFs."""
    from ._tiny_model import build_tiny_model

    s = _settings()
    with _errors():
        files = build_tiny_model(out_dir, cache_dir=s.cache_dir, seed=seed, outtype=outtype)  # type: ignore[arg-type]
    out.print(f"checkpoint  {out_dir / 'hf'}\nlanguage    {files.language_model}\nmmproj      {files.mmproj}")
    out.print("[yellow]The weights are random: the vectors test the machinery, they mean nothing.[/]")


@models_app.command("convert")
def models_convert(
    hf_dir: Annotated[Path, typer.Argument(help="Hugging Face checkpoint folder (Qwen2.5-VL architecture).")],
    out_dir: Annotated[Path, typer.Argument(help="Output folder.")],
    outtype: Annotated[
        str | None, typer.Option(help="f16, bf16 or f32; default bf16 where the CPU has bf16, else f16.")
    ] = None,
    mmproj_outtype: Annotated[
        str | None, typer.Option(help="Type of the mmproj; default: --outtype.")
    ] = None,
    quantize: Annotated[
        list[str] | None, typer.Option(help="Also quantize: Q8_0, Q6_K, Q5_K_M, Q4_K_M (repeatable).")
    ] = None,
    name: Annotated[str | None, typer.Option(help="Base name of the files; default: the folder's.")] = None,
) -> None:
    """Convert a checkpoint into a language-model GGUF and an mmproj GGUF (and quantizations)."""
    from ._convert import convert_checkpoint, default_outtype
    from ._toolchain import LlamaCppSource

    s = _settings()
    with _errors():
        res = convert_checkpoint(
            hf_dir,
            out_dir,
            source=LlamaCppSource.in_cache(s.cache_dir),
            name=name,
            outtype=(outtype or default_outtype()),  # type: ignore[arg-type]
            mmproj_outtype=mmproj_outtype,  # type: ignore[arg-type]
            quantize=tuple(quantize or ()),
            threads=s.embed.threads,
        )
    out.print(f"language    {res.main.language_model}\nmmproj      {res.main.mmproj}")
    for q, f in res.quantized.items():
        out.print(f"{q:<11} {f.language_model.parent}")


@models_app.command("pull")
def models_pull(
    name: Annotated[str, typer.Argument(help="Registry name, e.g. jina-v4.")],
    quant: Annotated[str | None, typer.Option(help="Language model quantization (default Q8_0).")] = None,
    hf_cache: Annotated[Path | None, typer.Option(help="Hugging Face cache (default: HF_HOME's).")] = None,
) -> None:
    """Download a published model's GGUFs (language model and vision encoder) from Hugging Face."""
    from . import _hub as hub

    _settings()
    with _errors():
        err.print(hub.licence_notice(name), highlight=False)
        files = hub.pull(name, quant=quant, cache_dir=hf_cache)
    out.print(f"language    {files.language_model}\nmmproj      {files.mmproj}")
    out.print(f"use it with: docvec embed --model {name} ... (or DOCVEC_MODEL={name})")


@models_app.command("list")
def models_list() -> None:
    """List the registry's models and whether they are downloaded."""
    from . import _hub as hub

    _settings()
    table = Table("name", "quantizations", "downloaded", "licence")
    for n in hub.registry_names():
        m = hub.get_model(n)
        table.add_row(n, ", ".join(m.quants), "yes" if hub.find_cached(n) else "no", m.licence_id)
    out.print(table)


@app.command()
def demo(
    model_dir: Annotated[
        Path | None, typer.Option(help="Where to build the tiny model; default: the cache folder.")
    ] = None,
) -> None:
    """Build the offline test model, index the sample documents shipped with docvec, run one search.

    The index goes to DOCVEC_DATA_DIR (default: a demo folder under the cache), never to a real one.
    """
    from ._demo import run_demo

    s = _settings()
    if "DOCVEC_DATA_DIR" not in os.environ:
        s = s.model_copy(update={"data_dir": s.cache_dir / "demo-data"})
    with _errors():
        run_demo(s, model_dir=model_dir or s.cache_dir / "models" / "tiny", console=out)


def main() -> None:  # pragma: no cover
    app()
