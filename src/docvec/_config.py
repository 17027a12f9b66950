"""Settings: one model, read once at the edge (CLI, API lifespan, flow entry) and passed down.

Values come from arguments, then ``DOCVEC_*`` environment variables, then a ``.env`` file.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from ._errors import ConfigError
from ._text._terms import check_stemmer

__all__ = [
    "COLLECTION_NAME_RE",
    "DECODE_BUDGET_MB",
    "MODEL_MAX_PIXELS",
    "RENDER_TIMEOUT_S",
    "TEXT_MAX_CHARS",
    "VERSION_RE",
    "EmbedSettings",
    "ModeChoice",
    "RenderSettings",
    "SearchMode",
    "Settings",
    "default_cache_dir",
    "settings_for",
]

#: How a search scores pages: by the page's look (dense: the single vector; multi: MaxSim over its token
#: vectors; hybrid: the dense vector's best pages reranked by MaxSim), by keywords in its text (text), or a
#: visual ranking fused with the keyword one (dense+text and the like). The one spelling of the modes:
#: everything else takes them from here (docvec._records.mode_parts reads one).
SearchMode = Literal["dense", "multi", "hybrid", "text", "dense+text", "multi+text", "hybrid+text"]
#: A mode as a caller asks for one: a mode, or auto (the collection's best: hybrid on a multi-vector
#: collection, dense otherwise, fused with text on a collection with text).
ModeChoice = Literal["auto", "dense", "multi", "hybrid", "text", "dense+text", "multi+text", "hybrid+text"]
# one Literal each (a union of Literals validates and documents worse); they agree, or docvec does not load
assert set(get_args(ModeChoice)) == {"auto", *get_args(SearchMode)}

#: Time limit for rendering one document, in seconds (the renderer's default too).
RENDER_TIMEOUT_S = 300.0
#: The largest image area, in pixels, any embedding model docvec knows takes (Qwen3-VL-Embedding's 1,800
#: image tokens of 32x32 px): the bound of every page-budget setting's schema. Each model's own maximum,
#: lower for some, is checked when it opens; tests/test_profiles.py holds this to the profiles'.
MODEL_MAX_PIXELS = 1800 * 32 * 32
#: Memory decoding one image may take, in MB (the default of ``DOCVEC_RENDER__MAX_MEMORY_MB``).
DECODE_BUDGET_MB = 1024
#: The most characters of text a page keeps (the default of ``DOCVEC_TEXT_MAX_CHARS``): a dense A4 page
#: has 3,000-6,000.
TEXT_MAX_CHARS = 20_000


#: what an API key may hold: printable ASCII without white space (it is sent in an HTTP header)
_KEY_CHARS = re.compile(r"[!-~]+")
#: a collection's name, and its versions': letters, digits, ``_ . -``, starting with a letter or digit, up to
#: 128 (stricter than Qdrant's own rule: names become folder names in the embedded store, and the server
#: backend keeps the same rule so that a collection can move between the two)
COLLECTION_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
#: a version of collection NAME is named NAME.vN (N from 1)
VERSION_RE = re.compile(r"(?P<name>.+)\.v(?P<number>[1-9][0-9]*)")


def _default_data_dir() -> Path:
    return Path.home() / ".local" / "share" / "docvec"


def default_cache_dir() -> Path:
    """docvec's cache folder when ``DOCVEC_CACHE_DIR`` does not name one."""
    return Path.home() / ".cache" / "docvec"


