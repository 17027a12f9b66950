"""A collection's versions: docvec's record of each, the list `docvec collections list` shows, what a
reindex builds and what it reports, and what a page-store collection removed."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
)

from .._config import MODEL_MAX_PIXELS, TEXT_MAX_CHARS
from .._text._terms import Analyzer, TermWeights
from ._pages import EmbeddingInfo, IngestFailure
from ._rules import JsonBool, JsonInt

__all__ = ["GcReport", "ReindexReport", "ReindexSpec", "TextIndex", "VersionInfo", "VersionRecord"]


class TextIndex(BaseModel):
    """How a version with text keeps its pages' text: how terms are found (the query is analysed the same
    way), how they are weighed, and how much text a page keeps."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    analyzer: Analyzer = Field(default_factory=Analyzer)
    weights: TermWeights = Field(default_factory=TermWeights)
    max_chars: int = Field(TEXT_MAX_CHARS, ge=1, description="The most characters of text a page keeps.")


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
    text: TextIndex | None = Field(
        None, description="How the version keeps its pages' text (keyword search); none: it keeps none."
    )


class VersionInfo(BaseModel):
    """One version of a collection, as `docvec collections list --json` shows it."""

    collection: str
    version: str
    live: bool
    state: Literal["building", "complete"]
    model: str | None = Field(None, description="The model as the settings named it (older versions: none).")
    profile: str | None = Field(
        None, description="The model's embedding profile, its family: jina-embeddings-v4, qwen3-vl-embedding."
    )
    dim: int | None
    max_pixels: int | None
    text: bool = Field(False, description="Whether the version keeps its pages' text (keyword search).")
    pages: int
    created_at: datetime | None


# A whole number of a JSON body within bounds: the bounds stand ahead of JsonInt's validators, the one
# place where pydantic writes them into the JSON Schema as its minimum and maximum (after a validator they
# come out as "ge" and "le", which no JSON Schema reader knows)
_Positive = Annotated[int, Field(ge=1), *JsonInt.__metadata__]
_PageBudget = Annotated[int, Field(ge=1, le=MODEL_MAX_PIXELS), *JsonInt.__metadata__]
_TokenPool = Annotated[int, Field(ge=1, le=16), *JsonInt.__metadata__]


class ReindexSpec(BaseModel):
    """What a reindex builds: the collection with another model, vector size, page budget or kind of pages
    (each unset: the live version's own, or what the settings name explicitly). ``docvec reindex``,
    ``POST /reindex``, the reindex flow and :meth:`docvec.Index.reindex` all take this.

    In JSON its booleans are true or false and its numbers JSON Schema's integers (4 or 4.0, never true or
    "4"), as in Python."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str | None = Field(
        None,
        description="A model folder, 'LM.gguf,MMPROJ.gguf' pair or registry name (paths as the process that "
        "reindexes sees them: a server's own).",
    )
    dim: _Positive | None = Field(None, description="Vector size (one the model gives).")
    max_pixels: _PageBudget | None = Field(
        None,
        description=(
            "Page budget in pixels, at most the model's largest image (jina-embeddings-v4: 602112, "
            "Qwen3-VL-Embedding: 1843200): a larger one is refused before any work."
        ),
    )
    multivector: JsonBool | None = Field(None, description="Keep token vectors (late interaction), or not.")
    token_pool: _TokenPool | None = Field(
        None, description="Multi-vector: average each run of this many token vectors into one."
    )
    text: JsonBool | None = Field(
        None,
        description="Keep the pages' text for keyword search (read from their files, or by OCR), or not.",
    )
    drop_old: JsonBool = Field(False, description="Remove the old version once the new one is live.")
    allow_loss: JsonBool = Field(
        False,
        description=(
            "Switch even when the new version lacks pages the live one has (pages that failed, documents "
            "whose files are gone and whose vectors another model cannot use): they leave the collection. "
            "Without it such a reindex does not switch (nor drop the old version) and says what it would "
            "lose; run again, it resumes."
        ),
    )


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
    pages_missing: int = Field(
        0,
        description=(
            "Pages the live version had that the new one lacked at the switch (failed, lost, or added "
            "meanwhile and failed): without allow_loss the collection did not switch."
        ),
    )
    pages_with_text: int = Field(
        0, description="Pages of the new version that keep text (a version with text), carried or read anew."
    )
    vanished: list[str] = Field(
        default_factory=list, description="Source files gone (or changed) since they were indexed."
    )
    failures: list[IngestFailure] = Field(default_factory=list)
    seconds: float = 0.0
    note: str | None = Field(
        None, description="Why nothing was done, or why the collection did not switch, or what it lost."
    )

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
            + (f", {self.pages_with_text} with text" if self.pages_with_text else "")
            + f" in {self.seconds:.1f} s"
            + ("; old version dropped" if self.dropped_old else "")
            + (f"; {self.note}" if self.note else "")
        )


class GcReport(BaseModel):
    """What a collection of unused files removed: `docvec gc --json` prints this."""

    files_removed: int = Field(description="Page store files (page images, thumbnails) removed.")
    bytes_freed: int = Field(description="Their bytes.")
    files_kept: int = Field(description="Page store files kept.")
    uploads_removed: int = Field(
        0,
        description=(
            "Uploaded files removed: kept copies no document uses any more and no queued upload needs, and "
            "leftovers of uploads never finished."
        ),
    )
    upload_bytes_freed: int = Field(0, description="Their bytes.")
