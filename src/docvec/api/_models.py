"""The API's request and response bodies (pydantic); their JSON Schemas are exported under ``schemas/``."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, AliasChoices, BaseModel, ConfigDict, Field
from pydantic_core import PydanticCustomError

from .._errors import InputError
from .._records import (
    DOC_ID_PATTERN,
    MAX_K,
    MAX_PREFETCH,
    MAX_RERANK,
    QUERY_PATTERN,
    TAG_PATTERN,
    DocumentList,
    DocumentSummary,
    Hit,
    JsonInt,
    PageText,
    SearchFilter,
    SearchMode,
    Upload,
    check_k,
    check_prefetch,
    check_query,
    check_rerank,
    parse_tag,
)
from ._jobs import Job

__all__ = [
    "API_MODELS",
    "MAX_QUERY_CHARS",
    "DeleteResponse",
    "DocumentDetail",
    "ErrorResponse",
    "HealthResponse",
    "IngestRequest",
    "PageInfo",
    "QueryText",
    "SearchHitOut",
    "SearchParams",
    "SearchRequest",
    "SearchResponse",
    "SessionInfo",
    "SessionRequest",
    "TagText",
]

MAX_QUERY_CHARS = 1000
#: the type of a validation error that breaks one of docvec's own rules: its message is docvec's, as
#: without a server (see docvec.api._errors)
DOCVEC_RULE = "docvec_rule"


def _rule(check: Callable[[Any], Any]) -> AfterValidator:
    """docvec's own check of a value as a validator: what it raises is the validation error's message."""

    def validate(value: Any) -> Any:
        if value is not None:
            try:
                check(value)
            except InputError as e:
                raise PydanticCustomError(DOCVEC_RULE, "{reason}", {"reason": e.reason}) from None
        return value

    return AfterValidator(validate)


# The bounds are in the schema; the values are checked by docvec's rules (the same messages as the
# library's), not by pydantic's constraints.
QueryText = Annotated[
    str,
    Field(
        max_length=MAX_QUERY_CHARS,
        json_schema_extra={"minLength": 1, "pattern": QUERY_PATTERN},
        description="What to look for.",
    ),
    _rule(check_query),
]
#: ``key=value``, as ``docvec ingest --tag`` takes it
TagText = Annotated[str, Field(json_schema_extra={"pattern": TAG_PATTERN}), _rule(parse_tag)]
K = Annotated[
    int,
    Field(json_schema_extra={"minimum": 1, "maximum": MAX_K}, description="How many pages to return."),
    _rule(check_k),
]
Mode = Annotated[
    Literal["auto", "dense", "multi", "hybrid", "text", "dense+text", "multi+text", "hybrid+text"] | None,
    Field(description="How pages are scored (default: the server's DOCVEC_SEARCH_MODE, auto)."),
]
WithText = Annotated[
    bool,
    Field(
        description="Give each hit's whole page text too (a collection with text): one round trip for RAG."
    ),
]
Prefetch = Annotated[
    int | None,
    Field(
        json_schema_extra={"minimum": 1, "maximum": MAX_PREFETCH},
        description="Hybrid mode: pages the dense vector finds for MaxSim to rerank.",
    ),
    _rule(check_prefetch),
]


def _check_rerank_range(rerank: object) -> None:
    # the range only: rerank against k is checked by the search (Index.search), as without a server
    check_rerank(rerank, 1)


_RERANK = Field(
    json_schema_extra={"minimum": 0, "maximum": MAX_RERANK},
    description=(
        "A second stage: the reranker reads the first stage's best this many pages (at least k) with the "
        "query and the k it scores highest come back in its order; 0: none; default: the server's "
        "DOCVEC_RERANK. A server without a reranker (DOCVEC_RERANK_MODEL) answers 409."
    ),
)
Rerank = Annotated[int | None, _RERANK, _rule(_check_rerank_range)]
# In a JSON body a number of pages is JSON Schema's integer, as the schema says: 20 and 20.0, never true or
# "20" (the query string's "20" is parsed by the fields above).
JsonK = Annotated[JsonInt, Field(json_schema_extra={"minimum": 1, "maximum": MAX_K}), _rule(check_k)]
JsonPrefetch = Annotated[
    JsonInt | None,
    Field(
        json_schema_extra={"minimum": 1, "maximum": MAX_PREFETCH},
        description="Hybrid mode: pages the dense vector finds for MaxSim to rerank.",
    ),
    _rule(check_prefetch),
]
JsonRerank = Annotated[JsonInt | None, _RERANK, _rule(_check_rerank_range)]


class SearchRequest(BaseModel):
    """``POST /search``'s body."""

    model_config = ConfigDict(extra="forbid")

    query: QueryText
    # ``top_k``: the name before docvec settled on ``k`` everywhere; still accepted
    k: JsonK = Field(5, validation_alias=AliasChoices("k", "top_k"), description="How many pages to return.")
    filter: SearchFilter | None = None
    mode: Mode = None
    prefetch: JsonPrefetch = None
    # strict in a JSON body: 0 or "yes" is not a boolean there (the query string's "true" is parsed)
    with_text: Annotated[WithText, Field(strict=True)] = False
    rerank: JsonRerank = None