class EmbedSettings(BaseSettings):
    """How the embedder runs. Nested under :class:`Settings` as ``DOCVEC_EMBED__*``.

    ``dim``, ``min_pixels`` and ``max_pixels`` override the model's own values (its profile: for
    jina-embeddings-v4 2048, 3136 and 602112); the embedder checks them against the profile when it opens.
    """

    model_config = SettingsConfigDict(extra="forbid")

    dim: int | None = Field(
        None,
        ge=1,
        description=(
            "Output size: the model's full size (its default), or one of its Matryoshka truncations "
            "(jina-embeddings-v4: 2048, 1024, 512, 256, 128), re-normalised."
        ),
    )
    threads: int | None = Field(None, ge=1, description="CPU threads; default: all cores.")
    gpu_layers: int = Field(0, ge=-1, description="Language-model layers offloaded to a GPU (-1: all).")
    vision_gpu: bool = Field(
        False, description="Run the vision encoder (mmproj) on the GPU (needs a GPU build of llama.cpp)."
    )
    min_pixels: int | None = Field(
        None,
        ge=1,
        le=MODEL_MAX_PIXELS,
        description=(
            "Smallest image area after resizing, in pixels; default: the model's (jina-embeddings-v4: 3136, "
            "4 image tokens of 28x28 px)."
        ),
    )
    max_pixels: int | None = Field(
        None,
        ge=1,
        le=MODEL_MAX_PIXELS,
        description=(
            "Largest image area after resizing, in pixels: the page budget PDF pages are rendered near, at "
            "most the model's largest image (jina-embeddings-v4: 602112, Qwen3-VL-Embedding: 1843200); "
            "default: the model's (jina-embeddings-v4: 602112, 768 image tokens of 28x28 px)."
        ),
    )
    # 1024 holds a whole page at jina-v4's budget (up to 768 image tokens plus the prompt): one call reads
    # the language model's weights once a page; its time drops 9% against 256 at 3B size (llama.cpp/README.md)
    decode_batch: int = Field(
        1024,
        ge=1,
        le=8192,
        description=(
            "Tokens decoded per llama.cpp call: 1024 holds a whole page at jina-embeddings-v4's budget; "
            "lower it to bound memory on larger pages."
        ),
    )
    # measured on the 2-core Intel Xeon with AMX, Qwen3-VL-2B's geometry (BF16), vision encoder alone, rounds
    # interleaved: an A4 page 12.5 s one a pass, 12.3 s two a pass (peak RSS 5.5 -> 5.8 GB); 448x448 pages
    # 2.69 / 2.60 / 2.55 s at 1 / 2 / 4 (llama.cpp/README.md, patch 0008). Not worth the memory on a CPU;
    # the language model's side on AMD Zen 3 in docs/models.md (benchmarks/bench_vision_batch.py).
    vision_batch: int = Field(
        1,
        ge=1,
        le=64,
        description=(
            "Page images embedded together: through the vision encoder in one pass (Qwen2-VL, Qwen2.5-VL and "
            "Qwen3-VL encoders: jina-embeddings-v4, Qwen3-VL-Embedding, ColQwen3, ColQwen3.5; pages of any "
            "mix of sizes) and through the language model as sequences of one batch, with the same vectors "
            "as one at a time. On a CPU a page already fills the cores, so 1, the default; on a GPU raise it "
            "(8-16) to keep the device busy, at the cost of the encoder's memory and a KV cache for that "
            "many pages, with decode_batch (tokens per language-model call, shared by the group's pages) and "
            "render.workers. Groups span documents (a folder of one-page scans groups as a long document "
            "does), and the next pages render while a group is embedded."
        ),
    )
    max_text_tokens: int = Field(8192, ge=16, description="Longer texts are truncated (with a warning).")
    flash_attention: bool | None = Field(
        None,
        description=(
            "Flash attention in the language model; default: on for an embedding model's BF16 language "
            "model on the CPU (with a BF16 KV cache), else the model's choice (on for jina-embeddings-v4; "
            "off for Qwen3-VL-Embedding, whose last-token vector it moves past docvec's parity bar over an "
            "F16 cache). The vision encoder always uses it."
        ),
    )
    kv_cache: Literal["f16", "f32", "bf16"] | None = Field(
        None,
        description=(
            "Type of the language model's KV cache; default: bf16 for an embedding model's BF16 language "
            "model on the CPU (with flash attention: on AMX tiles where the CPU has them, "
            "llama.cpp/README.md patch 0009), else the model's (f16 for every family). Cost and fidelity: "
            "docs/models.md."
        ),
    )

    @model_validator(mode="after")
    def _pixels_ordered(self) -> EmbedSettings:
        if self.min_pixels is not None and self.max_pixels is not None and self.min_pixels > self.max_pixels:
            raise ValueError(f"min_pixels ({self.min_pixels}) is larger than max_pixels ({self.max_pixels})")
        return self


class RenderSettings(BaseSettings):
    """How documents become page images. Nested under :class:`Settings` as ``DOCVEC_RENDER__*``."""

    model_config = SettingsConfigDict(extra="forbid")

    workers: int = Field(1, ge=1, le=64, description="Rendering processes (PDFium is not thread-safe).")
    timeout_s: float = Field(
        RENDER_TIMEOUT_S, gt=0, description="Time limit for rendering one document, in seconds."
    )
    max_memory_mb: int = Field(
        DECODE_BUDGET_MB,
        ge=64,
        description=(
            "Memory decoding one image may take: a larger one is refused before it is decoded (by the "
            "render workers, and by `docvec embed`); a render worker is held to it by the OS, besides its "
            "own ~150 MB."
        ),
    )


