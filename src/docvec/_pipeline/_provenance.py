"""Which model and settings made a collection's vectors, and the rule that keeps one collection from
mixing vectors of two models: vectors of different models (or sizes, or page budgets) live in one space by
accident only, so a search over them, or an ingest adding to them, returns meaningless hits.

A model is known by its files' names and by their contents (:class:`~docvec._records.ModelFingerprint`):
files of the same names with other weights (another seed, a fine-tune, a re-conversion) are another model.
Vectors recorded before docvec kept fingerprints are known by their names only: they are taken to fit a
model of the same names, but never to be provably the same (a reindex rebuilds them).
"""

from __future__ import annotations

import hashlib
import json

from .._errors import CollectionMismatchError
from .._model._embedder import Embedder
from .._records import EmbeddingInfo
from .._store import Store
from ._versions import page_info, version_record

__all__ = [
    "check_same_vectors",
    "embedding_info",
    "fits",
    "provably_same",
    "recorded_info",
    "same_model",
    "truncated_info",
]


def embedding_info(embedder: Embedder, *, multivector: bool = False, token_pool: int = 1) -> EmbeddingInfo:
    """What identifies the vectors ``embedder`` makes (model files, vector size, image bounds), and, with
    ``multivector``, the token vectors of its head (averaged ``token_pool`` at a time). A late-interaction
    model's pages always keep them: its token vectors are what it gives, its single vector only their mean
    (:attr:`docvec._model._profiles.ModelProfile.late_interaction`)."""
    multivector = multivector or embedder.profile.late_interaction
    fields: dict[str, object] = {
        "profile": embedder.profile.name,
        "model": embedder.files.language_model.name,
        "mmproj": embedder.files.mmproj.name,
        "dim": embedder.dim,
        "min_pixels": embedder.bounds.min_pixels,
        "max_pixels": embedder.bounds.max_pixels,
        "fingerprint": embedder.fingerprint,
    }
    if multivector:
        fields |= {"multivector": True, "token_pool": token_pool}
    return _with_key(fields)


def _with_key(fields: dict[str, object]) -> EmbeddingInfo:
    # the multi-vector fields count only when set: every single-vector key stays what it was before them;
    # the fingerprint never does (a key recorded before fingerprints stays the same), it is compared apart
    hashed = {
        k: v
        for k, v in fields.items()
        if k != "fingerprint" and (k not in ("multivector", "token_pool") or fields.get("multivector"))
    }
    key = hashlib.sha256(json.dumps(hashed, sort_keys=True).encode()).hexdigest()[:16]
    return EmbeddingInfo(**fields, key=key)  # type: ignore[arg-type]


def truncated_info(info: EmbeddingInfo, dim: int, *, multivector: bool | None = None) -> EmbeddingInfo:
    """What describes ``info``'s vectors truncated to their first ``dim`` numbers (and re-normalised):
    exactly the vectors the same model makes at that size (Matryoshka); with ``multivector`` False, without
    their token vectors."""
    fields = info.model_dump(exclude={"key"}) | {"dim": dim, "fingerprint": info.fingerprint}
    if multivector is False:
        fields |= {"multivector": False, "token_pool": 1}
    return _with_key(fields)


def _fingerprints_agree(a: EmbeddingInfo, b: EmbeddingInfo, parts: tuple[str, ...]) -> bool:
    """Whether the files ``parts`` of ``a`` and ``b`` have the same contents, as far as both recorded them
    (an unrecorded fingerprint does not disagree)."""
    if a.fingerprint is None or b.fingerprint is None:
        return True
    return all(getattr(a.fingerprint, p) == getattr(b.fingerprint, p) for p in parts)


def same_model(a: EmbeddingInfo, b: EmbeddingInfo) -> bool:
    """Whether ``a`` and ``b`` were made by the same model files, names and contents (whatever the size and
    page budget): page vectors of one stand for those of the other."""
    names = (a.profile, a.model, a.mmproj) == (b.profile, b.model, b.mmproj)
    return names and _fingerprints_agree(a, b, ("model", "mmproj"))