class SearchParams(BaseModel):
    """``GET /search``'s query string: the query, ``k``, and the filters of ``docvec search --filter``."""

    model_config = ConfigDict(extra="forbid")

    q: QueryText
    k: K = 5
    # the bounds in the schema, the values checked as --filter's are (SearchFilter.parse)
    doc_id: Annotated[str, Field(json_schema_extra={"pattern": DOC_ID_PATTERN})] | None = Field(
        None, description="Only this document (32 hex digits)."
    )
    source: Annotated[str, Field(min_length=1, max_length=4096, pattern=r"^[^\x00]+$")] | None = Field(
        None,
        description=(
            "Only documents read from this file, or under this folder, named as this server shows paths: "
            "to readers '<folder>/<path in it>' (a hit's source), to operators a path on the server."
        ),
    )
    tag: list[TagText] = Field(default_factory=list, description="Only pages tagged key=value (repeatable).")
    mode: Mode = None
    prefetch: Prefetch = None
    with_text: WithText = False
    rerank: Rerank = None

    def to_filter(self) -> SearchFilter | None:
        """The filter these parameters ask for, checked as ``--filter`` is (a bad one is a 400); the source
        as given (the caller's terms: see :func:`docvec.api._routes._reader_filter`)."""
        if self.doc_id is not None and not re.fullmatch(DOC_ID_PATTERN, self.doc_id):
            # an empty one too: it is no filter the schema admits, not "no filter"
            raise InputError("filter doc_id: a document id is 32 hex digits")
        items = [f"doc_id={self.doc_id}"] if self.doc_id is not None else []
        items += [f"tag={t}" for t in self.tag]
        flt = SearchFilter.parse(items) if items else None
        if self.source is not None:
            flt = (flt or SearchFilter()).model_copy(update={"source": self.source})
        return flt


def page_urls(doc_id: str, page: int) -> dict[str, str]:
    """Where a page's thumbnail and image, and its document's file, are served."""
    base = f"/documents/{doc_id}/pages/{page}"
    return {
        "thumbnail_url": f"{base}/thumbnail",
        "image_url": f"{base}/image",
        "file_url": f"/documents/{doc_id}/file",
    }


class SearchHitOut(Hit):
    """One matching page, as every docvec output has it (:class:`docvec.Hit`), with where its page
    images and its document's file are served."""

    thumbnail_url: str
    image_url: str
    file_url: str

    @classmethod
    def from_hit(cls, hit: Hit) -> SearchHitOut:
        """The API's form of a library hit."""
        return cls.model_validate(
            {**hit.model_dump(), "payload": hit.payload, **page_urls(hit.doc_id, hit.page)}
        )