class Settings(BaseSettings):
    """All of docvec's settings."""

    model_config = SettingsConfigDict(
        env_prefix="DOCVEC_",
        env_file=".env",
        env_file_encoding="utf-8",
        env_nested_delimiter="__",
        extra="ignore",
    )

    data_dir: Path = Field(
        default_factory=_default_data_dir,
        description=(
            "Where docvec keeps its data: the embedded store (qdrant/), the page images (pages/) and "
            "uploaded documents (uploads/)."
        ),
    )
    cache_dir: Path = Field(
        default_factory=default_cache_dir,
        description=(
            "Downloads and build outputs: the llama-cpp-python source and built wheels, rebuilt tokenizers, "
            "the tiny test model, pulled multi-vector heads, the demo's data folder."
        ),
    )
    model: str = Field(
        "jina-v4",
        description="A model folder, a 'LM.gguf,MMPROJ.gguf' pair, or a registry name (see `docvec models`).",
    )
    collection: str = Field(
        "docvec",
        description=(
            "The Qdrant collection pages are indexed into: 1-128 letters, digits, '_', '.' or '-', starting "
            "with a letter or digit, and not a version's name (NAME.v1, NAME.v2 ...: docvec names them)."
        ),
    )
    qdrant_url: str | None = Field(
        None,
        description=(
            "A Qdrant server or cluster (needs `pip install 'docvec[server]'`); unset: the embedded store "
            "under data_dir/qdrant."
        ),
    )
    qdrant_api_key: str | None = Field(None, description="API key of the Qdrant server.")
    multivector: bool = Field(
        False,
        description=(
            "Create new collections (and reindexed versions) multi-vector: besides its dense vector, every "
            "page keeps one vector per token (jina-embeddings-v4's multi-vector head, 128-d), searched by "
            "late interaction (MaxSim). A collection's kind is recorded with it; unset, later runs follow "
            "it. Late-interaction models (ColQwen) always keep them."
        ),
    )
    token_pool: int = Field(
        1,
        ge=1,
        le=16,
        description=(
            "Multi-vector collections: store about this many times fewer token vectors, each the mean of a "
            "group of a page's tokens (1: every token). The model's own way of grouping: runs of "
            "consecutive tokens for jina-embeddings-v4, colpali-engine's hierarchical clustering for the "
            "ColQwen models."
        ),
    )
    text: bool = Field(
        True,
        description=(
            "Create new collections (and reindexed versions) with text: every page's text (its PDF text "
            "layer, or OCR) is stored with it, for keyword search fused with the visual ranking, snippets "
            "and RAG. A collection's choice is recorded with it; `docvec reindex --text` adds text to one "
            "made without."
        ),
    )
    ocr: Literal["auto", "off", "on"] = Field(
        "auto",
        description=(
            "Read pages' text by OCR (tesseract): auto, pages without a usable text layer (scans, images); "
            "on, every page; off, never. Off, with one warning, when tesseract is not installed."
        ),
    )
    text_max_chars: int = Field(
        TEXT_MAX_CHARS,
        ge=100,
        le=1_000_000,
        description="The most characters of text a page keeps (more is cut).",
    )
    text_weight: float = Field(
        1.0,
        ge=0,
        le=100,
        description=(
            "A fused search's weight of the keyword ranking against the visual one's 1 (Qdrant's weighted "
            "reciprocal rank fusion divides a ranking's positions by its weight: at 2 the keyword ranking's "
            "second page counts as much as the visual ranking's first); above 1 favours pages whose text "
            "holds the query's words, below 1 their look."
        ),
    )
    text_stemmer: str = Field(
        "english",
        description=(
            "New collections with text: the Snowball stemmer their terms and queries go through (a "
            "language name such as english, german, french; none: no stemming)."
        ),
    )
    search_mode: ModeChoice = Field(
        "auto",
        description=(
            "How searches score pages: dense (the single vector), multi (MaxSim over every page's tokens), "
            "hybrid (the dense vector's best `prefetch` pages, reranked by MaxSim), text (keywords in the "
            "page's text, BM25), or one of the first three fused with text (dense+text ...); auto: hybrid "
            "on a multi-vector collection, dense otherwise, fused with text on a collection with text."
        ),
    )
    prefetch: int = Field(
        100, ge=1, le=10_000, description="Hybrid search: pages the dense vector finds for MaxSim to rerank."
    )
    rerank: int = Field(
        0,
        ge=0,
        le=100,
        description=(
            "Searches' second stage by default: the reranker (rerank_model) reads the first stage's best "
            "this many pages together with the query and orders them again (k of them are returned; a "
            "search's own rerank overrides it); 0, the default: no second stage. Seconds a page on a CPU "
            "(docs/rerank.md)."
        ),
    )
    rerank_model: str | None = Field(
        None,
        description=(
            "The reranker: a model folder, a 'LM.gguf,MMPROJ.gguf' pair or a registry name "
            "(qwen3-vl-reranker-2b, -8b: `docvec models pull`); unset: searches cannot rerank."
        ),
    )
    rerank_max_pixels: int | None = Field(
        None,
        ge=1,
        description=(
            "The reranker's page budget, in pixels: a stored page is resized within it (never enlarged); "
            "default: the model's (Qwen3-VL-Reranker: 1,048,576, 1,024 image tokens of 32x32 px)."
        ),
    )
    store_reserve_mb: int = Field(
        200,
        ge=0,
        description=(
            "Free space docvec keeps on the data folder's disk: a write that would leave less is refused "
            "with a clear error (the embedded store grows its files through memory maps, which a full disk "
            "turns into a crash)."
        ),
    )
    store_wait_s: float = Field(
        600.0,
        ge=0,
        description=(
            "How long, in seconds, a command or flow waits for the embedded store while another docvec "
            "process (not a server, whose work it sends there) holds it, before it gives up."
        ),
    )
    api_key: str | None = Field(
        None,
        description=(
            "The reader's key: when set, the REST API asks for it (X-API-Key header, or the search page's "
            "session cookie) to search, list and read documents and pages, upload and delete documents. "
            "Printable ASCII (what an HTTP header carries)."
        ),
    )
    operator_key: str | None = Field(
        None,
        description=(
            "The operator's key: when set, the operator's endpoints (ingest of server paths, reindex, "
            "versions, gc, deletes by path, stored payloads) take it from any machine (X-API-Key); unset, "
            "they answer programs on the server's own machine only. Printable ASCII."
        ),
    )
    ingest_roots: Annotated[list[Path], NoDecode] = Field(
        default_factory=list,
        description=(
            "Folders on the server that `POST /ingest` may read (separated by ':' as in PATH, or a JSON "
            "list); none by default: over the API only the docvec commands of the server's own user (who "
            "can read its data folder) ingest server paths. Hits and documents show paths under these "
            "folders to readers as '<folder name>/<path in it>'."
        ),
    )
    mcp_add: bool = Field(
        False,
        description=(
            "Offer agents the MCP tool `add` (`docvec mcp`, and /mcp on `docvec serve`, to whoever may "
            "search): it indexes files and folders under DOCVEC_INGEST_ROOTS only, and nothing without "
            "them. Off: agents only read."
        ),
    )
    trusted_proxies: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description=(
            "Addresses of the reverse proxies in front of the API (comma-separated IPs or networks): their "
            "X-Forwarded-For and X-Forwarded-Proto name the client; from anyone else these headers are "
            "ignored (the default: none is trusted)."
        ),
    )
    allowed_hosts: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description=(
            "Host names (comma-separated) a client on the server's own machine may call it by besides "
            "localhost, 127.0.0.1 and ::1 (a request from this machine naming another host is refused: "
            "it is how a web page rebinds a name to a server on this machine)."
        ),
    )
    max_upload_mb: int = Field(50, ge=1, description="Largest document `POST /documents` accepts, in MB.")
    max_upload_pages: int = Field(
        1000,
        ge=1,
        description="Most pages a document `POST /documents` accepts has (more is refused with 413).",
    )
    sync_upload_mb: float = Field(
        2.0,
        ge=0,
        description=(
            "`POST /documents` indexes uploads up to this size (and sync_upload_pages) before it answers "
            "(200) when nothing else is being indexed; others are indexed in the background (202, with a "
            "job to follow at /jobs/{id})."
        ),
    )
    sync_upload_pages: int = Field(
        10,
        ge=0,
        description=(
            "`POST /documents` indexes uploads of up to this many pages (and sync_upload_mb) before it "
            "answers; longer ones go to a job."
        ),
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(
        "WARNING",
        description=(
            "What the `docvec` commands log to stderr (`docvec serve` takes its own --log-level, default "
            "info)."
        ),
    )
    embed: EmbedSettings = Field(default_factory=EmbedSettings)
    render: RenderSettings = Field(default_factory=RenderSettings)

    @field_validator("rerank_model")
    @classmethod
    def _empty_is_none(cls, value: str | None) -> str | None:
        # an empty DOCVEC_RERANK_MODEL (docker-compose's way of leaving it unset) names no reranker
        return value or None

    @model_validator(mode="after")
    def _reranker_named(self) -> Settings:
        if self.rerank and not self.rerank_model:
            raise ValueError("rerank is set but rerank_model is not: name the reranker (DOCVEC_RERANK_MODEL)")
        return self

    @field_validator("api_key", "operator_key")
    @classmethod
    def _header_safe(cls, value: str | None) -> str | None:
        # a key travels in an HTTP header (latin-1 bytes): a browser cannot send another character, and
        # a client library refuses to; checked when the settings are read, not at the first request
        if value and not _KEY_CHARS.fullmatch(value):
            raise ValueError(
                "a key must be printable ASCII without spaces (letters, digits, punctuation): it is sent in "
                "an HTTP header"
            )
        return value or None

    @field_validator("ingest_roots", mode="before")
    @classmethod
    def _path_list(cls, value: Any) -> Any:
        return _listed(value, os.pathsep)

    @field_validator("trusted_proxies", "allowed_hosts", mode="before")
    @classmethod
    def _comma_list(cls, value: Any) -> Any:
        return _listed(value, ",")

    @field_validator("ingest_roots")
    @classmethod
    def _absolute_roots(cls, value: list[Path]) -> list[Path]:
        roots = [Path(os.path.realpath(Path(p).expanduser())) for p in value]
        names = [r.name for r in roots]
        for root, given in zip(roots, value, strict=True):
            if not Path(given).expanduser().is_absolute():
                raise ValueError(f"ingest_roots: {given} is not an absolute path")
            if not root.name:
                raise ValueError(f"ingest_roots: {given} names the file system's root, not a folder of it")
        if len(set(names)) != len(names):
            raise ValueError(
                f"ingest_roots: two folders have the same name ({', '.join(names)}): readers are shown "
                "paths as '<folder name>/<path in it>', which must say which folder"
            )
        return roots

    @field_validator("text_stemmer")
    @classmethod
    def _known_stemmer(cls, value: str) -> str:
        # checked when the settings are read, not when a collection is first made with them
        return check_stemmer(value)

    @field_validator("collection")
    @classmethod
    def _collection_name(cls, value: str) -> str:
        # checked when the settings are read, not by the store at the first write (or never, for a search)
        if not COLLECTION_NAME_RE.fullmatch(value):
            raise ValueError(
                f"{value!r} is not a collection name: use 1-128 letters, digits, '_', '.' or '-', starting "
                "with a letter or digit"
            )
        if VERSION_RE.fullmatch(value):
            raise ValueError(
                f"{value!r} is a version's name (docvec names a collection's versions NAME.v1, NAME.v2 ...): "
                "choose another collection name"
            )
        return value


def _listed(value: Any, separator: str) -> Any:
    """A list setting from an environment variable: a JSON list, or items separated by ``separator``."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if text.startswith("["):
        return json.loads(text)
    return [item.strip() for item in text.split(separator) if item.strip()]


def settings_for(where: Settings | str | Path | None, **overrides: Any) -> Settings:
    """Settings from ``where``: a :class:`Settings`, a data folder (everything else from ``DOCVEC_*``
    variables and ``.env``), or ``None`` (all of it from there); ``overrides`` replace single settings.

    Overrides are checked as the environment's values are.

    Raises:
        ConfigError: a value a setting refuses (or two that do not go together); the message names the
            setting and its rule.
    """
    try:
        if isinstance(where, Settings):
            if not overrides:
                return where
            # checked with the rest of ``where``'s values (not the environment's again: they were read), so
            # that the rules between settings hold too; the copy keeps which settings were named
            # explicitly (they win over a collection's record), the overrides now among them
            fields = type(where).model_fields
            checked = type(where).model_validate({**{n: getattr(where, n) for n in fields}, **overrides})
            return where.model_copy(update={n: getattr(checked, n) for n in overrides if n in fields})
        if where is None:
            return Settings(**overrides)
        return Settings(data_dir=Path(where).expanduser(), **overrides)
    except ValidationError as e:
        raise ConfigError(_problems(e)) from None


def _problems(error: ValidationError) -> str:
    """Each refused setting of ``error`` and its rule, without pydantic's copy of the value (a refused
    value may be a key)."""
    return "; ".join(
        f"{'.'.join(str(p) for p in problem['loc']) or 'settings'}: "
        f"{problem['msg'].removeprefix('Value error, ')}"
        for problem in error.errors()
    )
