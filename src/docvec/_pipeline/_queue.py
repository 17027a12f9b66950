"""The upload queue: uploads a server accepted and has not indexed yet, kept on disk, so that a stop or a
crash loses none of them.

An accepted upload is a file under ``<uploads>/.queue/`` named by a fresh id (never the shared
``<sha256>.<ext>`` of ``uploads/``, which another upload of the same bytes may replace, or a delete remove,
meanwhile) and a record beside it, ``<id>.json`` (:class:`QueuedUpload`: the client's name and tags, the
document's id, kind and page count, its state), written atomically. Indexing it starts, under the index's
write lock, by marking the record ``running`` and moving the file to ``uploads/<sha256>.<ext>``; the record
goes once the upload is indexed, has failed or is cancelled. A record still ``running`` when a server
starts is an upload that a stop or a crash interrupted: its file is in ``uploads/``, its document
part-written, and indexing it again resumes after the last batch written.

A file of the queue's folder without a record (an upload kept and never queued, the temporary file of one
being received) is :func:`docvec._pipeline._gc.collect_uploads`'s to remove once it is old.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .._errors import NotFoundError
from .._fileio import write_json_atomic
from .._records import PagePayload
from ._sources import SourceDocument, save_upload

__all__ = ["QUEUE_DIR", "QueuedUpload", "UploadQueue"]

log = logging.getLogger("docvec")

#: the queue's folder, under the uploads folder (hidden: it holds no document of the index)
QUEUE_DIR = ".queue"


class QueuedUpload(BaseModel):
    """An upload accepted and not indexed yet, as its record on disk says."""

    model_config = ConfigDict(extra="ignore")

    upload_id: str = Field(pattern=r"^[0-9a-f]{32}$", description="Its id, and its job's.")
    collection: str = Field(description="The collection it goes to.")
    name: str = Field(description="The client's file name: the document's display name.")
    tags: list[str] = Field(default_factory=list, description='"key=value" strings.')
    doc_id: str
    sha256: str
    kind: Literal["pdf", "image"]
    ext: str = Field(pattern=r"^[a-z0-9]{1,8}$", description="The extension its content gave it.")
    size: int = Field(ge=0, description="Bytes.")
    page_count: int = Field(ge=0)
    state: Literal["queued", "running"] = Field(
        "queued",
        description="queued: its file waits in the queue; running: being indexed, or interrupted meanwhile.",
    )
    queued_at: datetime


class UploadQueue:
    """The queue of uploads under ``uploads`` (see the module's docstring). Its methods touch one record
    at a time; whoever indexes an upload makes sure no other thread does the same one."""

    def __init__(self, uploads: Path) -> None:
        self.uploads = uploads
        self.folder = uploads / QUEUE_DIR

    # -- receiving ----------------------------------------------------------------------------------

    def receive(self, stream: BinaryIO, *, name: str | None, limit: int, reserve: int) -> SourceDocument:
        """Stream an upload into the queue's folder under a fresh id, and identify it (see
        :func:`~docvec._pipeline._sources.save_upload` for what is refused). Not queued yet: see
        :meth:`add`."""
        return save_upload(
            stream, self.folder, limit=limit, name=name, reserve=reserve, stem=uuid.uuid4().hex
        )

    def add(self, document: SourceDocument, *, collection: str, tags: list[str]) -> QueuedUpload:
        """Queue what :meth:`receive` kept, durably."""
        if document.path.parent != self.folder:
            raise NotFoundError(f"{document.name}: not an upload this queue received")
        record = QueuedUpload(
            upload_id=document.path.stem,
            collection=collection,
            name=document.name,
            tags=tags,
            doc_id=document.doc_id,
            sha256=document.sha256,
            kind=document.kind,
            ext=document.path.suffix.removeprefix("."),
            size=document.path.stat().st_size,
            page_count=document.page_count,
            queued_at=datetime.now(UTC),
        )
        self._write(record)
        return record

    def adopt(self, page: PagePayload, path: Path, *, collection: str) -> QueuedUpload:
        """A record for an upload in ``uploads/`` (``path``) whose document a server left part-written
        without one (a server of an older docvec): queued as an interrupted upload, from what one of its
        stored pages says."""
        record = QueuedUpload(
            upload_id=uuid.uuid4().hex,
            collection=collection,
            name=page.display_name,
            tags=list(page.tags),
            doc_id=page.doc_id,
            sha256=page.content_sha256,
            kind=page.kind,
            ext=path.suffix.removeprefix("."),
            size=path.stat().st_size,
            page_count=page.page_count,
            state="running",
            queued_at=datetime.now(UTC),
        )
        self._write(record)
        return record

    # -- reading ------------------------------------------------------------------------------------

    def get(self, upload_id: str) -> QueuedUpload | None:
        """The record of ``upload_id``, or ``None`` when there is none (or it cannot be read)."""
        return self._read(self.folder / f"{upload_id}.json")

    def records(self) -> list[QueuedUpload]:
        """Every record, the interrupted ones first, then in the order they were queued."""
        found = [r for p in self._record_paths() if (r := self._read(p)) is not None]
        return sorted(found, key=lambda r: (r.state != "running", r.queued_at))

    def waiting_file(self, record: QueuedUpload) -> Path:
        """Where the upload waits in the queue."""
        return self.folder / f"{record.upload_id}.{record.ext}"

    def kept_file(self, record: QueuedUpload) -> Path:
        """Where the upload is kept while, and after, it is indexed: ``uploads/<sha256>.<ext>``."""
        return self.uploads / f"{record.sha256}.{record.ext}"

    def needed(self) -> set[Path]:
        """The files the records need: queued uploads' in the queue, interrupted ones' in ``uploads/``."""
        needed: set[Path] = set()
        for r in (self._read(p) for p in self._record_paths()):
            if r is not None:
                # a running one's file may still wait too: the record is marked before the file moves
                needed.update(
                    (self.waiting_file(r), self.kept_file(r))
                    if r.state == "running"
                    else (self.waiting_file(r),)
                )
        return needed

    # -- indexing -----------------------------------------------------------------------------------

    def start(self, record: QueuedUpload) -> SourceDocument | None:
        """Mark ``record`` running and move its file out of the queue to ``uploads/<sha256>.<ext>`` (the
        same bytes another upload kept there are replaced by the same bytes); the document to index, or
        ``None`` when its file is gone (an interrupted upload whose document was deleted since)."""
        if record.state != "running":
            record = record.model_copy(update={"state": "running"})
            self._write(record)  # first: a crash after the move must find the file where the record says
        waiting, kept = self.waiting_file(record), self.kept_file(record)
        if waiting.exists():
            os.replace(waiting, kept)
        if not kept.exists():
            return None
        return SourceDocument(
            path=kept,
            doc_id=record.doc_id,
            sha256=record.sha256,
            kind=record.kind,
            name=record.name,
            page_count=record.page_count,
        )

    def take(self, document: SourceDocument) -> SourceDocument:
        """What :meth:`receive` kept, moved to ``uploads/<sha256>.<ext>`` to be indexed at once, without a
        record (a library's :meth:`docvec.Index.add_upload`); any other document as it is."""
        if document.path.parent != self.folder:
            return document
        kept = self.uploads / f"{document.sha256}{document.path.suffix}"
        try:
            os.replace(document.path, kept)
        except FileNotFoundError:
            raise NotFoundError(
                f"{document.name}: the kept upload is gone (uploads kept and not indexed for long are "
                "collected by gc)"
            ) from None
        return dataclasses.replace(document, path=kept)

    def remove(self, record: QueuedUpload) -> None:
        """Drop a record, and its file if it still waits in the queue (a kept file is the index's)."""
        self.waiting_file(record).unlink(missing_ok=True)
        (self.folder / f"{record.upload_id}.json").unlink(missing_ok=True)

    # -- the records' files -------------------------------------------------------------------------

    def _record_paths(self) -> list[Path]:
        try:
            return [p for p in self.folder.iterdir() if p.suffix == ".json" and not p.name.startswith(".")]
        except FileNotFoundError:
            return []

    def _write(self, record: QueuedUpload) -> None:
        # durable: an upload answered 202 must survive a power cut, as the store's writes do
        write_json_atomic(
            self.folder / f"{record.upload_id}.json", record.model_dump(mode="json"), durable=True
        )

    def _read(self, path: Path) -> QueuedUpload | None:
        try:
            return QueuedUpload.model_validate(json.loads(path.read_text(encoding="utf-8")))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, ValidationError) as e:
            log.warning("upload queue: cannot read the record %s (%s); left alone", path.name, e)
            return None
