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
from ._versions import page_info, version_record

__all__ = ["check_same_vectors", "embedding_info", "recorded_info", "same_model", "truncated_info"]


def embedding_info(embedder: Embedder, *, multivector: bool = False, token_pool: int = 1) -> EmbeddingInfo:
    """What identifies the vectors ``embedder`` makes (model files, vector size, image bounds), and, with
    ``multivector``, the token vectors of its head (averaged ``token_pool`` at a time)."""
    fields: dict[str, object] = {
        "profile": embedder.profile.name,
        "model": embedder.files.language_model.name,
        "mmproj": embedder.files.mmproj.name,
        "dim": embedder.dim,
        "min_pixels": embedder.bounds.min_pixels,
        "max_pixels": embedder.bounds.max_pixels,
    }
    if multivector:
        fields |= {"multivector": True, "token_pool": token_pool}
    return _with_key(fields)


def _with_key(fields: dict[str, object]) -> EmbeddingInfo:
    # the multi-vector fields count only when set: every single-vector key stays what it was before them
    hashed = {
        k: v for k, v in fields.items() if k not in ("multivector", "token_pool") or fields.get("multivector")
    }
    key = hashlib.sha256(json.dumps(hashed, sort_keys=True).encode()).hexdigest()[:16]
    return EmbeddingInfo(**fields, key=key)  # type: ignore[arg-type]


def truncated_info(info: EmbeddingInfo, dim: int, *, multivector: bool | None = None) -> EmbeddingInfo:
    """What describes ``info``'s vectors truncated to their first ``dim`` numbers (and re-normalised):
    exactly the vectors the same model makes at that size (Matryoshka); with ``multivector`` False, without
    their token vectors."""
    fields = info.model_dump(exclude={"key"}) | {"dim": dim}
    if multivector is False:
        fields |= {"multivector": False, "token_pool": 1}
    return _with_key(fields)


def same_model(a: EmbeddingInfo, b: EmbeddingInfo) -> bool:
    """Whether ``a`` and ``b`` were made by the same model files (whatever the size and page budget)."""
    return (a.profile, a.model, a.mmproj) == (b.profile, b.model, b.mmproj)


def recorded_info(store: Store, collection: str) -> EmbeddingInfo | None:
    """What made the vectors of ``collection``'s live version (or of a version named directly): its
    record, or one of its pages for a version made before records; ``None`` when it has neither."""
    live = store.live(collection)
    if live is None:
        return None
    record = version_record(store, live)
    return record.embedding if record is not None else page_info(store, live)


def _describe(info: EmbeddingInfo, *, pages: bool) -> str:
    text = f"{info.profile} ({info.model}, {info.dim}-d"
    if info.multivector:
        text += ", multi-vector" + (f" pooled by {info.token_pool}" if info.token_pool > 1 else "")
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
        f"Use the collection's model and settings (DOCVEC_MODEL, DOCVEC_EMBED__*), rebuild the collection "
        f"with these settings (`docvec reindex`, which keeps it searchable meanwhile), or index anew into "
        f"another collection (DOCVEC_COLLECTION)."
    )
