"""The API's request and response bodies (pydantic); their JSON Schemas are exported under ``schemas/``."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from .._records import MAX_K, DocumentList, DocumentSummary, Hit, SearchFilter, Upload, tag_dict

__all__ = [
    "API_MODELS",
    "MAX_QUERY_CHARS",
    "DeleteResponse",
    "DocumentDetail",
    "ErrorResponse",
    "HealthResponse",
    "PageInfo",
    "QueryText",
    "SearchHitOut",
    "SearchParams",
    "SearchRequest",
    "SearchResponse",
]

MAX_QUERY_CHARS = 1000


def _not_blank(text: str) -> str:
    if not text.strip():
        raise ValueError("the query is empty")
    return text


QueryText = Annotated[
    str,
    Field(min_length=1, max_length=MAX_QUERY_CHARS, description="What to look for, in words."),
    AfterValidator(_not_blank),
]


class SearchRequest(BaseModel):
    """``POST /search``'s body."""

    model_config = ConfigDict(extra="forbid")

    query: QueryText
    top_k: int = Field(5, ge=1, le=MAX_K, description="How many pages to return.")
    filter: SearchFilter | None = None


class SearchParams(BaseModel):
    """``GET /search``'s query string."""

    model_config = ConfigDict(extra="forbid")

    q: QueryText
    k: int = Field(5, ge=1, le=MAX_K, description="How many pages to return.")


def page_urls(doc_id: str, page: int) -> dict[str, str]:
    """Where a page's thumbnail and image are served."""
    base = f"/documents/{doc_id}/pages/{page}"
    return {"thumbnail_url": f"{base}/thumbnail", "image_url": f"{base}/image"}


class SearchHitOut(BaseModel):
    """One matching page."""

    doc_id: str
    source: str = Field(description="The file the document was read from.")
    page: int = Field(ge=1, description="Page number, 1-based.")
    score: float = Field(description="Cosine similarity; higher is closer.")
    tags: dict[str, str]
    thumbnail_url: str
    image_url: str

    @classmethod
    def from_hit(cls, hit: Hit) -> SearchHitOut:
        """The API's form of a library hit: tags as a mapping, and the URLs of its page images."""
        return cls(
            doc_id=hit.doc_id,
            source=hit.source,
            page=hit.page,
            score=hit.score,
            tags=tag_dict(hit.tags),
            **page_urls(hit.doc_id, hit.page),
        )


class SearchResponse(BaseModel):
    """The best pages for a query, best first."""

    query: str
    top_k: int
    hits: list[SearchHitOut]


class PageInfo(BaseModel):
    """One indexed page of a document."""

    page: int = Field(ge=1)
    width: int
    height: int
    thumbnail_url: str
    image_url: str


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
    model: str
    collection: str
    pages: int | None = None
    detail: str | None = None


class ErrorResponse(BaseModel):
    """The body of every error response."""

    detail: str
    errors: list[dict[str, Any]] | None = None


#: Response models, for exporting their JSON schemas.
API_MODELS: list[type[BaseModel]] = [
    SearchResponse,
    SearchHitOut,
    DocumentList,
    DocumentSummary,
    DocumentDetail,
    PageInfo,
    DeleteResponse,
    Upload,
    HealthResponse,
    ErrorResponse,
]
