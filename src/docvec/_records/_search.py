"""What a search takes and gives: the search modes, the filter (one vocabulary for the CLI, GET and
POST /search) and a hit."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_serializer,
)

from .._errors import InputError
from .._text._snippet import Snippet
from ._rules import (
    DOC_ID_PATTERN,
    TAG_KEY_PATTERN,
    TAG_VALUE_PATTERN,
    check_tags_mapping,
    display_name,
    parse_tag,
    parse_tags,
    tag_dict,
)

__all__ = ["FILTER_KEYS", "Hit", "SearchFilter", "SearchMode"]


#: How a search scores pages (see docvec._pipeline._search.search): by the page's look (dense, multi,
#: hybrid), by keywords in its text (text), or both fused (``dense+text`` and the like); ``auto`` picks
#: hybrid on a multi-vector collection, dense otherwise, fused with text on a collection with text.
SearchMode = Literal["dense", "multi", "hybrid", "text", "dense+text", "multi+text", "hybrid+text"]

#: The keys ``--filter`` and ``GET /search`` take, and what each means.
FILTER_KEYS = {
    "doc_id": "only this document (32 hex digits)",
    "source": "only documents read from this file, or from under this folder",
    "tag": "only pages tagged key=value (repeatable: every one must hold)",
}


class SearchFilter(BaseModel):
    """Which pages a search considers: one document, a file or folder they were read from, and tags.

    Every given condition must hold, every tag included; an empty filter (the default) matches every page.
    The same three conditions go by the same names everywhere: ``docvec search --filter doc_id=...
    --filter source=... --filter tag=key=value``, ``GET /search?doc_id=...&source=...&tag=key=value``, and
    ``POST /search`` with ``{"filter": {"doc_id": ..., "source": ..., "tags": {"key": "value"}}}``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    doc_id: str | None = Field(None, pattern=DOC_ID_PATTERN, description="Only this document.")
    source: str | None = Field(
        None,
        min_length=1,
        max_length=4096,
        pattern=r"^[^\x00]+$",  # no path holds a NUL
        validation_alias=AliasChoices("source", "source_prefix"),
        description=(
            "Only documents read from this file, or from under this folder (whole path components: "
            "/docs/a matches /docs/a/x.pdf, not /docs/ab.pdf)."
        ),
    )
    tags: Annotated[dict[str, str] | None, AfterValidator(check_tags_mapping)] = Field(
        None,
        description="Only pages tagged key=value (as given to `docvec ingest --tag`), all of them.",
        # docvec's tag rule (checked by check_tags_mapping), stated in the schema
        json_schema_extra={
            "anyOf": [
                {
                    "type": "object",
                    "propertyNames": {"pattern": TAG_KEY_PATTERN},
                    "additionalProperties": {"type": "string", "pattern": TAG_VALUE_PATTERN},
                },
                {"type": "null"},
            ]
        },
    )

    @classmethod
    def parse(cls, items: Iterable[str]) -> SearchFilter:
        """A filter from ``key=value`` strings (``--filter``, ``GET /search``): ``doc_id=ID``,
        ``source=PATH`` (made absolute like the stored sources) and ``tag=KEY=VALUE``; :class:`InputError`
        for an unknown key, a malformed item or a condition given twice."""
        found: dict[str, str] = {}
        tags: dict[str, str] = {}
        for item in items:
            key, sep, value = item.partition("=")
            key, value = key.strip(), value.strip()
            if not sep or not key or not value:
                raise InputError(f"filter {item!r} is not of the form key=value")
            if key not in FILTER_KEYS:
                known = "; ".join(f"{k}=: {what}" for k, what in FILTER_KEYS.items())
                raise InputError(f"filter {item!r}: unknown key {key!r} (known: {known})")
            if key == "tag":
                tag_key, tag_value = parse_tag(value)
                if tags.get(tag_key, tag_value) != tag_value:
                    # a page has one value per key: asking for two can match nothing
                    raise InputError(
                        f"filter tag {tag_key} given twice ({tags[tag_key]!r} and {tag_value!r})"
                    )
                tags[tag_key] = tag_value
                continue
            if key == "source":
                value = os.path.abspath(os.path.expanduser(value))
            if found.get(key, value) != value:
                raise InputError(f"filter {key} given twice ({found[key]!r} and {value!r})")
            found[key] = value
        try:
            return cls(doc_id=found.get("doc_id"), source=found.get("source"), tags=tags or None)
        except ValidationError as e:
            first = e.errors()[0]
            field = ".".join(str(p) for p in first.get("loc", ()))
            message = "a document id is 32 hex digits" if field == "doc_id" else first.get("msg", "invalid")
            raise InputError(f"filter {field}: {message}") from None

    @property
    def tag_list(self) -> tuple[str, ...]:
        """The tags as stored: sorted ``"key=value"`` strings."""
        return parse_tags(self.tags or {})

    @property
    def is_empty(self) -> bool:
        """True when the filter has no condition."""
        return self.doc_id is None and self.source is None and not self.tags


class Hit(BaseModel):
    """One matching page: its document, 1-based page number, score and tags; on a collection with text, a
    snippet of its text around the query's terms, and, when asked for, its whole text.

    ``payload`` (everything stored with the page) is there for callers; its JSON form (``model_dump``,
    what ``docvec search --json``, the batch-query flow and the API print) leaves it out.
    """

    model_config = ConfigDict(frozen=True)

    doc_id: str
    source: str = Field(description="The file the document was read from.")
    name: str = Field(description="Display name: the file's name, or an upload's original name.")
    page: int = Field(ge=1, description="Page number, 1-based.")
    score: float = Field(
        description=(
            "Higher is closer: cosine similarity (dense), MaxSim (multi, hybrid), BM25 (text), or the "
            "reciprocal rank fusion of the two rankings (dense+text and the like)."
        )
    )
    rerank_score: float | None = Field(
        None,
        ge=0,
        le=1,
        description=(
            "The reranker's probability that the page meets the query (0 to 1), when the search was "
            "reranked: the hits are then in its order, and score is the first stage's."
        ),
    )
    tags: dict[str, str] = Field(default_factory=dict, description="The document's tags, key to value.")
    snippet: Snippet | None = Field(
        None, description="A short excerpt of the page's text around the query's terms (with text only)."
    )
    text: str | None = Field(None, description="The page's whole text, when the search asked for it.")
    payload: dict[str, Any] = Field(default_factory=dict, exclude=True)

    @field_serializer("score")
    def _round_score(self, score: float) -> float:
        return round(score, 6)

    @field_serializer("rerank_score")
    def _round_rerank_score(self, score: float | None) -> float | None:
        return None if score is None else round(score, 6)

    @classmethod
    def from_payload(cls, payload: dict[str, Any], score: float) -> Hit:
        """The hit for a stored page's payload."""
        return cls(
            doc_id=str(payload.get("doc_id")),
            source=str(payload.get("source")),
            name=display_name(payload),
            page=int(payload.get("page", 1)),
            score=score,
            tags=tag_dict(payload.get("tags") or ()),
            payload=payload,
        )
