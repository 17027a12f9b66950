"""What is indexed, as listings show it: a document's summary, a page of the list, an upload."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import (
    BaseModel,
    Field,
)

from ._rules import display_name, tag_dict

__all__ = ["DocumentList", "DocumentSummary", "Upload"]


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
    def from_payload(cls, payload: dict[str, Any], *, pages_written: int | None = None) -> DocumentSummary:
        """The summary held by any one page's payload (all pages of a document carry it); a document still
        being written counts no page as indexed (older pages said its page count then), and
        ``pages_written`` as stored (default: as the payload says)."""
        writing = payload.get("state") == "writing"
        indexed = 0 if writing else int(payload.get("pages_indexed", 0))
        return cls(
            doc_id=str(payload["doc_id"]),
            source=str(payload.get("source", "")),
            name=display_name(payload),
            kind=str(payload.get("kind", "")),
            page_count=int(payload.get("page_count", 0)),
            pages_indexed=indexed,
            state="writing" if writing else "complete",
            pages_written=indexed if pages_written is None else pages_written,
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
