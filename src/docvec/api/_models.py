"""The API's request and response bodies (pydantic); their JSON Schemas are exported under ``schemas/``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .._records import (
    DOC_ID_PATTERN,
    MAX_QUERY_CHARS,
    MAX_RERANK,
    TAG_PATTERN,
    DocumentList,
    DocumentSummary,
    Hit,
    Mode,
    Page,
    PageText,
    Search,
    SearchFilter,
    SearchResult,
    Upload,
    check_doc_id,
    parse_tag,
    rule,
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
    "SearchHitOut",
    "SearchParams",
    "SearchRequest",
    "SearchResponse",
    "SessionInfo",
    "SessionRequest",
    "TagText",
]

#: ``key=value``, as ``docvec ingest --tag`` takes it
TagText = Annotated[str, Field(json_schema_extra={"pattern": TAG_PATTERN}), rule(parse_tag)]

#: ``POST /search``'s body: the search itself, as every face takes it (its JSON form)
SearchRequest = Search


def _like(name: str, default: Any = ...) -> Any:
    """A query-string field standing for the search's field ``name``: its bounds and description in the
    schema; its value, parsed from the text, is checked as the search checks it
    (:meth:`SearchParams.to_search`: one set of rules, in the library's words)."""
    schema = Search.model_json_schema()["properties"][name]
    for one in schema.get("anyOf", []):  # an optional field's bounds are those of its value
        schema = {**one, **schema} if one.get("type") != "null" else schema
    kept = ("minimum", "maximum", "minLength", "maxLength", "pattern")
    bounds = {key: schema[key] for key in kept if key in schema}
    return Field(default, json_schema_extra=bounds or None, description=Search.model_fields[name].description)


class SearchParams(BaseModel):
    """``GET /search``'s query string: the search's fields (``q`` its query) and the filters of ``docvec
    search --filter``."""

    model_config = ConfigDict(extra="forbid")

    q: str = _like("query")
    k: int = _like("k", 5)
    # the bounds in the schema, the values checked as --filter's are (SearchFilter.parse)
    doc_id: Annotated[str, Field(json_schema_extra={"pattern": DOC_ID_PATTERN})] | None = Field(
        None, description="Only this document (32 hex digits)."
    )
    source: Annotated[str, Field(min_length=1, max_length=4096, pattern=r"^[^\x00]+$")] | None = Field(
        None,
        description=(
            "Only documents read from this file, or under this folder, named as this server shows paths: "
            "to readers '<folder>/<path in it>' (a hit's source), to operators an absolute path on the "
            "server; or, without '/', the documents of this name (a hit's name: an upload's original name, "
            "a file's own name)."
        ),
    )
    tag: list[TagText] = Field(default_factory=list, description="Only pages tagged key=value (repeatable).")
    # the search's own type: an unknown mode is refused in the library's words
    mode: Mode = _like("mode", None)
    prefetch: int | None = _like("prefetch", None)
    with_text: bool = _like("with_text", False)
    rerank: int | None = _like("rerank", None)

    def to_search(self) -> Search:
        """The search these parameters ask for, checked as ``POST /search``'s body and ``--filter`` are (a
        bad one is a 400); the source as given (the caller's terms: see
        :func:`docvec.api._routes._reader_filter`)."""
        if self.doc_id is not None:
            # an empty one too: it is no filter the schema admits, not "no filter"
            check_doc_id(self.doc_id, "filter doc_id")
        items = [f"doc_id={self.doc_id}"] if self.doc_id is not None else []
        items += [f"tag={t}" for t in self.tag]
        flt = SearchFilter.parse(items) if items else None
        if self.source is not None:
            flt = (flt or SearchFilter()).model_copy(update={"source": self.source})
        given = self.model_dump(include=self.model_fields_set & {"mode", "prefetch", "with_text", "rerank"})
        try:
            return Search.model_validate({"query": self.q, "k": self.k, "filter": flt, **given})
        except ValidationError as e:
            # as the query string's own refusals are answered: docvec's rules in its words, the rest as the
            # request's shape (both 400, InputError), exactly as POST /search's body
            raise RequestValidationError(
                [{**err, "loc": ("query", *_param(err["loc"]))} for err in e.errors()]
            ) from None


def _param(loc: tuple[int | str, ...]) -> tuple[int | str, ...]:
    """Where in the query string a search's field came from (its query is ``q``)."""
    return ("q", *loc[1:]) if loc[:1] == ("query",) else loc


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
        return cls.model_validate({**hit.model_dump(), **page_urls(hit.doc_id, hit.page)})


class SearchResponse(SearchResult):
    """The best pages for a query, best first, and how they were found (:class:`docvec.SearchResult`),
    each with where its images and file are served."""

    hits: Sequence[SearchHitOut]


class PageInfo(Page):
    """One indexed page of a document (:class:`docvec.Page`), with where its images and its document's
    file are served."""

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
    test_model: bool = Field(
        False,
        description=(
            "Whether the model is docvec's tiny test model (docvec models tiny, DOCVEC_MODEL=tiny): its "
            "weights are random, so its rankings mean nothing; the search page says so."
        ),
    )
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