class SearchResponse(BaseModel):
    """The best pages for a query, best first."""

    query: str
    k: int
    mode: SearchMode = Field(
        description="How the pages were scored: the modes that answered (dense+text: both rankings, fused)."
    )
    rerank: int = Field(
        0,
        ge=0,
        le=MAX_RERANK,
        description=(
            "The second stage's depth: the reranker read the first stage's best this many pages (all there "
            "were, when fewer matched) and the hits are in its order, each with its rerank_score; 0: the "
            "search was not reranked."
        ),
    )
    hits: list[SearchHitOut]


class PageInfo(BaseModel):
    """One indexed page of a document."""

    page: int = Field(ge=1)
    width: int
    height: int
    thumbnail_url: str
    image_url: str
    file_url: str


class DocumentDetail(DocumentSummary):
    """A document with its indexed pages."""

    pages: list[PageInfo]


class DeleteResponse(BaseModel):
    """What ``DELETE /documents/{doc_id}`` removed."""

    doc_id: str
    pages_removed: int


class HealthResponse(BaseModel):
    """Whether the model is loaded and the store answers."""

    status: str
    model: str = Field(description="The model loaded, as named: by DOCVEC_MODEL, or by the collection.")
    collection: str
    pages: int | None = None
    multivector: bool | None = Field(
        None, description="Whether the collection keeps token vectors (multi and hybrid searches need them)."
    )
    text: bool | None = Field(
        None, description="Whether the collection keeps its pages' text (keyword and fused searches need it)."
    )
    search_mode: str | None = Field(None, description="How a search that names no mode scores pages.")
    reranker: str | None = Field(
        None,
        description=(
            "The reranker searches may ask for (rerank), as named by DOCVEC_RERANK_MODEL; null: none, a "
            "search that asks to rerank is refused (409)."
        ),
    )
    rerank: int = Field(
        0, ge=0, le=MAX_RERANK, description="How deep a search that says nothing of rerank reranks (0: not)."
    )
    detail: str | None = None


class IngestRequest(BaseModel):
    """``POST /ingest``'s body: what `docvec ingest` does, on files the server can read."""

    model_config = ConfigDict(extra="forbid")

    paths: list[str] = Field(
        max_length=10_000, description="Files, folders and glob patterns, as absolute paths on the server."
    )
    tags: list[TagText] = Field(default_factory=list, description="key=value metadata for every page.")
    recursive: bool = True
    prune: bool = Field(False, description="Also drop the documents whose files are gone.")


class SessionRequest(BaseModel):
    """``POST /session``'s body: the key the search page's user typed."""

    model_config = ConfigDict(extra="forbid")

    key: str = Field(min_length=1, max_length=1024, description="The reader's (or the operator's) key.")


class SessionInfo(BaseModel):
    """``GET /session``: whether this server asks readers for a key, and whether this caller has a
    reader's right (a key, or the search page's session)."""

    key_required: bool
    reader: bool


class ErrorResponse(BaseModel):
    """The body of every error response."""

    detail: str = Field(description="What went wrong, as docvec says it without a server.")
    error: str | None = Field(
        None,
        description="The docvec error class (docvec._errors), e.g. CollectionNotFoundError: a RemoteIndex "
        "raises it again.",
    )
    fields: dict[str, Any] | None = Field(
        None, description="What the error carries besides its message (a file's path, the bad item ...)."
    )
    errors: list[dict[str, Any]] | None = None


#: Response models, for exporting their JSON schemas.
API_MODELS: list[type[BaseModel]] = [
    SearchResponse,
    SearchHitOut,
    DocumentList,
    DocumentSummary,
    DocumentDetail,
    PageInfo,
    PageText,
    DeleteResponse,
    Upload,
    HealthResponse,
    ErrorResponse,
    IngestRequest,
    Job,
]
