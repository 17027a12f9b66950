"""The commands over models: embed, rerank, and models tiny, convert, pull and list."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer
from rich.table import Column, Table

from .._config import EmbedSettings, Settings
from .._errors import ConfigError, InputError, ModelMismatchError
from .._model._registry import TINY_ARCH, registry_names, reranker_names
from .._records import check_query
from ._common import JsonFlag, ModelOption, app, err, errors, models_app, out, settings, show_table

__all__: list[str] = []  # commands register themselves on the app

#: the registry's names for the help, read from it: a model added there is named here too
_RERANKERS = reranker_names()
_EMBEDDERS = [n for n in registry_names() if n not in _RERANKERS]


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
    multivector: Annotated[
        bool,
        typer.Option(
            "--multivector",
            help="Also one vector per token (late interaction; needs the model's multi-vector head).",
        ),
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """Embed queries, passages and images and print the vectors (--json: a list of {kind, input, vector},
    with --multivector also tokens, a list of token vectors; schemas/embed-output.schema.json)."""
    from .._model._embedder import Embedder

    s = settings(model=model)
    if not (query or passage or image):
        err.print("[bold red]error:[/] give at least one --query, --passage or --image")
        raise typer.Exit(2)
    with errors():
        es = _embed_settings(s, dim=dim, threads=threads)
        inputs: list[tuple[str, str]] = []
        vectors: list[np.ndarray] = []
        tokens: list[np.ndarray] = []
        budget = s.render.max_memory_mb << 20  # the one image decoding limit, as in the render workers
        with Embedder.open(s.model, es, cache_dir=s.cache_dir, decode_budget=budget) as emb:
            # (kind, items, single-vector method, multi-vector method): one forward pass per input either way
            work: list[tuple[str, Sequence[Any] | None, Callable[..., Any], Callable[..., Any]]] = [
                ("query", query, emb.embed_queries, emb.embed_queries_multi),
                ("passage", passage, emb.embed_passages, emb.embed_passages_multi),
                ("image", image, emb.embed_images, emb.embed_images_multi),
            ]
            for kind, items, single, multi in work:
                if not items:
                    continue
                if multivector:
                    dense, per_input = multi(items)
                    vectors.append(dense)
                    tokens += per_input
                else:
                    vectors.append(single(items))
                inputs += [(kind, str(x)) for x in items]
    mat = np.concatenate(vectors)
    if as_json:
        rows = []
        for i, ((k, t), v) in enumerate(zip(inputs, mat, strict=True)):
            row: dict[str, object] = {"kind": k, "input": t, "vector": [round(float(x), 7) for x in v]}
            if multivector:
                row["tokens"] = [[round(float(x), 7) for x in tok] for tok in tokens[i]]
            rows.append(row)
        sys.stdout.write(json.dumps(rows) + "\n")
        return
    table = Table("kind", "input", "dim", "vector", *(["tokens"] if multivector else []))
    for i, ((k, t), v) in enumerate(zip(inputs, mat, strict=True)):
        head = " ".join(f"{x:+.4f}" for x in v[:6])
        extra = [f"{tokens[i].shape[0]} x {tokens[i].shape[1]}"] if multivector else []
        table.add_row(k, t, str(len(v)), f"[{head} ...]", *extra)
    out.print(table)


@app.command()
def rerank(
    query: Annotated[str | None, typer.Option("--query", "-q", help="The search query.")] = None,
    image: Annotated[
        list[Path] | None, typer.Option("--image", "-i", help="A page image to score (repeatable).")
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            "-m",
            help="The reranker: a model folder, LM,MMPROJ pair or registry name, e.g. qwen3-vl-reranker-2b "
            "(default: DOCVEC_RERANK_MODEL).",
            show_default=False,
        ),
    ] = None,
    instruction: Annotated[
        str | None, typer.Option(help="The task instruction (default: the model's own).")
    ] = None,
    threads: Annotated[int | None, typer.Option(help="CPU threads.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Score page images against a query with a reranker (the second stage of a search): the model's
    probability, 0 to 1, that each page meets the query, in the order given, with each one's rank (--json:
    a list of {image, score})."""
    from .._model._images import load_image
    from .._model._reranker import Reranker

    s = settings(rerank_model=model)
    with errors():
        if not s.rerank_model:
            raise ConfigError(
                "no reranker: give --model or set DOCVEC_RERANK_MODEL (e.g. qwen3-vl-reranker-2b, after "
                "`docvec models pull qwen3-vl-reranker-2b`)"
            )
        if query is None:
            raise InputError("give the query with --query")
        check_query(query)
        if instruction is not None and not instruction.strip():
            raise InputError("the instruction (--instruction) is empty")
        if not image:
            raise InputError("give at least one page image with --image")
        es = _embed_settings(s, threads=threads)
        budget = s.render.max_memory_mb << 20  # the one image decoding limit, as in the render workers
        # decoded before the model loads: a typo or a bad file costs no loading
        pages = []
        for i, path in enumerate(image):
            try:
                pages.append(load_image(path, budget=budget))
            except InputError as e:
                raise InputError(e.reason, index=i, item=e.item or str(path)) from None
        try:
            rr = Reranker.open(
                s.rerank_model,
                es,
                max_pixels=s.rerank_max_pixels,
                cache_dir=s.cache_dir,
                decode_budget=budget,
            )
        except ModelMismatchError as e:
            named = s.rerank_model in str(e)  # a folder names the GGUF under it
            raise ModelMismatchError(str(e) if named else f"{s.rerank_model}: {e}") from None
        with rr:
            scores = rr.score(query, pages, instruction=instruction)
    if as_json:
        rows = [{"image": str(p), "score": float(x)} for p, x in zip(image, scores, strict=True)]
        sys.stdout.write(json.dumps(rows) + "\n")
        return
    ranks = np.empty(len(scores), int)
    ranks[np.argsort(-scores, kind="stable")] = np.arange(1, len(scores) + 1)
    listed = [(str(p), f"{x:.4g}", str(r)) for p, x, r in zip(image, scores, ranks, strict=True)]
    show_table([Column("image"), Column("score", no_wrap=True), Column("rank", no_wrap=True)], listed)


