"""What fits a version of a collection: the model, its settings, the kind of pages and the way of keeping the
pages' text that a version is served with, and that a reindex builds the next version with; and whether a
loaded model serves a version.

The rule everywhere: what the settings name explicitly (``DOCVEC_MODEL``, ``DOCVEC_EMBED__DIM``,
``DOCVEC_MULTIVECTOR``, ``DOCVEC_TEXT_STEMMER`` ...) wins, and the version's record fills in the rest, so
that after ``docvec reindex --dim 512`` a plain ``docvec search`` uses 512-d queries; a reindex's spec wins
over both. Each version's record is :mod:`._versions`'s, the rule that keeps vectors of two models apart
:mod:`._provenance`'s; this module is where they meet the settings.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from .._config import EmbedSettings, Settings
from .._errors import ConfigError, InputError
from .._model._embedder import Embedder, inspect_model
from .._records import EmbeddingInfo, ReindexSpec, TextIndex, VersionRecord
from .._text._terms import Analyzer
from ._provenance import embedding_info, fits

__all__ = [
    "Fit",
    "check_offered",
    "embed_changes",
    "fitting_settings",
    "new_text",
    "pages_info",
    "refusing",
    "reindex_fit",
    "serves",
    "target_text",
]


@dataclass(frozen=True)
class Fit:
    """What to open a collection with: the model, the embedder settings, and the kind of pages."""

    model: str
    embed: EmbedSettings
    multivector: bool
    token_pool: int


def fitting_settings(settings: Settings, record: VersionRecord | None, *, follow: bool) -> Fit:
    """The model, embedder settings and kind of pages to use for a collection whose live version has
    ``record``: the settings' explicit choices over the record's (see the module's docstring).

    With ``follow`` (the collection was switched to a new version while this process ran) the record wins
    outright: a server follows its collection to the new model.
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


def reindex_fit(settings: Settings, record: VersionRecord | None, spec: ReindexSpec) -> Fit:
    """What a reindex as ``spec`` asks builds the next version of a collection with, whose live version has
    ``record``: what the spec sets, else what fits the live version (:func:`fitting_settings`). For another
    model, the live version's vector size, page budget and kind of pages carry over where that model offers
    them, and give way to its own where it does not (:func:`_offered`)."""
    base = fitting_settings(settings, record, follow=False)
    fit = Fit(
        spec.model or base.model,
        base.embed.model_copy(update=embed_changes(spec)),
        base.multivector if spec.multivector is None else spec.multivector,
        base.token_pool if spec.token_pool is None else spec.token_pool,
    )
    if record is None or spec.model is None or spec.model == record.model:
        return fit
    return _offered(settings, spec, fit)


def _offered(settings: Settings, spec: ReindexSpec, fit: Fit) -> Fit:
    """``fit`` for a reindex to another model, which may not offer what the live version was built with
    (another family's vector sizes and image bounds): a size it does not give, or a page budget out of its
    bounds, gives way to the settings' own value (its default, unless set); what the settings or the spec
    name stays, for the model's open to refuse with its reason. Reads the model's headers only."""
    profile, width = inspect_model(fit.model, cache_dir=settings.cache_dir)
    named = settings.embed.model_fields_set | set(embed_changes(spec))
    own = {field: getattr(settings.embed, field) for field in ("dim", "min_pixels", "max_pixels")}
    update = {}
    if "dim" not in named and fit.embed.dim is not None and fit.embed.dim not in profile.dims(width):
        update["dim"] = own["dim"]
    try:
        profile.resolve(fit.embed.model_copy(update={"dim": None}), width)
    except ConfigError:
        update |= {field: own[field] for field in ("min_pixels", "max_pixels") if field not in named}
    multivector = fit.multivector
    if (
        "multivector" not in settings.model_fields_set
        and spec.multivector is None
        and not profile.multivector
    ):
        multivector = False  # a family without a head: its pages are single-vector ones
    return Fit(fit.model, fit.embed.model_copy(update=update), multivector, fit.token_pool)


def embed_changes(spec: ReindexSpec) -> dict[str, int]:
    """The embedder settings a reindex spec changes: its vector size and page budget, where it sets them."""
    return {key: value for key in ("dim", "max_pixels") if (value := getattr(spec, key)) is not None}


def check_offered(embedder: Embedder, spec: ReindexSpec) -> None:
    """Refuse, as ``embedder``'s model would when it opened with them (:func:`refusing` says how), a vector
    size or page budget ``spec`` asks for that the model does not offer; without loading anything."""
    with refusing(spec):
        embedder.profile.resolve(embedder.settings.model_copy(update=embed_changes(spec)), embedder.width)


@contextmanager
def refusing(spec: ReindexSpec) -> Iterator[None]:
    """Around a model's check of a reindex's settings: its refusal of a size or budget that ``spec`` asks
    for is the caller's to change, not a fault of the server's settings: an :class:`InputError` naming
    what it asked."""
    try:
        yield
    except ConfigError as e:
        changes = embed_changes(spec)
        if not changes:
            raise
        asked = ", ".join(f"{key}={value}" for key, value in changes.items())
        raise InputError(f"reindex with {asked}: {e}") from None


def pages_info(embedder: Embedder, fit: Fit | None) -> EmbeddingInfo:
    """What identifies the pages ``embedder`` makes for a version that ``fit`` fits (its kind of pages
    included)."""
    if fit is None:
        return embedding_info(embedder)
    return embedding_info(embedder, multivector=fit.multivector, token_pool=fit.token_pool)


def serves(embedder: Embedder, fit: Fit, record: VersionRecord | None) -> bool:
    """Whether ``embedder`` makes the pages of a version with ``record`` that ``fit`` fits (one without a
    record: any model serves it)."""
    return record is None or fits(record.embedding, pages_info(embedder, fit))


def new_text(settings: Settings) -> TextIndex | None:
    """How a new collection (or version) keeps its pages' text, as the settings ask; ``None`` for none."""
    return _settings_text(settings) if settings.text else None


def _settings_text(settings: Settings) -> TextIndex:
    """The settings' way of keeping text (whether or not they ask new collections to keep it)."""
    return TextIndex(analyzer=Analyzer(stemmer=settings.text_stemmer), max_chars=settings.text_max_chars)


def target_text(settings: Settings, live: TextIndex | None, wanted: bool | None) -> TextIndex | None:
    """How a reindexed version keeps its pages' text: none when ``wanted`` is False (or ``None`` and the
    live version keeps none); else the live version's way, except what the settings name explicitly
    (``DOCVEC_TEXT_STEMMER``, ``DOCVEC_TEXT_MAX_CHARS``), as for the model; the settings' way for a
    version that gets text anew."""
    if wanted is False or (wanted is None and live is None):
        return None
    fresh = _settings_text(settings)
    if live is None:
        return fresh
    explicit = settings.model_fields_set
    return live.model_copy(
        update={
            "analyzer": fresh.analyzer if "text_stemmer" in explicit else live.analyzer,
            "max_chars": fresh.max_chars if "text_max_chars" in explicit else live.max_chars,
        }
    )
