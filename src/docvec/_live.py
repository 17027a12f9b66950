"""The live version of a collection, and the models and renderer that fit it: what :class:`docvec.Index`'s
verbs read and write, kept apart from the verbs themselves.

A collection's name points at one live version (see :mod:`docvec._store`); a reindex, here or in another
process, may switch it. :class:`LiveVersion` looks the live version up (every call on the embedded store,
every :data:`RESOLVE_EVERY` seconds on a server), loads the model on first use with the settings that fit
that version (:mod:`docvec._pipeline._fit`), follows a switch to a version another model or size made,
keeps the ingest stage for the version writes go to, and builds the next version with a reindex, switching
to its model with it. A model it replaces is closed once its call in progress ends; a search that still
holds it gets a :class:`~docvec.ModelError` and asks again for the one that is live now. It owns the
reranker too, loaded on first use.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from typing import Any

from ._config import TEXT_MAX_CHARS, EmbedSettings, Settings
from ._errors import CollectionNotFoundError, ConflictError, DocvecError
from ._fileio import MB
from ._model import Embedder, Reranker, resolve_model
from ._model._registry import reranker_names
from ._pipeline._fit import (
    Fit,
    check_offered,
    embed_changes,
    fitting_settings,
    new_text,
    pages_info,
    refusing,
    reindex_fit,
    serves,
    target_text,
)
from ._pipeline._ingest import Ingestor, ProgressFn
from ._pipeline._parts import Parts
from ._pipeline._provenance import check_same_vectors, embedding_info, recorded_info
from ._pipeline._reindex import Reindexer
from ._pipeline._versions import new_record, text_index, version_record
from ._records import ReindexReport, ReindexSpec, TextIndex
from ._render import Renderer
from ._store import PageStore, Store

__all__ = ["RESOLVE_EVERY", "LiveVersion"]

log = logging.getLogger("docvec")

#: With a Qdrant server, another machine may switch a collection to a new version: the live version is
#: looked up again when its last look is this many seconds old (the embedded store: every time).
RESOLVE_EVERY = 2.0


class LiveVersion:
    """The live version of ``settings.collection`` in ``store``, and the models and renderer that fit it.

    ``embedder``, when given, is used for every version (the caller's model: the checks say when it does
    not fit) and left open for its owner; otherwise models are loaded as versions need them and closed by
    :meth:`close`, as the reranker is. Thread-safe.
    """

    def __init__(
        self, settings: Settings, store: Store, pages: PageStore, *, embedder: Embedder | None = None
    ) -> None:
        self.settings = settings
        self.collection = settings.collection
        self.store = store
        self.pages = pages
        self._owns_model = embedder is None
        self._embedder = embedder  # what searches and ingests use (maybe a view of _model)
        self._model = embedder  # what holds the loaded model
        self._embedder_version: str | None = None  # the version the embedder was chosen for
        self._fit: Fit | None = None  # what the live version asks for (model, kind of pages)
        self._ingestor: Ingestor | None = None
        self._renderer: Renderer | None = None
        self._searched: str | None = None  # the version whose vectors were found to fit the model
        self._live: str | None = None
        self._live_at = 0.0
        self._texts: dict[str, TextIndex | None] = {}  # each version's text index, read once
        self._reranker: Reranker | None = None  # loaded on the first search that reranks
        self._model_lock = threading.Lock()
        self._version_lock = threading.Lock()
        self._reranker_lock = threading.Lock()  # a reranker loading holds up no search without one

    # -- the version -------------------------------------------------------------------------------

    def version(self, *, refresh: bool = False) -> str | None:
        """The live version (``None`` when nothing was indexed yet), looked up again when ``refresh`` or
        when the last look is older than the store allows (see the module's docstring)."""
        every = RESOLVE_EVERY if self.store.backend.resolves_aliases else 0.0
        now = time.monotonic()
        with self._version_lock:
            if refresh or self._live is None or now - self._live_at >= every:
                live = self.store.live(self.collection)
                self._live_at = now
                if live != self._live and self._live is not None:
                    log.info("collection %r now reads %s (was %s)", self.collection, live, self._live)
                self._live = live
            return self._live

    def text(self, version: str) -> TextIndex | None:
        """How ``version`` keeps its pages' text (its record's), ``None`` when it keeps none."""
        if version not in self._texts:
            found = text_index(self.store, version)
            with self._version_lock:
                self._texts[version] = found
        return self._texts[version]

    # -- the model ---------------------------------------------------------------------------------

    def embedder(self) -> Embedder:
        """The model that fits the live version, loaded on first use; after a switch to a version another
        model (or size) made, that one."""
        version = self.version()
        with self._model_lock:
            current = self._embedder
            if current is not None and self._embedder_version == version and self._fit is not None:
                return current
            record = version_record(self.store, version) if version is not None else None
            fit = fitting_settings(
                self.settings, record, follow=current is not None and self._fit is not None
            )
            self._fit = fit
            if current is not None and not self._owns_model:
                self._embedder_version = version
                return current
            if current is not None and serves(current, fit, record):
                self._embedder_version = version
                return current
            self._use(self._load(fit.model, fit.embed), version)
            assert self._embedder is not None
            return self._embedder

    def model(self) -> str:
        """The model the live version is served with, as named (by the settings, or by the version's
        record when the settings name none)."""
        self.embedder()
        assert self._fit is not None
        return self._fit.model

    def for_search(self, version: str) -> Embedder:
        """The model, checked once per version to make the query vectors ``version``'s pages were made for
        (:class:`~docvec.CollectionMismatchError` otherwise)."""
        embedder = self.embedder()
        if self._searched != version:
            record = version_record(self.store, version)
            assert self._fit is not None  # set by embedder()
            check_same_vectors(
                recorded_info(self.store, version),
                embedding_info(embedder),
                collection=self.collection,
                where=self.store.where,
                for_search=True,
                names=(record.model, self._fit.model) if record is not None and self._owns_model else None,
            )
            self._searched = version
        return embedder

    def reranker(self) -> Reranker:
        """The reranker (``settings.rerank_model``), loaded once, on first use, with the embedder's threads
        and GPU settings; :class:`~docvec.ConflictError` when the settings name none."""
        with self._reranker_lock:
            if self._reranker is None:
                model = self.settings.rerank_model
                if not model:
                    name = reranker_names()[0]
                    raise ConflictError(
                        f"this index has no reranker: set DOCVEC_RERANK_MODEL (e.g. {name}, after `docvec "
                        f"models pull {name}`) to rerank searches"
                    )
                log.info("loading the reranker %s", model)
                self._reranker = Reranker.open(
                    model,
                    self.settings.embed,
                    max_pixels=self.settings.rerank_max_pixels,
                    cache_dir=self.settings.cache_dir,
                    decode_budget=self.settings.render.max_memory_mb * MB,
                )
            return self._reranker

    def _model_name(self, embedder: Embedder) -> str:
        """What a new version's record names as its model, for later processes to load: the model setting
        where it names ``embedder``'s files; else (a caller's model the setting does not name) its files."""
        if self._owns_model:
            return self.settings.model
        with contextlib.suppress(DocvecError):
            if resolve_model(self.settings.model, cache_dir=self.settings.cache_dir)[0] == embedder.files:
                return self.settings.model
        return f"{embedder.files.language_model},{embedder.files.mmproj}"

    def _load(self, model: str, embed: EmbedSettings) -> Embedder:
        """The embedder for ``model`` with ``embed``: a view of the loaded model when only the vector size
        differs, else the model loaded anew. The caller holds the model lock."""
        cache = self.settings.cache_dir
        current = self._model
        if current is not None and self._owns_model:
            files = resolve_model(model, cache_dir=cache)[0]
            dim, bounds = current.profile.resolve(embed, current.width)
            if files == current.files and bounds == current.bounds:
                return current if dim == current.dim else current.with_dim(dim)
        log.info("loading the model %s", model)
        budget = self.settings.render.max_memory_mb * MB
        return Embedder.open(model, embed, cache_dir=cache, decode_budget=budget)

    def _use(self, embedder: Embedder, version: str | None) -> None:
        """Make ``embedder`` the model (the model lock held); the one it replaces is closed once its call in
        progress ends."""
        if not embedder.is_view and embedder is not self._model:
            if self._model is not None and self._owns_model:
                self._model.close()
            self._model = embedder
        self._embedder = embedder
        self._embedder_version = version
        self._ingestor = None

    # -- writing -----------------------------------------------------------------------------------

    def ingest_stage(self) -> Ingestor:
        """The ingest stage for the live version (created, as the collection's first version, when there
        is none). The caller holds the index's write lock, so that a reindex cannot switch under it."""
        embedder = self.embedder()
        with self._model_lock:
            version = self.version()
            info = pages_info(embedder, self._fit)
            if version is None:
                record = new_record(
                    info, self._model_name(embedder), building=False, text=new_text(self.settings)
                )
                self.store.ensure_collection(
                    self.collection,
                    embedder.dim,
                    record.model_dump(mode="json"),
                    tokens=embedder.head_dim if info.multivector else None,
                    text=record.text is not None,
                )
                version = self.version(refresh=True)
                assert version is not None
            ingestor = self._ingestor
            if ingestor is None or ingestor.collection != version or ingestor.embedder is not embedder:
                text = self.text(version)
                parts = Parts(self.store, self.pages, self._renderer_for(embedder, text), embedder)
                ingestor = Ingestor(
                    parts,
                    collection=version,
                    multivector=info.multivector,
                    token_pool=info.token_pool,
                    text=text,
                )
                self._ingestor = ingestor
            return ingestor

    def _renderer_for(self, embedder: Embedder, text: TextIndex | None) -> Renderer:
        """The render workers, rendering at ``embedder``'s page budget and reading pages' text for a
        version that keeps it (started again when either changes)."""
        current = self._renderer
        fits = (
            current is not None
            and current.target_pixels == embedder.bounds.max_pixels
            and current.text == (text is not None)
            and (text is None or current.text_limit == text.max_chars)
        )
        if current is None or not fits:
            if current is not None:
                current.close()
            current = self._renderer = _new_renderer(self.settings, embedder, text)
        return current

    # -- the next version --------------------------------------------------------------------------

    def reindex(
        self,
        spec: ReindexSpec,
        *,
        write_lock: contextlib.AbstractContextManager[Any],
        settle: float | None = None,
        progress: ProgressFn | None = None,
    ) -> ReindexReport:
        """Build the next version as ``spec`` asks (:func:`~docvec._pipeline._fit.reindex_fit`) from the
        live one with the :class:`~docvec._pipeline._reindex.Reindexer`, and serve it with its model once it
        is switched to (see :meth:`docvec.Index.reindex`). ``write_lock`` is the index's writers' lock, held
        for the last pass; ``settle`` (default: twice the time other processes take to see a switch on a
        Qdrant server) how long to wait for them after it."""
        version = self.version(refresh=True)
        if version is None:
            raise CollectionNotFoundError(
                f"nothing is indexed in collection {self.collection!r} at {self.store.where}: "
                "nothing to reindex"
            )
        fit = reindex_fit(self.settings, version_record(self.store, version), spec)
        text = target_text(self.settings, self.text(version), spec.text)
        with refusing(spec), self._model_lock:
            target = self._load(fit.model, fit.embed)
        renderer = _new_renderer(self.settings, target, text)
        if settle is None:
            settle = 2 * RESOLVE_EVERY if self.store.backend.resolves_aliases else 0.0
        try:
            report = Reindexer(
                Parts(self.store, self.pages, renderer, target),
                collection=self.collection,
                model=fit.model,
                multivector=fit.multivector,
                token_pool=fit.token_pool,
                text=text,
                progress=progress,
            ).run(write_lock=write_lock, settle=settle, drop_old=spec.drop_old, allow_loss=spec.allow_loss)
        except BaseException:
            self._discard(target)
            raise
        finally:
            renderer.close()
        if report.switched:
            self._adopt(target, fit)
        else:
            self._discard(target)
        return report

    def check_reindex(self, spec: ReindexSpec) -> None:
        """Refuse at once, as :meth:`reindex` would before any work, a ``spec`` that keeps the model and asks
        for a vector size or page budget it does not offer (:func:`~docvec._pipeline._fit.check_offered`),
        without loading another model."""
        if embed_changes(spec) and (spec.model is None or spec.model == self.model()):
            check_offered(self.embedder(), spec)

    def _adopt(self, embedder: Embedder, fit: Fit) -> None:
        """Make ``embedder`` (from :meth:`_load`) the model, for the live version as it is now (a reindex
        switched to a version it made)."""
        version = self.version(refresh=True)
        with self._model_lock:
            self._fit = fit
            self._use(embedder, version)

    def _discard(self, embedder: Embedder) -> None:
        """Close ``embedder`` (from :meth:`_load`) unless it is, or is a view of, the model in use."""
        if not embedder.is_view and embedder is not self._model:
            embedder.close()

    # -- lifetime ----------------------------------------------------------------------------------

    def close(self) -> None:
        """Stop the render workers, free the model (unless it was passed in) and the reranker."""
        try:
            if self._renderer is not None:
                self._renderer.close()
        finally:
            if self._owns_model and self._model is not None:
                self._model.close()
            if self._reranker is not None:
                self._reranker.close()


def _new_renderer(settings: Settings, embedder: Embedder, text: TextIndex | None = None) -> Renderer:
    """Render workers for ``embedder``'s page budget, with the render settings; reading each page's text
    (and OCR as ``settings.ocr`` says) for a version with ``text``."""
    render = settings.render
    return Renderer(
        workers=render.workers,
        target_pixels=embedder.bounds.max_pixels,
        timeout_s=render.timeout_s,
        memory_limit=render.max_memory_mb * MB,
        text=text is not None,
        ocr=settings.ocr,
        text_limit=text.max_chars if text is not None else TEXT_MAX_CHARS,
    )
