"""The reindex stage: a new version of a collection, built from what the index holds, switched in whole.

How a page reaches the new version, in order of preference:

0. its old vectors, carried over as they are, when the new version's vectors would be the same (the same
   model files and settings: a reindex that only adds or drops the pages' text, or changes the store's
   layout) — nothing is embedded;
1. its stored page image, embedded again, when the new settings render pages at the same pixel budget;
2. its source file, rendered again (the budget changed, or the image is missing), when the file is still
   there with the same content;
3. its old vector, carried over (truncated to the new size and re-normalised: exactly what the same model
   gives at that size, Matryoshka), when the source is gone and the model is the same;
4. otherwise it is lost, and the report says so, document by document.

A version with text gets each page's text from the old version when it kept it, else from the page's
source file (its text layer, or OCR as the settings say) when the file is still there as it was indexed;
a page whose text cannot be had keeps none. Pages indexed while OCR could not run (``text_from``
"unread") are read from their files again once it can: a reindex with the same settings then carries
every vector over and fills in only their text.

The rules that make it safe to run while the collection is in use, and to interrupt:

- the new version is not live until it is complete: every search reads the old one meanwhile;
- its pages are written by the ingest stage into the new version (batches, documents marked complete at
  their end), so a killed reindex run again with the same settings finds the version it was building and
  goes on from there; the old version is never written to;
- the last pass runs under the index's write lock: documents added, changed or deleted in the old version
  while the reindex ran are brought over, then the collection is switched, atomically;
- it switches only to a version that holds every page the live one has: one that lacks some (pages that
  failed, documents lost, a document added meanwhile that failed) stays unfinished, the old version live
  and kept, unless the caller accepts the loss (``allow_loss``); run again, it resumes, and tries the
  documents that lack pages again;
- with a Qdrant server, other processes may still write to the old version until they see the switch:
  after ``settle`` seconds a pass brings over what they added.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

from PIL import Image

from .._errors import CollectionNotFoundError, NotFoundError, RenderError, StoreError
from .._model._embedder import normalize
from .._records import (
    EmbeddingInfo,
    IngestFailure,
    IngestReport,
    PagePayload,
    ReindexReport,
    TextIndex,
    counted,
)
from .._render._renderer import DocumentInfo, ExtractedText, PageFailure, RenderedPage
from .._store import LAYOUT, Filter, Point, point_id
from ._ingest import Ingestor, IngestProgress, Job, ProgressFn, kept_text, require_head
from ._parts import Parts
from ._provenance import embedding_info, provably_same, recorded_info, same_model, truncated_info
from ._sources import SourceDocument, sha256_of
from ._versions import new_record, store_format, version_record

__all__ = ["Reindexer"]

log = logging.getLogger("docvec")


@dataclasses.dataclass
class _Doc:
    """A document of the old version: its id, one of its stored pages (the document's summary) and count."""

    doc_id: str
    first: PagePayload
    pages: int


class Reindexer:
    """Builds the next version of one collection with the model and renderer of ``parts`` from the
    collection's live version, then switches to it."""

    def __init__(
        self,
        parts: Parts,
        *,
        collection: str,
        model: str,
        multivector: bool = False,
        token_pool: int = 1,
        text: TextIndex | None = None,
        progress: ProgressFn | None = None,
    ) -> None:
        self.parts = parts
        self.text = text
        self.store = parts.store
        self.pages = parts.pages
        self.embedder = embedder = parts.embedder
        self.collection = collection
        self.model = model
        self.info = embedding_info(embedder, multivector=multivector, token_pool=token_pool)
        if self.info.multivector:  # before run() creates the new version, which would be left empty
            require_head(embedder, collection)
        self.progress = progress
        self.report = ReindexReport(collection=collection, old_version=None, new_version=None, switched=False)
        self._handled: set[str] = set()  # documents this run has brought over (or reported as lost)
        self._old_text: TextIndex | None = None  # how the old version kept its pages' text

    def run(
        self,
        *,
        write_lock: contextlib.AbstractContextManager[Any] | None = None,
        settle: float = 0.0,
        drop_old: bool = False,
        allow_loss: bool = False,
    ) -> ReindexReport:
        """Build, switch and (with ``drop_old``) drop the old version; see the module's docstring.

        ``write_lock`` is held for the last pass and the switch (the index's writers take it too);
        ``settle`` is how long to wait after the switch before the pass that brings over what processes
        that had not seen it yet wrote. A new version that lacks pages the old one has is not switched to
        (the report's ``pages_missing`` and ``note`` say what it lacks), unless ``allow_loss``.
        """
        start = time.monotonic()
        report = self.report
        old = self.store.live(self.collection)
        if old is None:
            raise CollectionNotFoundError(
                f"nothing is indexed in collection {self.collection!r} at {self.store.where}: "
                "nothing to reindex"
            )
        report.old_version = old
        old_info = recorded_info(self.store, old)
        old_record = version_record(self.store, old)
        current = store_format(old_record) >= LAYOUT.format_for(self.info.multivector)
        self._old_text = old_record.text if old_record is not None else None
        same_text = self._old_text == self.text
        unread = self._unread(old) if self.text is not None and same_text else 0
        waits = unread and self._ocr_missing()
        if provably_same(old_info, self.info) and current and same_text and (not unread or waits):
            report.note = f"its live version {old} was made with this model and these settings already"
            if waits:
                report.note += (
                    f"; {counted(unread, 'page')} of it OCR would read have no text, and OCR still cannot "
                    f"run ({waits}): run this again once it can"
                )
            return report
        new = self._target_version(old)
        report.new_version = new
        ingestor = Ingestor(
            self.parts,
            collection=new,
            multivector=self.info.multivector,
            token_pool=self.info.token_pool,
            text=self.text,
        )
        self._pass(old, new, ingestor, old_info, final=False)
        with write_lock if write_lock is not None else contextlib.nullcontext():
            if self.store.live(self.collection) != old:
                raise StoreError(
                    f"collection {self.collection!r} was switched to {self.store.live(self.collection)} "
                    f"while {new} was being built from {old}: run the reindex again"
                )
            docs = self._pass(old, new, ingestor, old_info, final=True)
            missing = self._missing(old, new, docs)
            report.pages_missing = sum(missing.values())
            if missing:
                report.note = self._loss_note(old, new, missing, allowed=allow_loss)
                log.warning("%s", report.note)
                if not allow_loss:
                    ingestor.commit()  # what was written stays, durable, for the run that resumes it
                    report.seconds = round(time.monotonic() - start, 3)
                    return report
            record = version_record(self.store, new)
            if record is not None:
                self.store.set_record(
                    new, record.model_copy(update={"state": "complete"}).model_dump(mode="json")
                )
            ingestor.commit()
            if self.text is not None:
                # text_from is set where text is kept: the texts themselves need not be read
                pages = self.store.pages(new, Filter(finished=True), batch=1024)
                report.pages_with_text = sum(1 for _, p in pages if p.text_from in ("pdf", "ocr"))
            self.store.switch(self.collection, new)
            report.switched = True
        if settle > 0:
            time.sleep(settle)
            self._pass(old, new, ingestor, old_info, final=False)
            ingestor.commit()
        if drop_old:
            self.store.drop(old)
            report.dropped_old = True
        report.seconds = round(time.monotonic() - start, 3)
        return report

    def _unread(self, version: str) -> int:
        """How many of ``version``'s pages were indexed while OCR could not read them."""
        return sum(
            1
            for _, p in self.store.pages(version, Filter(finished=True), batch=1024)
            if p.text_from == "unread"
        )

    # -- the version built ----------------------------------------------------------------------------

    def _target_version(self, old: str) -> str:
        """The version an interrupted run with these settings was building from ``old``, else a new one."""
        for version in self.store.versions(self.collection):
            record = version_record(self.store, version)
            if record is None or record.state != "building":
                continue
            if (
                provably_same(record.embedding, self.info)
                and record.built_from == old
                and record.text == self.text
            ):
                log.info("resuming the reindex of %r into %s", self.collection, version)
                return version
            log.warning(
                "version %s of %r is an unfinished reindex with other settings: "
                "`docvec collections drop %s` removes it",
                *(version, self.collection, version),
            )
        record = new_record(self.info, self.model, building=True, built_from=old, text=self.text)
        version = self.store.create_version(
            self.collection,
            self.embedder.dim,
            record.model_dump(mode="json"),
            tokens=self.embedder.head_dim if self.info.multivector else None,
            text=self.text is not None,
        )
        log.info("building %s of %r from %s", version, self.collection, old)
        return version

    # -- passes ---------------------------------------------------------------------------------------

    def _documents(self, version: str) -> list[_Doc]:
        """The finished documents of ``version``, ordered by source path."""
        docs = []
        for doc_id, count in self.store.facet(version, "doc_id").items():
            flt = Filter(doc_ids=(doc_id,), finished=True)
            first = self.store.page(version, flt)
            if first is not None:
                docs.append(_Doc(doc_id, first, count))
        return sorted(docs, key=lambda d: (d.first.source, d.doc_id))

    def _pass(
        self, old: str, new: str, ingestor: Ingestor, old_info: EmbeddingInfo | None, *, final: bool
    ) -> list[_Doc]:
        """Bring every document of ``old`` that ``new`` lacks over; with ``final``, also remove from ``new``
        what was deleted from ``old``, and copy the tags and names changed there meanwhile. Returns the
        documents of ``old`` it read."""
        docs = self._documents(old)
        self.report.documents = max(self.report.documents, len(docs))
        # the documents to embed go to the ingest stage as jobs, which it groups across documents
        jobs = (
            job
            for done, doc in enumerate(docs)
            for job in self._document(doc, old, new, old_info, len(docs), done)
        )
        for job, result in ingestor.ingest_all(jobs):
            self._count(result, rendered=job.pages is None)
        self._tell(len(docs), len(docs), None, 0)
        if not final:
            return docs
        present = {d.doc_id: d for d in docs}
        for doc_id in set(self.store.facet(new, "doc_id")) - set(present):
            log.info("%s: deleted from %s meanwhile", doc_id, old)
            self.store.delete_where(new, Filter(doc_ids=(doc_id,)))
        for doc in docs:
            flt = Filter(doc_ids=(doc.doc_id,))
            mine = self.store.page(new, flt)
            if mine is None:
                continue
            changed = {
                f: getattr(doc.first, f)
                for f in ("source", "name", "tags")
                if getattr(mine, f) != getattr(doc.first, f)
            }
            if changed:
                self.store.set_payload(new, flt, changed)
        return docs

    def _missing(self, old: str, new: str, docs: list[_Doc]) -> dict[str, int]:
        """How many finished pages of each document of ``old`` (``docs``) ``new`` lacks, by source path;
        documents it holds whole are left out."""
        # the facets count every point, those of a document still being written too: a document they
        # show whole is whole, the others are counted exactly
        held = self.store.facet(new, "doc_id")
        missing: dict[str, int] = {}
        for doc in docs:
            if held.get(doc.doc_id, 0) >= doc.pages:
                continue
            flt = Filter(doc_ids=(doc.doc_id,), finished=True)
            lacking = self.store.count(old, flt) - self.store.count(new, flt)
            if lacking > 0:
                missing[doc.first.source] = missing.get(doc.first.source, 0) + lacking
        return missing

    def _loss_note(self, old: str, new: str, missing: dict[str, int], *, allowed: bool) -> str:
        """What ``new`` lacks of ``old`` in a sentence: the pages, of which documents (the first few), and
        what was done about it."""
        pages = sum(missing.values())
        listed = sorted(missing.items(), key=lambda item: (-item[1], item[0]))
        shown = ", ".join(f"{source} ({count})" for source, count in listed[:5])
        more = f" and {len(listed) - 5} more" if len(listed) > 5 else ""
        what = f"{counted(pages, 'page')} of {counted(len(missing), 'document')} of {old}: {shown}{more}"
        if allowed:
            return f"switched without {what} (allow_loss)"
        return (
            f"did not switch: {new} lacks {what}; {old} stays live and is kept. Run the reindex again once "
            f"the cause is fixed (it resumes, and tries those documents again), or accept the loss with "
            f"allow_loss (docvec reindex --allow-loss); `docvec collections drop {new}` removes the "
            f"unfinished version"
        )

    def _tell(self, total: int, done: int, doc: _Doc | None, page: int) -> None:
        if self.progress is None:
            return
        r = self.report
        so_far = IngestReport(
            pages_indexed=r.pages_embedded + r.pages_carried + r.pages_resumed, pages_failed=r.pages_lost
        )
        current = doc.first.source if doc is not None else None
        count = doc.pages if doc is not None else 0
        self.progress(IngestProgress(total, done, current, page, count, so_far))

    def _document(
        self,
        doc: _Doc,
        old: str,
        new: str,
        old_info: EmbeddingInfo | None,
        total: int,
        done: int,
    ) -> Iterator[Job]:
        """Bring one document over (see the module's docstring): carried over, or the job that embeds it
        again (its report comes later, from the ingest stage); nothing when an earlier run brought it.

        The renderer is the ingest stage's while it runs (its feed renders ahead), so the text of a job's
        pages is read in the job's stream; a document carried over reads its file's text only when every
        document is carried (the same vectors), and the ingest stage renders nothing then."""
        self._tell(total, done, doc, 0)
        report, first = self.report, doc.first
        if doc.doc_id in self._handled:  # by an earlier pass: the later ones bring over what is new
            return
        self._handled.add(doc.doc_id)
        # pages an interrupted run wrote: a document it finished is skipped, one it began goes on after them
        written = self.store.count(new, Filter(doc_ids=(doc.doc_id,)))
        if written and self.store.count(new, Filter(doc_ids=(doc.doc_id,), finished=True)):
            if written >= self.store.count(old, Filter(doc_ids=(doc.doc_id,), finished=True)):
                report.pages_resumed += written
                return
            # finished short by an earlier run (pages that failed): the ingest stage would take it as
            # whole, so it is written again, every page, for the pages that failed to get their chance
            log.info("%s: %d pages of %d, trying it again", first.source, written, doc.pages)
            self.store.delete_where(new, Filter(doc_ids=(doc.doc_id,)))
            written = 0
        report.pages_resumed += written
        source = Path(first.source)
        document = SourceDocument(
            path=source,
            doc_id=doc.doc_id,
            sha256=first.content_sha256,
            kind=first.kind,
            name=first.display_name,
            page_count=first.page_count,
        )
        tags = list(first.tags)
        ingested_at = first.ingested_at
        stored = sorted(
            (
                p
                for _, p in self.store.pages(
                    old, Filter(doc_ids=(doc.doc_id,), finished=True), batch=1024, with_text=True
                )
            ),
            key=lambda p: p.page,
        )

        def on_page(page: int, count: int) -> None:
            self._tell(total, done, doc, page)

        same_budget = old_info is not None and (old_info.min_pixels, old_info.max_pixels) == (
            self.info.min_pixels,
            self.info.max_pixels,
        )
        if old_info is not None and provably_same(old_info, self.info):
            self._carry(doc, old, new, old_info, same_budget, self._texts(document, stored), vanished=False)
            return
        images = self._stored_images(stored) if same_budget else None
        if images is not None:
            # the pages' text is read in the ingest stage's feed, which alone uses the renderer meanwhile
            yield Job(
                document,
                tags=tags,
                progress=on_page,
                pages=lambda first_page: self._stored_pages(
                    images, first_page, self._texts(document, stored)
                ),
                ingested_at=ingested_at,
            )
        elif self._unchanged(document):
            yield Job(document, tags=tags, progress=on_page, ingested_at=ingested_at)
        elif old_info is not None and self._can_carry(old_info):
            self._carry(doc, old, new, old_info, same_budget, self._texts(document, stored))
        else:
            report.vanished.append(str(source))
            report.pages_lost += len(stored)
            reason = (
                "its file is gone (or changed) and the model changed: its pages cannot be embedded again, "
                "and the old vectors do not fit the new model"
            )
            report.failures.append(IngestFailure(path=str(source), reason=reason))
            log.warning("%s: %s", source, reason)

    def _count(self, result: IngestReport, *, rendered: bool) -> None:
        self.report.pages_embedded += result.pages_indexed
        if rendered:
            self.report.pages_rendered += result.pages_indexed
        self.report.failures += result.failures

    # -- where pages come from --------------------------------------------------------------------------

    def _stored_images(self, stored: list[PagePayload]) -> list[tuple[int, Path]] | None:
        """Each page's stored image, or ``None`` when one is missing from the page store."""
        try:
            return [(p.page, self.pages.path(p.image)) for p in stored]
        except NotFoundError:
            return None

    @staticmethod
    def _stored_pages(
        images: list[tuple[int, Path]], first: int, texts: dict[int, ExtractedText]
    ) -> Generator[RenderedPage, None, None]:
        for number, path in images:
            if number >= first:
                found = texts.get(number)
                with Image.open(path) as img:
                    yield RenderedPage(
                        number=number,
                        image=img.convert("RGB"),
                        size_pt=None,
                        rotation=0,
                        text=found.text if found else None,
                        text_from=found.text_from if found else None,
                    )

    def _texts(self, document: SourceDocument, stored: list[PagePayload]) -> dict[int, ExtractedText]:
        """Each page's text and where it came from, for a new version with text: the old version's, when it
        kept text; else read from the document's file (text layer, or OCR) when it is there as indexed.
        Pages without text are left out; so is everything for a version without text."""
        if self.text is None:
            return {}
        kept: dict[int, ExtractedText] = {}
        if self._old_text is not None:
            kept = {
                p.page: ExtractedText(p.page, p.text, "ocr" if p.text_from == "ocr" else "pdf")
                for p in stored
                if p.text
            }
            unread = {p.page for p in stored if p.text_from == "unread"}
            if not unread:
                return kept
            # pages OCR could not read when they were indexed: read now (still unread where it cannot run)
            kept |= {n: ExtractedText(n, None, "unread") for n in unread}
            if self._ocr_missing() or not self._unchanged(document):
                return kept
        elif not self._unchanged(document):
            return {}
        info = DocumentInfo(document.path, document.kind, document.page_count or len(stored))
        found: dict[int, ExtractedText] = {}
        try:
            for item in self.parts.renderer.texts(info):
                if isinstance(item, PageFailure):
                    log.warning("%s: page %d: no text: %s", document.path, item.number, item.reason)
                elif (item.text and item.text_from) or item.text_from == "unread":
                    found[item.number] = item
        except RenderError as e:
            log.warning("%s: its text cannot be read: %s", document.path, e.reason)
        if self._old_text is None:
            return found
        return kept | {n: found.get(n, ExtractedText(n, None, None)) for n in kept if kept[n].text is None}

    def _ocr_missing(self) -> str | None:
        """Why OCR cannot run (``None``: it can, or it is off by the settings, which no page waits for)."""
        renderer = self.parts.renderer
        return None if renderer.ocr == "off" else renderer.ocr_missing

    @staticmethod
    def _unchanged(document: SourceDocument) -> bool:
        """Whether the document's file is still there with the content that was indexed."""
        try:
            return document.path.is_file() and sha256_of(document.path) == document.sha256
        except RenderError:
            return False

    def _can_carry(self, old_info: EmbeddingInfo) -> bool:
        """Whether the old version's vectors stand for pages of the new one: the same model, no larger a
        size, and token vectors (pooled alike) when the new version needs them."""
        tokens_fit = not self.info.multivector or (
            old_info.multivector and old_info.token_pool == self.info.token_pool
        )
        return same_model(old_info, self.info) and self.info.dim <= old_info.dim and tokens_fit

    def _carry(
        self,
        doc: _Doc,
        old: str,
        new: str,
        old_info: EmbeddingInfo,
        same_budget: bool,
        texts: dict[int, ExtractedText],
        *,
        vanished: bool = True,
    ) -> None:
        """The old vectors of a document, truncated to the new size, in the new version, with the pages'
        ``texts`` in a version with text; their payloads say what made them (the old page budget, when it
        differs). ``vanished``: the document's file is gone (the reason they are carried)."""
        dim = self.info.dim
        info = self.info if same_budget else truncated_info(old_info, dim, multivector=self.info.multivector)
        points = []
        for p in self.store.scroll(
            old, Filter(doc_ids=(doc.doc_id,), finished=True), with_vectors=True, batch=256
        ):
            vector = normalize(p.vector[None, :], dim)[0]
            page = PagePayload.model_validate(p.payload)
            found = texts.get(page.page)
            text, terms = kept_text(self.text, found.text if found else None)
            carried = page.model_copy(
                update={
                    "embedding": info,
                    "state": "complete",
                    "text": text,
                    "text_from": (
                        found.text_from
                        if found and (text is not None or found.text_from == "unread") and self.text
                        else None
                    ),
                }
            )
            tokens = p.tokens if self.info.multivector else None
            point = Point(
                point_id(doc.doc_id, page.page, info.key),
                vector,
                carried.model_dump(mode="json"),
                tokens,
                terms,
            )
            points.append(point)
        self.store.upsert(new, points)
        source = doc.first.source
        self.report.pages_carried += len(points)
        if vanished:
            self.report.vanished.append(source)
            log.info("%s: its file is gone; %d pages carried over from %s", source, len(points), old)
        else:
            log.info("%s: %d pages carried over from %s", source, len(points), old)