@models_app.command("tiny")
def models_tiny(
    out_dir: Annotated[Path, typer.Argument(help="Folder for the checkpoint (hf/) and its GGUFs.")],
    arch: Annotated[
        str,
        typer.Option(
            metavar="NAME",
            help="The architecture: qwen2.5-vl (jina-embeddings-v4's, with its multi-vector head), "
            "qwen3-vl (Qwen3-VL-Embedding's, deepstack included), qwen3-vl-reranker (Qwen3-VL-Reranker's: "
            "the same, converted as a reranker), colqwen3 (ColQwen3's: Qwen3-VL with colpali-engine's "
            "late-interaction head) or colqwen3.5 (ColQwen3.5's: Qwen3.5, its linear-attention layers "
            "included, with the same head).",
        ),
    ] = TINY_ARCH,
    seed: Annotated[int, typer.Option(help="Random seed of the weights.")] = 0,
    outtype: Annotated[str, typer.Option(help="GGUF type: f16, bf16 or f32.")] = "f16",
) -> None:
    """Build an offline test model: a random-weight model of a real architecture, and its GGUFs."""
    from .._tools._tiny import build_tiny_model

    s = settings()
    with errors():
        files = build_tiny_model(out_dir, cache_dir=s.cache_dir, seed=seed, outtype=outtype, arch=arch)  # type: ignore[arg-type]
    out.print(f"checkpoint  {out_dir / 'hf'}\nlanguage    {files.language_model}\nmmproj      {files.mmproj}")
    out.print(f"head        {files.head or 'none (single vectors only)'}")
    out.print("[yellow]The weights are random: the vectors test the machinery, they mean nothing.[/]")


