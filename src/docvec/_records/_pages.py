"""What is stored with every page (its payload, and which model made its vector), what an ingest run
reports, and what `docvec embed --json` prints."""

from __future__ import annotations

import os
from datetime import datetime
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
)

from ._rules import counted

__all__ = [
    "EmbeddingInfo",
    "EmbeddingRecord",
    "IngestFailure",
    "IngestReport",
    "ModelFingerprint",
    "Page",
    "PagePayload",
    "PageText",
    "TextFrom",
]

#: where a page's text came from: the PDF's text layer, or OCR; "unread": nowhere yet, a page OCR would
#: read that was indexed while OCR could not run (tesseract missing), whose text `docvec reindex --text`
#: reads once it can
TextFrom = Literal["pdf", "ocr", "unread"]


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
    pages_indexed: int = Field(
        ge=0,
        description=(
            "Pages of the document in the index (the others failed); 0 while it is being written (older "
            "pages: its page count then)."
        ),
    )
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
    text: str | None = Field(
        None,
        description=(
            "The page's text, at most DOCVEC_TEXT_MAX_CHARS characters: its PDF text layer in PDFium's "
            "reading order, or OCR (none: a collection without text, or a page without any)."
        ),
    )
    text_from: TextFrom | None = Field(
        None,
        description=(
            "Where the text came from: the PDF's text layer, or OCR; unread: OCR would read this page but "
            "could not run when it was indexed (`docvec reindex --text` reads it once it can)."
        ),
    )

    @property
    def display_name(self) -> str:
        """What to call the page's document: its recorded name, else its file's name."""
        return self.name or os.path.basename(self.source)

    @property
    def finished(self) -> bool:
        """Whether the document is whole (searchable): pages of older stores say no state."""
        return self.state != "writing"


class Page(BaseModel):
    """One indexed page of a document, as callers are shown it (:meth:`docvec.Index.pages_of`): the
    stored page's public part."""

    model_config = ConfigDict(frozen=True)

    doc_id: str
    page: int = Field(ge=1, description="Page number, 1-based.")
    width: int = Field(ge=1, description="Rendered page width in pixels.")
    height: int = Field(ge=1, description="Rendered page height in pixels.")
    text_from: TextFrom | None = Field(
        None,
        description=(
            "Where its text came from: the PDF's text layer, or OCR; unread: OCR could not run when it was "
            "indexed; none: it has no text."
        ),
    )

    @classmethod
    def of(cls, stored: PagePayload) -> Page:
        """The public part of a stored page."""
        return cls(
            doc_id=stored.doc_id,
            page=stored.page,
            width=stored.width,
            height=stored.height,
            text_from=stored.text_from,  # set where the page keeps text
        )


class PageText(BaseModel):
    """A page's whole text, as the index keeps it (``GET /documents/{doc_id}/pages/{page}/text``)."""

    model_config = ConfigDict(extra="forbid")

    doc_id: str
    page: int = Field(ge=1, description="Page number, 1-based.")
    text: str = Field(description='The text ("" for a page without any).')
    text_from: TextFrom | None = Field(
        None,
        description="Where it came from: the PDF's text layer, or OCR; unread: OCR could not run when it was "
        "indexed.",
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
    pages_resumed: int = Field(
        0,
        description=(
            "Pages of the documents indexed that an interrupted run had written already (not counted in "
            "pages_indexed): the run went on after them."
        ),
    )
    pages_unread: int = Field(
        0,
        description=(
            "Pages indexed without the text OCR would read, because OCR could not run (tesseract is not "
            "installed): `docvec reindex --text` reads it once it can, without embedding them again."
        ),
    )
    documents_failed: int = 0
    pages_failed: int = 0
    documents_removed: int = Field(0, description="Removed by --prune (files gone) or replaced by a change.")
    documents_updated: int = Field(
        0, description="Unchanged documents moved or retagged in place (counted as skipped too)."
    )
    documents_retagged: int = Field(
        0,
        description="Documents whose stored tags this run changed (a run that gives no tags keeps them).",
    )
    failures: list[IngestFailure] = Field(default_factory=list)
    ignored: list[str] = Field(
        default_factory=list,
        description="Files in the folders read that are not documents docvec reads (by their names).",
    )
    empty: list[str] = Field(
        default_factory=list,
        description=(
            "Folders and patterns given that hold no document docvec reads (an empty folder, a pattern that "
            "matches no file): nothing to do there, which is no failure."
        ),
    )

    @property
    def ok(self) -> bool:
        """True when nothing failed."""
        return not self.failures

    def summary(self) -> str:
        """The run in one line, as ``docvec ingest`` and the ingest flow report it."""
        return (
            f"indexed {counted(self.documents_indexed, 'document')} ({counted(self.pages_indexed, 'page')}"
            + (f", after the {self.pages_resumed} an interrupted run kept" if self.pages_resumed else "")
            + (f"; {counted(self.pages_unread, 'page')} without OCR's text" if self.pages_unread else "")
            + "); "
            f"skipped {self.documents_skipped} unchanged ({counted(self.pages_skipped, 'page')}"
            + (f", {self.documents_updated} updated in place" if self.documents_updated else "")
            + f"); failed {counted(self.documents_failed, 'document')}, {counted(self.pages_failed, 'page')}"
            + (
                f"; retagged {counted(self.documents_retagged, 'document')}"
                if self.documents_retagged
                else ""
            )
            + (f"; removed {self.documents_removed}" if self.documents_removed else "")
            + (
                f"; ignored {counted(len(self.ignored), 'file')} that are not documents"
                if self.ignored
                else ""
            )
            + (f"; found no document in {', '.join(self.empty)}" if self.empty else "")
        )

    def __add__(self, other: IngestReport) -> IngestReport:
        """The counts and failures of both runs."""
        counts = {
            name: getattr(self, name) + getattr(other, name)
            for name in IngestReport.model_fields
            if name != "failures"
        }
        return IngestReport(**counts, failures=[*self.failures, *other.failures])


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
