"""Versions of a collection as docvec sees them: each version's record (what made its vectors) and the list
`docvec collections list` shows. What fits a version (the model and settings it is served with) is
:mod:`._fit`'s.

The store keeps the versions and the pointer (see :mod:`docvec._store`); this module keeps what docvec
writes beside them.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from pathlib import Path

from pydantic import ValidationError

from .._records import EmbeddingInfo, TextIndex, VersionInfo, VersionRecord
from .._store import LAYOUT, Filter, Store

__all__ = [
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
    page = store.page(version, Filter(finished=True))
    return None if page is None else page.embedding


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