def fits(recorded: EmbeddingInfo, mine: EmbeddingInfo) -> bool:
    """Whether pages ``mine`` describes may sit beside those ``recorded`` describes: the same settings, and
    files whose contents do not differ as far as both recorded them."""
    return recorded.key == mine.key and _fingerprints_agree(recorded, mine, _page_parts(recorded))


def provably_same(recorded: EmbeddingInfo | None, mine: EmbeddingInfo) -> bool:
    """Whether ``recorded`` provably describes the very vectors ``mine`` would make: the same settings and
    the same files by content (a version recorded without fingerprints is not provably the same)."""
    if recorded is None or recorded.fingerprint is None or mine.fingerprint is None:
        return False
    return fits(recorded, mine)


def _page_parts(info: EmbeddingInfo) -> tuple[str, ...]:
    """The files that make ``info``'s page vectors: the head only where pages keep token vectors."""
    return ("model", "mmproj", "head") if info.multivector else ("model", "mmproj")


def recorded_info(store: Store, collection: str) -> EmbeddingInfo | None:
    """What made the vectors of ``collection``'s live version (or of a version named directly): its
    record, or one of its pages for a version made before records; ``None`` when it has neither."""
    live = store.live(collection)
    if live is None:
        return None
    record = version_record(store, live)
    return record.embedding if record is not None else page_info(store, live)


def _describe(info: EmbeddingInfo, *, pages: bool, fingerprint: bool = True) -> str:
    text = info.model
    if fingerprint and info.fingerprint is not None and info.fingerprint.model:
        text += f" [{info.fingerprint.model}]"
    text += f" ({info.profile} family, {info.dim}-d"
    if info.multivector:
        text += ", multi-vector" + (f" pooled by {info.token_pool}" if info.token_pool > 1 else "")
    return text + (f", pages at {info.min_pixels}..{info.max_pixels} pixels)" if pages else ")")


def check_same_vectors(
    recorded: EmbeddingInfo | None,
    mine: EmbeddingInfo,
    *,
    collection: str,
    where: str,
    for_search: bool,
    names: tuple[str, str] | None = None,
) -> None:
    """Refuse, with :class:`CollectionMismatchError`, to mix vectors of ``mine`` into a collection whose
    vectors ``recorded`` made.

    A search compares the model and the vector size (queries are text: the page budget does not change
    them); an ingest compares everything that makes page vectors, the vision encoder and the page budget
    included. ``names``: the collection's model and this one as the user named them (a registry name, a
    folder), when known: the message then names them so, and gives the one fix.
    """
    if recorded is None:
        return
    if for_search:
        # queries are text: the language model (and, on token vectors, the head) makes them
        parts = ("model", "head") if recorded.multivector else ("model",)
        same = (recorded.profile, recorded.model, recorded.dim) == (mine.profile, mine.model, mine.dim)
        same = same and _fingerprints_agree(recorded, mine, parts)
    else:
        same = fits(recorded, mine)
    if same:
        return
    what = "search" if for_search else "add to"
    # the files' hashes tell two models apart only where their files have the same names
    hashes = recorded.model == mine.model
    theirs = _describe(recorded, pages=not for_search, fingerprint=hashes)
    ours = _describe(mine, pages=not for_search, fingerprint=hashes)
    if names is not None and names[0] != names[1]:
        raise CollectionMismatchError(
            f"collection {collection!r} at {where} was made with the model {names[0]!r}: {theirs}; the model "
            f"setting names {names[1]!r}: {ours}, which cannot {what} it. Unset the model setting "
            f"(DOCVEC_MODEL: a collection's own model is used when none is named) or set it to {names[0]!r}; "
            f"to move the collection to {names[1]!r} instead: `docvec reindex --model {names[1]}`."
        )
    raise CollectionMismatchError(
        f"collection {collection!r} at {where} holds vectors of {theirs}; these settings make vectors of "
        f"{ours}, which cannot {what} it. Use the collection's model and settings (DOCVEC_MODEL, "
        "DOCVEC_EMBED__*), rebuild the collection with these settings (`docvec reindex`, which keeps it "
        "searchable meanwhile), or index anew into another collection (DOCVEC_COLLECTION)."
    )
