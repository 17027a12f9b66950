"""Pydantic models of what ingestion stores and reports: the page payload and the ingest summary."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["EmbeddingInfo", "IngestFailure", "IngestReport", "PagePayload"]


class EmbeddingInfo(BaseModel):
    """Which model and settings made a vector; ``key`` changes whenever the vector would."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    profile: str = Field(description="Embedding profile, e.g. jina-embeddings-v4.")
    model: str = Field(description="File name of the language model GGUF.")
    mmproj: str = Field(description="File name of the vision encoder GGUF.")
    dim: int = Field(description="Vector size.")
    min_pixels: int
    max_pixels: int
    key: str = Field(description="Short hash of all of the above.")


class PagePayload(BaseModel):
    """The payload stored with every page vector."""

    model_config = ConfigDict(extra="forbid")

    doc_id: str = Field(description="Document id: the first 32 hex digits of the file's SHA-256.")
    source: str = Field(description="Absolute path of the file the document was read from.")
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


class IngestFailure(BaseModel):
    """A document, or one page of it, that could not be indexed."""

    model_config = ConfigDict(extra="forbid")

    path: str
    page: int | None = Field(None, description="The page, when only that page failed.")
    reason: str


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
    failures: list[IngestFailure] = Field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when nothing failed."""
        return not self.failures

    def add(self, other: IngestReport) -> None:
        """Add ``other``'s counts and failures to this report."""
        for name in IngestReport.model_fields:
            if name != "failures":
                setattr(self, name, getattr(self, name) + getattr(other, name))
        self.failures.extend(other.failures)
