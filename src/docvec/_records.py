"""What docvec hands to the outside world and reads from it, as pydantic models: the stored page payload,
the ingest report, search hits and filters, document summaries, embedding records. Also the rules their
fields follow (document ids, tags, ``k``), each defined once here.

JSON Schemas of these models are exported under ``schemas/`` (``make schemas``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_serializer,
)

from ._errors import InputError

__all__ = [
    "DOC_ID_PATTERN",
    "FILTER_KEYS",
    "MAX_K",
    "MAX_PREFETCH",
    "DocumentList",
    "DocumentSummary",
    "EmbeddingInfo",
    "EmbeddingRecord",
    "GcReport",
    "Hit",
    "IngestFailure",
    "IngestReport",
    "ModelFingerprint",
    "PagePayload",
    "ReindexReport",
    "ReindexSpec",
    "SearchFilter",
    "SearchMode",
    "Upload",
    "VersionInfo",
    "VersionRecord",
    "check_k",
    "check_prefetch",
    "check_query",
    "display_name",
    "parse_tag",
    "parse_tags",
    "tag_dict",
]

#: A document id: the first 32 hex digits of its file's SHA-256.
DOC_ID_PATTERN = r"^[0-9a-f]{32}$"
#: The most pages one search returns.
MAX_K = 100


def check_k(k: object) -> int:
    """``k`` when it is a whole number of pages from 1 to :data:`MAX_K`, else :class:`InputError`."""
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
        raise InputError(f"k must be between 1 and {MAX_K}, not {k}")
    return k


#: The most pages a hybrid search reranks.
MAX_PREFETCH = 10_000


def check_prefetch(prefetch: object) -> int:
    """``prefetch`` when it is a whole number of pages from 1 to :data:`MAX_PREFETCH`, else
    :class:`InputError`."""
    if isinstance(prefetch, bool) or not isinstance(prefetch, int) or not 1 <= prefetch <= MAX_PREFETCH:
        raise InputError(f"prefetch must be from 1 to {MAX_PREFETCH} pages, not {prefetch}")
    return prefetch


def check_query(query: object) -> str:
    """``query`` when it is a text with something in it, else :class:`InputError`."""
    if not isinstance(query, str) or not query.strip():
        raise InputError("the query is empty")
    return query


# -- tags ----------------------------------------------------------------------------------------------


def _check_tag_part(key: str, value: str, shown: str) -> tuple[str, str]:
    key, value = key.strip(), value.strip()
    if not key or not value or "=" in key:
        raise InputError(f"tag {shown!r} is not of the form key=value (a key without '=', a value)")
    return key, value


def parse_tag(text: str) -> tuple[str, str]:
    """``"key=value"`` as ``(key, value)``, stripped; :class:`InputError` when it is not of that form."""
    key, sep, value = text.partition("=")
    if not sep:
        raise InputError(f"tag {text!r} is not of the form key=value")
    return _check_tag_part(key, value, text)


def parse_tags(items: Iterable[str] | Mapping[str, str]) -> tuple[str, ...]:
    """Tags as docvec stores them: sorted, distinct ``"key=value"`` strings, from ``key=value`` strings
    (as given to ``--tag``) or a mapping (as in the API's JSON)."""
    if isinstance(items, Mapping):
        pairs = [_check_tag_part(k, v, f"{k}={v}") for k, v in items.items()]
    else:
        pairs = [parse_tag(t) for t in items]
    return tuple(sorted({f"{k}={v}" for k, v in pairs}))


def tag_dict(tags: Iterable[object]) -> dict[str, str]:
    """Stored ``"key=value"`` tags as a mapping (the API's shape)."""
    pairs = (str(t).partition("=") for t in tags)
    return {k: v for k, _, v in pairs}


def _tags_mapping(tags: dict[str, str] | None) -> dict[str, str] | None:
    if tags is not None:
        try:
            parse_tags(tags)
        except InputError as e:
            raise ValueError(e.reason) from None
    return tags


# -- stored pages and ingestion ------------------------------------------------------------------------


class ModelFingerprint(BaseModel):
    """Short content hashes of a model's files (see ``docvec._model._fingerprint``): files of the same
    names with other weights have other fingerprints."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = Field(description="Of the language model GGUF.")
    mmproj: str = Field(description="Of the vision encoder GGUF.")
    head: str | None = Field(None, description="Of the multi-vector head, when the model has one.")


class EmbeddingInfo(BaseModel):
    """Which model and settings made a vector; ``key`` changes whenever the vector would with the same
    model files, ``fingerprint`` whenever those files' contents do."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    profile: str = Field(description="Embedding profile, e.g. jina-embeddings-v4.")
    model: str = Field(description="File name of the language model GGUF.")
    mmproj: str = Field(description="File name of the vision encoder GGUF.")
    dim: int = Field(description="Vector size.")
    min_pixels: int
    max_pixels: int
    multivector: bool = Field(False, description="Whether pages also have token vectors (multi-vector head).")
    token_pool: int = Field(1, description="Consecutive token vectors averaged into one (1: none).")
    key: str = Field(description="Short hash of all of the above.")
    fingerprint: ModelFingerprint | None = Field(
        None,
        description=(
            "The model files' contents (not in the key, so that vectors made before docvec recorded it keep "
            "theirs; none for those)."
        ),
    )


class PagePayload(BaseModel):
    """The payload stored with every page vector."""

    model_config = ConfigDict(extra="forbid")

    doc_id: str = Field(description="Document id: the first 32 hex digits of the file's SHA-256.")
    source: str = Field(description="Absolute path of the file the document was read from.")
    name: str | None = Field(
        None, description="Display name: the file's name, or an upload's original name (older pages: none)."
    )
    page: int = Field(ge=1, description="Page number, 1-based.")
    page_count: int = Field(ge=1, description="Pages in the document.")
    pages_indexed: int = Field(ge=1, description="Pages of the document in the index (the others failed).")
    content_sha256: str = Field(description="SHA-256 of the file's bytes.")
    kind: Literal["pdf", "image"]
    width: int = Field(ge=1, description="Rendered page width in pixels.")
    height: int = Field(ge=1, description="Rendered page height in pixels.")
    image: str = Field(description="The rendered page in the page store (relative path).")
    thumbnail: str = Field(description="Its thumbnail in the page store (relative path).")
    embedding: EmbeddingInfo
    ingested_at: datetime
    tags: list[str] = Field(default_factory=list, description='User metadata as "key=value" strings.')
    state: Literal["writing", "complete"] | None = Field(
        None,
        description=(
            "writing: the document's pages are still being written (searches leave them out); complete: "
            "all written (older pages: none, meaning complete)."
        ),
    )


class IngestFailure(BaseModel):
    """A document, or one page of it, that could not be indexed."""

    model_config = ConfigDict(extra="forbid")

    path: str
    page: int | None = Field(None, description="The page, when only that page failed.")
    reason: str

    def __str__(self) -> str:
        return f"{self.path} page {self.page}: {self.reason}" if self.page else f"{self.path}: {self.reason}"


class IngestReport(BaseModel):
    """What an ingest run did: `docvec ingest --json` prints this."""

    model_config = ConfigDict(extra="forbid")

    documents_indexed: int = 0
    pages_indexed: int = 0
    documents_skipped: int = Field(0, description="Unchanged since the last run: not rendered or embedded.")
    pages_skipped: int = 0
    documents_failed: int = 0
    pages_failed: int = 0
    documents_removed: int = Field(0, description="Removed by --prune (files gone) or replaced by a change.")
    documents_updated: int = Field(
        0, description="Unchanged documents moved or retagged in place (counted as skipped too)."
    )
    failures: list[IngestFailure] = Field(default_factory=list)
    ignored: list[str] = Field(
        default_factory=list,
        description="Files in the folders read that are not documents docvec reads (by their names).",
    )

    @property
    def ok(self) -> bool:
        """True when nothing failed."""
        return not self.failures

    def summary(self) -> str:
        """The run in one line, as ``docvec ingest`` and the ingest flow report it."""
        return (
            f"indexed {self.documents_indexed} documents ({self.pages_indexed} pages); "
            f"skipped {self.documents_skipped} unchanged ({self.pages_skipped} pages"
            + (f", {self.documents_updated} updated in place" if self.documents_updated else "")
            + f"); failed {self.documents_failed} documents, {self.pages_failed} pages"
            + (f"; removed {self.documents_removed}" if self.documents_removed else "")
            + (f"; ignored {len(self.ignored)} files that are not documents" if self.ignored else "")
        )

    def __add__(self, other: IngestReport) -> IngestReport:
        """The counts and failures of both runs."""
        counts = {
            name: getattr(self, name) + getattr(other, name)
            for name in IngestReport.model_fields
            if name != "failures"
        }
        return IngestReport(**counts, failures=[*self.failures, *other.failures])


# -- versions and reindexing ---------------------------------------------------------------------------


class VersionRecord(BaseModel):
    """docvec's record of one version of a collection: what made its vectors, and whether it is whole.

    Kept beside the version (the embedded store's collection record, a Qdrant collection's metadata);
    versions made before records existed have none, and their pages say what made them.
    """

    model_config = ConfigDict(extra="ignore")

    state: Literal["building", "complete"] = Field(
        description="building: a reindex is filling it (searches never read it); complete: it may be live."
    )
    embedding: EmbeddingInfo
    model: str = Field(description="The model as the settings named it: registry name, folder or pair.")
    created_at: datetime
    built_from: str | None = Field(None, description="The version a reindex read its pages from.")
    store_format: int | None = Field(
        None,
        description=(
            "How the store lays the version out (docvec._store._layout: Layout.format); none: made before "
            "docvec recorded it (format 2 at most)."
        ),
    )


class VersionInfo(BaseModel):
    """One version of a collection, as `docvec collections list --json` shows it."""

    collection: str
    version: str
    live: bool
    state: Literal["building", "complete"]
    model: str | None = Field(None, description="The model as the settings named it (older versions: none).")
    dim: int | None
    max_pixels: int | None
    pages: int
    created_at: datetime | None


class ReindexSpec(BaseModel):
    """What a reindex builds: the collection with another model, vector size, page budget or kind of pages
    (each unset: the live version's own, or what the settings name explicitly). ``docvec reindex``,
    ``POST /reindex``, the reindex flow and :meth:`docvec.Index.reindex` all take this."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str | None = Field(
        None, description="A model folder, 'LM.gguf,MMPROJ.gguf' pair or registry name (on the server)."
    )
    dim: int | None = Field(None, ge=1, description="Vector size (one the model gives).")
    max_pixels: int | None = Field(None, ge=1, description="Page budget in pixels.")
    multivector: bool | None = Field(None, description="Keep token vectors (late interaction), or not.")
    token_pool: int | None = Field(
        None, ge=1, le=16, description="Multi-vector: average each run of this many token vectors into one."
    )
    drop_old: bool = Field(False, description="Remove the old version once the new one is live.")


class ReindexReport(BaseModel):
    """What a reindex did: `docvec reindex --json` prints this."""

    model_config = ConfigDict(extra="forbid")

    collection: str
    old_version: str | None = Field(description="The version that was live when the reindex began.")
    new_version: str | None = Field(description="The version built (none when there was nothing to do).")
    switched: bool = Field(description="Whether the collection now reads the new version.")
    dropped_old: bool = False
    documents: int = Field(0, description="Documents of the old version read.")
    pages_embedded: int = Field(0, description="Pages embedded anew (from stored images or re-rendered).")
    pages_rendered: int = Field(0, description="Of those, pages rendered again from their source files.")
    pages_carried: int = Field(
        0, description="Pages whose vectors were carried over (their source is gone; same model)."
    )
    pages_resumed: int = Field(0, description="Pages an interrupted run had written already.")
    pages_lost: int = Field(0, description="Pages that could not be carried into the new version.")
    vanished: list[str] = Field(
        default_factory=list, description="Source files gone (or changed) since they were indexed."
    )
    failures: list[IngestFailure] = Field(default_factory=list)
    seconds: float = 0.0
    note: str | None = Field(None, description="Why nothing was done, when nothing was.")

    def summary(self) -> str:
        """The run in one line."""
        if self.new_version is None:
            return f"collection {self.collection!r}: {self.note or 'nothing to do'}"
        done = "now reads" if self.switched else "did not switch to"
        return (
            f"collection {self.collection!r} {done} {self.new_version} (was {self.old_version}): "
            f"{self.documents} documents, {self.pages_embedded} pages embedded"
            + (f" ({self.pages_rendered} rendered again)" if self.pages_rendered else "")
            + (f", {self.pages_carried} carried over" if self.pages_carried else "")
            + (f", {self.pages_resumed} done before" if self.pages_resumed else "")
            + (f", {self.pages_lost} lost" if self.pages_lost else "")
            + f" in {self.seconds:.1f} s"
            + ("; old version dropped" if self.dropped_old else "")
        )


class GcReport(BaseModel):
    """What a page-store collection removed: `docvec gc --json` prints this."""

    files_removed: int
    bytes_freed: int
    files_kept: int


# -- search --------------------------------------------------------------------------------------------


#: How a search scores pages (see docvec._pipeline._search.search); ``auto`` picks hybrid on a multi-vector
#: collection.
SearchMode = Literal["dense", "multi", "hybrid"]

#: The keys ``--filter`` and ``GET /search`` take, and what each means.
FILTER_KEYS = {
    "doc_id": "only this document (32 hex digits)",
    "source": "only documents read from this file, or from under this folder",
    "tag": "only pages tagged key=value (repeatable: every one must hold)",
}


class SearchFilter(BaseModel):
    """Which pages a search considers: one document, a file or folder they were read from, and tags.

    Every given condition must hold, every tag included; an empty filter (the default) matches every page.
    The same three conditions go by the same names everywhere: ``docvec search --filter doc_id=...
    --filter source=... --filter tag=key=value``, ``GET /search?doc_id=...&source=...&tag=key=value``, and
    ``POST /search`` with ``{"filter": {"doc_id": ..., "source": ..., "tags": {"key": "value"}}}``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    doc_id: str | None = Field(None, pattern=DOC_ID_PATTERN, description="Only this document.")
    source: str | None = Field(
        None,
        min_length=1,
        max_length=4096,
        validation_alias=AliasChoices("source", "source_prefix"),
        description=(
            "Only documents read from this file, or from under this folder (whole path components: "
            "/docs/a matches /docs/a/x.pdf, not /docs/ab.pdf)."
        ),
    )
    tags: Annotated[dict[str, str] | None, AfterValidator(_tags_mapping)] = Field(
        None, description="Only pages tagged key=value (as given to `docvec ingest --tag`), all of them."
    )

    @classmethod
    def parse(cls, items: Iterable[str]) -> SearchFilter:
        """A filter from ``key=value`` strings (``--filter``, ``GET /search``): ``doc_id=ID``,
        ``source=PATH`` (made absolute like the stored sources) and ``tag=KEY=VALUE``; :class:`InputError`
        for an unknown key, a malformed item or a condition given twice."""
        found: dict[str, str] = {}
        tags: dict[str, str] = {}
        for item in items:
            key, sep, value = item.partition("=")
            key, value = key.strip(), value.strip()
            if not sep or not key or not value:
                raise InputError(f"filter {item!r} is not of the form key=value")
            if key not in FILTER_KEYS:
                known = "; ".join(f"{k}=: {what}" for k, what in FILTER_KEYS.items())
                raise InputError(f"filter {item!r}: unknown key {key!r} (known: {known})")
            if key == "tag":
                tag_key, tag_value = parse_tag(value)
                if tags.get(tag_key, tag_value) != tag_value:
                    # a page has one value per key: asking for two can match nothing
                    raise InputError(
                        f"filter tag {tag_key} given twice ({tags[tag_key]!r} and {tag_value!r})"
                    )
                tags[tag_key] = tag_value
                continue
            if key == "source":
                value = os.path.abspath(os.path.expanduser(value))
            if found.get(key, value) != value:
                raise InputError(f"filter {key} given twice ({found[key]!r} and {value!r})")
            found[key] = value
        try:
            return cls(doc_id=found.get("doc_id"), source=found.get("source"), tags=tags or None)
        except ValidationError as e:
            first = e.errors()[0]
            field = ".".join(str(p) for p in first.get("loc", ()))
            message = "a document id is 32 hex digits" if field == "doc_id" else first.get("msg", "invalid")
            raise InputError(f"filter {field}: {message}") from None

    @property
    def tag_list(self) -> tuple[str, ...]:
        """The tags as stored: sorted ``"key=value"`` strings."""
        return parse_tags(self.tags or {})

    @property
    def is_empty(self) -> bool:
        """True when the filter has no condition."""
        return self.doc_id is None and self.source is None and not self.tags


def display_name(payload: dict[str, Any]) -> str:
    """What to call a stored document: its recorded name, else its file's name."""
    return str(payload.get("name") or os.path.basename(str(payload.get("source", ""))))


class Hit(BaseModel):
    """One matching page: its document, 1-based page number, cosine score and tags.

    ``payload`` (everything stored with the page) is there for callers; its JSON form (``model_dump``,
    what ``docvec search --json``, the batch-query flow and the API print) leaves it out.
    """

    model_config = ConfigDict(frozen=True)

    doc_id: str
    source: str = Field(description="The file the document was read from.")
    name: str = Field(description="Display name: the file's name, or an upload's original name.")
    page: int = Field(ge=1, description="Page number, 1-based.")
    score: float = Field(description="Cosine similarity; higher is closer.")
    tags: dict[str, str] = Field(default_factory=dict, description="The document's tags, key to value.")
    payload: dict[str, Any] = Field(default_factory=dict, exclude=True)

    @field_serializer("score")
    def _round_score(self, score: float) -> float:
        return round(score, 6)

    @classmethod
    def from_payload(cls, payload: dict[str, Any], score: float) -> Hit:
        """The hit for a stored page's payload."""
        return cls(
            doc_id=str(payload.get("doc_id")),
            source=str(payload.get("source")),
            name=display_name(payload),
            page=int(payload.get("page", 1)),
            score=score,
            tags=tag_dict(payload.get("tags") or ()),
            payload=payload,
        )


# -- documents -----------------------------------------------------------------------------------------


class DocumentSummary(BaseModel):
    """One indexed document."""

    doc_id: str
    source: str
    name: str = Field(description="Display name: the file's name, or an upload's original name.")
    kind: str = Field(description="pdf or image.")
    page_count: int = Field(description="Pages in the document.")
    pages_indexed: int = Field(description="Pages in the index (the others failed).")
    tags: dict[str, str]
    ingested_at: datetime

    @classmethod
    def from_payload(cls, payload: dict[str, Any]) -> DocumentSummary:
        """The summary held by any one page's payload (all pages of a document carry it)."""
        return cls(
            doc_id=str(payload["doc_id"]),
            source=str(payload.get("source", "")),
            name=display_name(payload),
            kind=str(payload.get("kind", "")),
            page_count=int(payload.get("page_count", 0)),
            pages_indexed=int(payload.get("pages_indexed", 0)),
            tags=tag_dict(payload.get("tags") or ()),
            ingested_at=payload["ingested_at"],
        )


class DocumentList(BaseModel):
    """A page of the document list, ordered by source path."""

    total: int
    offset: int
    limit: int
    documents: list[DocumentSummary]


class Upload(BaseModel):
    """An uploaded document, indexed (or found already there)."""

    doc_id: str
    source: str = Field(
        description="Where the document is read from: the uploaded copy, or the file it was indexed from."
    )
    name: str = Field(description="Display name: the upload's original name, or the existing document's.")
    pages: int = Field(description="Pages of the document in the index.")
    already_indexed: bool


# -- embeddings ----------------------------------------------------------------------------------------


class EmbeddingRecord(BaseModel):
    """One embedded input, as `docvec embed --json` prints it (a JSON list of these)."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["query", "passage", "image"] = Field(description="What was embedded.")
    input: str = Field(description="The text, or the image's path.")
    vector: list[float] = Field(description="The embedding: unit L2 norm, `dim` numbers.")
    tokens: list[list[float]] | None = Field(
        default=None,
        description="With `--multivector`: one vector per token of the input (prompt and template included), "
        "each of unit L2 norm (128 numbers for jina-embeddings-v4).",
    )
