"""Versions of a collection as docvec sees them: each version's record (what made its vectors), the model
settings that fit a version, and the list `docvec collections list` shows.

The store keeps the versions and the pointer (see :mod:`docvec._store`); this module keeps what docvec
writes beside them.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from pydantic import ValidationError

from .._config import EmbedSettings, Settings
from .._records import EmbeddingInfo, TextIndex, VersionInfo, VersionRecord
from .._store import LAYOUT, Filter, Store

__all__ = [
    "Fit",
    "fitting_settings",
    "list_versions",
    "model_ref",
    "new_record",
    "page_info",
    "store_format",
    "text_index",
    "version_record",
]

log = logging.getLogger("docvec")


def version_record(store: Store, version: str) -> VersionRecord | None:
    """The record of ``version``, ``None`` for a version made before records (or one that is unreadable,
    which is logged: its pages still say what made them)."""
    raw = store.record(version)
    if raw is None:
        return None
    try:
        return VersionRecord.model_validate(raw)
    except ValidationError as e:
        log.warning("version %r: its record is not readable (%s); reading its pages instead", version, e)
        return None


def text_index(store: Store, version: str) -> TextIndex | None:
    """How ``version`` keeps its pages' text, from its record; ``None`` when it keeps none."""
    record = version_record(store, version)
    if record is None or record.text is None or not store.has_text(version):
        return None
    return record.text


def page_info(store: Store, version: str) -> EmbeddingInfo | None:
    """What made the vectors of ``version``, read from one of its pages (``None`` when it has none)."""
    for _, payload in store.scroll(version, Filter(finished=True), batch=1):
        stored = payload.get("embedding")
        return EmbeddingInfo.model_validate(stored) if isinstance(stored, dict) else None
    return None


def model_ref(model: str) -> str:
    """``model`` as a record keeps it: a folder or file that exists here as an absolute path (so that a
    process started elsewhere finds it), a registry name as it is."""
    parts = model.split(",")
    resolved = [str(Path(p).expanduser().resolve()) if Path(p).expanduser().exists() else p for p in parts]
    return ",".join(resolved)


def new_record(
    info: EmbeddingInfo,
    model: str,
    *,
    building: bool,
    built_from: str | None = None,
    text: TextIndex | None = None,
) -> VersionRecord:
    """The record of a version about to be made with the vectors ``info`` describes, keeping its pages'
    text as ``text`` says (``None``: none)."""
    return VersionRecord(
        text=text,
        state="building" if building else "complete",
        embedding=info,
        model=model_ref(model),
        created_at=datetime.now(UTC),
        built_from=built_from,
        store_format=LAYOUT.format,
    )


def store_format(record: VersionRecord | None) -> int:
    """The storage format of a version with ``record`` (see :class:`docvec._store._layout.Layout`): the
    recorded one, else 2 (versions were recorded without it before format 3)."""
    return record.store_format if record is not None and record.store_format is not None else 2


@dataclass(frozen=True)
class Fit:
    """What to open a collection with: the model, the embedder settings, and the kind of pages."""

    model: str
    embed: EmbedSettings
    multivector: bool
    token_pool: int


def fitting_settings(settings: Settings, record: VersionRecord | None, *, follow: bool) -> Fit:
    """The model, embedder settings and kind of pages to use for a collection whose live version has
    ``record``.

    What the settings name explicitly (``DOCVEC_MODEL``, ``DOCVEC_EMBED__DIM``, ``DOCVEC_MULTIVECTOR`` ...)
    wins, and the record fills in the rest: after ``docvec reindex --dim 512`` a plain ``docvec search``
    uses 512-d queries. With ``follow`` (the collection was switched to a new version while this process
    ran) the record wins outright: a server follows its collection to the new model.
    """
    if record is None:
        return Fit(settings.model, settings.embed, settings.multivector, settings.token_pool)
    explicit = set() if follow else settings.model_fields_set
    explicit_embed = set() if follow else settings.embed.model_fields_set
    model = settings.model if "model" in explicit else record.model
    info = record.embedding
    update = {
        field: getattr(info, field)
        for field in ("dim", "min_pixels", "max_pixels")
        if field not in explicit_embed
    }
    multivector = settings.multivector if "multivector" in explicit else info.multivector
    pool = settings.token_pool if "token_pool" in explicit else info.token_pool
    return Fit(model, settings.embed.model_copy(update=update), multivector, pool)


def list_versions(store: Store, collection: str) -> list[VersionInfo]:
    """Every version of ``collection``, oldest first, with its model, size, pages and whether it is live."""
    live = store.live(collection)
    out = []
    for version in store.versions(collection):
        record = version_record(store, version)
        info = record.embedding if record else page_info(store, version)
        out.append(
            VersionInfo(
                collection=collection,
                version=version,
                live=version == live,
                state=record.state if record else "complete",
                model=record.model if record else (info.model if info else None),
                profile=info.profile if info else None,
                dim=info.dim if info else None,
                max_pixels=info.max_pixels if info else None,
                text=record is not None and record.text is not None,
                pages=store.count(version, Filter(finished=True)),
                created_at=record.created_at if record else None,
            )
        )
    return out
