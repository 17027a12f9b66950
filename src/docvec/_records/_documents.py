"""What is indexed, as listings show it: a document's summary, a page of the list, an upload."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ._pages import PagePayload
from ._rules import tag_dict

__all__ = ["DocumentFile", "DocumentList", "DocumentSummary", "Upload"]


class DocumentSummary(BaseModel):
    """One indexed document."""

    doc_id: str
    source: str
    name: str = Field(description="Display name: the file's name, or an upload's original name.")
    kind: str = Field(description="pdf or image.")
    page_count: int = Field(description="Pages in the document.")
    pages_indexed: int = Field(
        description="Pages searchable in the index (the others failed; none while it is being written)."
    )
    state: Literal["complete", "writing"] = Field(
        "complete",
        description=(
            "complete: searchable; writing: its pages are still being written (a long upload under way, or "
            "one a stop or a crash interrupted, to be resumed): none of them is searchable yet."
        ),
    )
    pages_written: int = Field(
        0, description="Pages stored so far: pages_indexed once complete, the pages written while writing."
    )
    tags: dict[str, str]
    ingested_at: datetime

    @classmethod
    def of(cls, page: PagePayload, *, pages_written: int | None = None) -> DocumentSummary:
        """The summary any one of a document's stored pages holds (all carry it); a document still being
        written counts no page as indexed (older pages said its page count then), and ``pages_written`` as
        stored (default: as the page says)."""
        indexed = page.pages_indexed if page.finished else 0
        return cls(
            doc_id=page.doc_id,
            source=page.source,
            name=page.display_name,
            kind=page.kind,
            page_count=page.page_count,
            pages_indexed=indexed,
            state="complete" if page.finished else "writing",
            pages_written=indexed if pages_written is None else pages_written,
            tags=tag_dict(page.tags),
            ingested_at=page.ingested_at,
        )


class DocumentFile(BaseModel):
    """A document's file as it was indexed (:meth:`docvec.Index.document_file`): where it is, here (a
    served index's: downloaded), what to call it, and what it is."""

    model_config = ConfigDict(frozen=True)

    path: Path
    name: str = Field(description="Display name: the file's name, or an upload's original name.")
    kind: Literal["pdf", "image"]


class DocumentList(BaseModel):
    """A page of the document list, ordered by name (an upload's original name, a file's own name), then by
    source path."""

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