@models_app.command("convert")
def models_convert(
    hf_dir: Annotated[
        Path,
        typer.Argument(help="Hugging Face checkpoint folder (Qwen2.5-VL, Qwen3-VL, ColQwen3 or ColQwen3.5)."),
    ],
    out_dir: Annotated[Path, typer.Argument(help="Output folder.")],
    outtype: Annotated[
        str | None, typer.Option(help="f16, bf16 or f32; default bf16 where the CPU has bf16, else f16.")
    ] = None,
    mmproj_outtype: Annotated[
        str | None,
        typer.Option(help="Type of the vision encoder: f16, bf16, f32 or q8_0; default: --outtype."),
    ] = None,
    quantize: Annotated[
        list[str] | None, typer.Option(help="Also quantize: Q8_0, Q6_K, Q5_K_M, Q4_K_M (repeatable).")
    ] = None,
    name: Annotated[str | None, typer.Option(help="Base name of the files; default: the folder's.")] = None,
    head_task: Annotated[
        str,
        typer.Option(help="The LoRA task merged into the multi-vector head when its adapter has several."),
    ] = "retrieval",
    reranker: Annotated[
        bool | None,
        typer.Option(
            "--reranker/--no-reranker",
            help="Convert it as a reranker (Qwen3-VL-Reranker: its head's yes/no rows kept as the "
            "classifier) or as an embedding model; default: a reranker when the folder's name or its "
            "README's title says so.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Convert a checkpoint into a language-model GGUF and an mmproj GGUF (and quantizations), and its
    multi-vector head (jina-embeddings-v4's multi_vector_projector, LoRA merged, or a ColQwen's
    custom_text_proj) into multivector-head.gguf when it has one."""
    from .._model._gguf import read_gguf_info
    from .._tools._convert import convert_checkpoint, default_outtype
    from .._tools._toolchain import LlamaCppSource

    s = settings()
    with errors():
        res = convert_checkpoint(
            hf_dir,
            out_dir,
            source=LlamaCppSource.in_cache(s.cache_dir),
            name=name,
            outtype=(outtype or default_outtype()),  # type: ignore[arg-type]
            mmproj_outtype=mmproj_outtype,  # type: ignore[arg-type]
            quantize=tuple(quantize or ()),
            threads=s.embed.threads,
            head_task=head_task,
            reranker=reranker,
        )
    out.print(f"language    {res.main.language_model}\nmmproj      {res.main.mmproj}")
    if read_gguf_info(res.main.language_model).is_reranker:
        out.print(
            f"a reranker: use it with DOCVEC_RERANK_MODEL={res.main.language_model.parent}", highlight=False
        )
    elif res.main.head is not None:
        out.print(f"head        {res.main.head}")
    else:
        out.print("head        none: the checkpoint has no multi_vector_projector (single vectors only)")
    for q, f in res.quantized.items():
        out.print(f"{q:<11} {f.language_model.parent}")


@models_app.command("pull")
def models_pull(
    name: Annotated[
        str,
        typer.Argument(
            help=f"Registry name: {', '.join(_EMBEDDERS)}, the rerankers {' and '.join(_RERANKERS)}, or "
            "tiny (the offline test model); `docvec models list` shows them."
        ),
    ],
    quant: Annotated[
        str | None,
        typer.Option(help="Language model quantization (default Q8_0; `models list` shows each's)."),
    ] = None,
    mmproj: Annotated[
        str | None,
        typer.Option(
            help="Vision encoder type: Q8_0 quantizes the published one (BF16 or F16) here, into a model "
            "folder of its own; default: the published one."
        ),
    ] = None,
    hf_cache: Annotated[Path | None, typer.Option(help="Hugging Face cache (default: HF_HOME's).")] = None,
    head: Annotated[
        bool,
        typer.Option(
            "--head/--no-head",
            help="Also get the multi-vector head (read from the full checkpoint, ~1 MB; default on).",
        ),
    ] = True,
) -> None:
    """Download a published model's GGUFs (language model and vision encoder) from Hugging Face, and its
    multi-vector head (the GGUFs lack it) unless --no-head; a model published as a checkpoint only
    (Qwen3-VL-Embedding) is downloaded and converted here, once; ``tiny`` is built on this machine instead
    (random weights, for trying docvec out offline)."""
    from .._model._registry import REGISTRY_NAME, licence_notice, tiny_model_dir
    from .._tools._pull import pull
    from .._tools._tiny import build_tiny_model

    s = settings()
    if name.lower() == REGISTRY_NAME:
        with errors():
            files = build_tiny_model(tiny_model_dir(s.cache_dir), cache_dir=s.cache_dir)
        out.print(f"language    {files.language_model}\nmmproj      {files.mmproj}\nhead        {files.head}")
        out.print("[yellow]Random weights: its vectors test the machinery and mean nothing.[/]")
        out.print(f"use it with: DOCVEC_MODEL={REGISTRY_NAME}", highlight=False)
        return
    with errors():
        err.print(licence_notice(name), highlight=False)
        err.print("downloading from the Hugging Face Hub (files already in its cache are reused) ...")
        # one message on failure, ours: not huggingface_hub's warning for each of its retries
        logging.getLogger("huggingface_hub").setLevel(logging.ERROR)
        files = pull(
            name,
            quant=quant,
            mmproj=mmproj,
            cache_dir=hf_cache,
            head=head,
            docvec_cache_dir=s.cache_dir,
            threads=s.embed.threads,
        )
    out.print(f"language    {files.language_model}\nmmproj      {files.mmproj}")
    if files.head is not None:
        out.print(f"head        {files.head}")
    from .._model._registry import get_model

    variable = "DOCVEC_RERANK_MODEL" if get_model(name).kind == "reranker" else "DOCVEC_MODEL"
    # a quantization other than the default is not what the name opens: the model folder pull made for it
    where = name if quant is None and mmproj is None else str(files.language_model.parent)
    out.print(f"use it with: {variable}={where} (or --model {where})", highlight=False, soft_wrap=True)


@models_app.command("list")
def models_list() -> None:
    """List the models docvec knows by name: licence, vector sizes, page budget, published scores (with
    their source) and whether each is here (downloaded, or built)."""
    from .._model import _registry as registry
    from .._model._profiles import PROFILES, RERANKER_PROFILES, ModelProfile

    s = settings()
    profiles = {p.name: p for p in PROFILES}
    rerankers = {p.name: p for p in RERANKER_PROFILES}
    rows: list[tuple[str, ...]] = []
    sources: dict[str, None] = {}
    for n in registry.registry_names():
        m = registry.get_model(n)
        p = profiles.get(m.profile) or rerankers[m.profile]
        scores = [x for x in p.published if x.size in (None, m.size)]
        sources.update(dict.fromkeys(x.source for x in scores))
        rows.append(
            (
                n,
                m.licence_id,
                ", ".join(map(str, reversed(p.dims(m.width))))
                if isinstance(p, ModelProfile)
                else "(a reranker)",
                f"{p.page_pixels // p.image_unit**2} tokens (max {p.max_pixels // p.image_unit**2})",
                "\n".join(f"{x.benchmark} {x.score:g}" for x in scores),
                ", ".join(m.quants),
                ", ".join(
                    q for q in m.quants if registry.find_cached(n, quant=q, docvec_cache_dir=s.cache_dir)
                )
                or "no",
            )
        )
    built = registry.find_registered(registry.REGISTRY_NAME, cache_dir=s.cache_dir) is not None
    tiny = profiles["jina-embeddings-v4"]  # the default tiny model stands in for jina-v4, 64 wide
    rows.append(
        (
            registry.REGISTRY_NAME,
            "Apache-2.0",
            ", ".join(map(str, reversed(tiny.dims(64)))),
            f"{tiny.page_pixels // tiny.image_unit**2} tokens",
            "random weights",
            "F16 (built here)",
            "F16" if built else "no",
        )
    )
    columns = [
        Column("name", no_wrap=True),
        Column("licence", no_wrap=True),
        Column("vector sizes"),
        Column("page budget"),
        Column("published scores"),
        Column("quantizations"),
        Column("here"),
    ]
    # a narrow terminal shows a few lines a model: what tells models apart before how each is packaged
    left_out = show_table(columns, rows, optional=("quantizations", "page budget"), most_lines=3)
    # one address a line, whole: a link broken across lines opens nothing
    out.print("scores as their authors published them:", highlight=False)
    for source in sources:
        out.print(f"  {source}", highlight=False, soft_wrap=True)
    if left_out:
        err.print(
            f"(left out at this width: {' and '.join(left_out)}; a wider terminal shows them)",
            style="dim",
            highlight=False,
            soft_wrap=True,
        )
