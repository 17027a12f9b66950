"""Which model and settings made a collection's vectors, and the rule that keeps one collection from
mixing vectors of two models: vectors of different models (or sizes, or page budgets) live in one space by
accident only, so a search over them, or an ingest adding to them, returns meaningless hits."""

from __future__ import annotations

import hashlib
import json

from ._embed import Embedder
from ._errors import CollectionMismatchError
from ._records import EmbeddingInfo
from ._store import Store

__all__ = ["check_same_vectors", "embedding_info", "recorded_info"]


def embedding_info(embedder: Embedder) -> EmbeddingInfo:
    """What identifies the vectors ``embedder`` makes (model files, vector size, image bounds)."""
    fields = {
        "profile": embedder.profile.name,
        "model": embedder.files.language_model.name,
        "mmproj": embedder.files.mmproj.name,
        "dim": embedder.dim,
        "min_pixels": embedder.bounds.min_pixels,
        "max_pixels": embedder.bounds.max_pixels,
    }
    key = hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:16]
    return EmbeddingInfo(**fields, key=key)  # type: ignore[arg-type]


def recorded_info(store: Store, collection: str) -> EmbeddingInfo | None:
    """What made the vectors already in ``collection`` (read from one stored page), or ``None`` when it is
    empty or missing."""
    if collection not in store.collections():
        return None
    for _, payload in store.scroll(collection, batch=1):
        stored = payload.get("embedding")
        return EmbeddingInfo.model_validate(stored) if isinstance(stored, dict) else None
    return None


def _describe(info: EmbeddingInfo, *, pages: bool) -> str:
    text = f"{info.profile} ({info.model}, {info.dim}-d"
    return text + (f", pages at {info.min_pixels}..{info.max_pixels} pixels)" if pages else ")")


def check_same_vectors(
    recorded: EmbeddingInfo | None, mine: EmbeddingInfo, *, collection: str, where: str, for_search: bool
) -> None:
    """Refuse, with :class:`CollectionMismatchError`, to mix vectors of ``mine`` into a collection whose
    vectors ``recorded`` made.

    A search compares the model and the vector size (queries are text: the page budget does not change
    them); an ingest compares everything that makes page vectors, the vision encoder and the page budget
    included.
    """
    if recorded is None:
        return
    if for_search:
        same = (recorded.profile, recorded.model, recorded.dim) == (mine.profile, mine.model, mine.dim)
    else:
        same = recorded.key == mine.key
    if same:
        return
    what = "search" if for_search else "add to"
    raise CollectionMismatchError(
        f"collection {collection!r} at {where} holds vectors of {_describe(recorded, pages=not for_search)}; "
        f"these settings make vectors of {_describe(mine, pages=not for_search)}, which cannot {what} it. "
        f"Use the collection's model and settings (DOCVEC_MODEL, DOCVEC_EMBED__*), or another collection "
        f"(DOCVEC_COLLECTION) to index anew."
    )
