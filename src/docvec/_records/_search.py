"""What a search takes and gives: the search modes, the filter (one vocabulary for the CLI, GET and
POST /search), the search itself as one value (:class:`Search`, whose JSON form ``POST /search`` takes),
a hit, and what a search answers (:class:`SearchResult`)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypedDict, get_args

from pydantic import (
    AfterValidator,
    AliasChoices,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_serializer,
    model_validator,
)
from pydantic_core import PydanticCustomError

from .._config import ModeChoice, SearchMode
from .._errors import InputError
from .._text._snippet import Snippet
from ._pages import PagePayload
from ._rules import (
    DOC_ID_PATTERN,
    DOCVEC_RULE,
    MAX_K,
    MAX_PREFETCH,
    MAX_RERANK,
    QUERY_PATTERN,
    TAG_KEY_PATTERN,
    TAG_PATTERN,
    TAG_VALUE_PATTERN,
    JsonBool,
    JsonInt,
    check_doc_id,
    check_k,
    check_prefetch,
    check_query,
    check_rerank,
    check_tags_mapping,
    parse_tag,
    parse_tags,
    rule,
    shortened,
    tag_dict,
)

__all__ = [
    "FILTER_KEYS",
    "MAX_QUERY_CHARS",
    "Hit",
    "Mode",
    "ModeChoice",
    "ModeParts",
    "Search",
    "SearchFilter",
    "SearchMode",
    "SearchOptions",
    "SearchResult",
    "is_source_name",
    "mode_parts",
]

#: The longest query a search takes, in characters (a question, not a document).
MAX_QUERY_CHARS = 1000


@dataclass(frozen=True)
class ModeParts:
    """A search mode read: its visual ranking (``None`` for a keyword search) and whether the keyword
    ranking takes part (alone, or fused with the visual one)."""

    visual: Literal["dense", "multi", "hybrid"] | None
    text: bool

    @property
    def tokens(self) -> bool:
        """Whether the visual ranking needs the pages' token vectors (a multi-vector collection)."""
        return self.visual in ("multi", "hybrid")


def mode_parts(mode: SearchMode) -> ModeParts:
    """What ``mode`` scores pages by: the one place a mode's spelling is read."""
    visual, _, fused = mode.partition("+")
    if visual == "text":
        return ModeParts(None, True)
    assert visual in ("dense", "multi", "hybrid"), mode
    return ModeParts(visual, bool(fused))  # type: ignore[arg-type]


#: The keys ``--filter`` and ``GET /search`` take, and what each means.
FILTER_KEYS = {
    "doc_id": "only this document (32 hex digits)",
    "source": "only documents read from this file, or from under this folder; a name without '/': the "
    "documents of that name",
    "tag": "only pages tagged key=value (repeatable: every one must hold)",
}


def is_source_name(source: str) -> bool:
    """Whether a search filter's ``source`` is a document's name (an upload's original name, a file's own
    name) rather than a path: it has no path separator, and is no ``.``, ``..`` or ``~`` (which the CLI's
    ``--filter`` makes paths)."""
    return not ("/" in source or os.sep in source or source in (".", "..") or source.startswith("~"))


def _tags_mapping(tags: object) -> object:
    # either shape of tags (docvec._records.Tags): key=value strings become the mapping the filter keeps
    if not isinstance(tags, list | tuple) or not all(isinstance(t, str) for t in tags):
        return tags
    mapping: dict[str, str] = {}
    try:
        for key, value in (parse_tag(t) for t in tags):
            if mapping.get(key, value) != value:  # a page has one value per key: two can match nothing
                raise InputError(f"filter tag {key} given twice ({mapping[key]!r} and {value!r})")
            mapping[key] = value
    except InputError as e:
        raise PydanticCustomError(DOCVEC_RULE, "{reason}", {"reason": e.reason}) from None
    return mapping


class SearchFilter(BaseModel):
    """Which pages a search considers: one document, a file or folder they were read from, and tags.

    Every given condition must hold, every tag included; an empty filter (the default) matches every page.
    The same three conditions go by the same names everywhere: ``docvec search --filter doc_id=...
    --filter source=... --filter tag=key=value``, ``GET /search?doc_id=...&source=...&tag=key=value``, and
    ``POST /search`` with ``{"filter": {"doc_id": ..., "source": ..., "tags": {"key": "value"}}}``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    # the pattern in the schema, the value checked by docvec's rule: its message is the library's everywhere
    doc_id: (
        Annotated[
            str,
            Field(json_schema_extra={"pattern": DOC_ID_PATTERN}),
            rule(lambda d: check_doc_id(d, "filter doc_id")),
        ]
        | None
    ) = Field(None, description="Only this document.")
    source: str | None = Field(
        None,
        min_length=1,
        max_length=4096,
        pattern=r"^[^\x00]+$",  # no path holds a NUL
        validation_alias=AliasChoices("source", "source_prefix"),
        description=(
            "Only documents read from this file, or from under this folder: an absolute path (whole path "
            "components: /docs/a matches /docs/a/x.pdf, not /docs/ab.pdf); or, without a '/', the documents "
            "of this name (a hit's name: an upload's original name, a file's own name). A served index's "
            "readers name folders as it shows them: docs/api.md."
        ),
    )
    tags: Annotated[
        dict[str, str] | None, BeforeValidator(_tags_mapping), AfterValidator(check_tags_mapping)
    ] = Field(
        None,
        description=(
            "Only pages tagged key=value, all of them: a mapping, or key=value strings (as given to `docvec "
            "ingest --tag`), one value a key."
        ),
        # docvec's tag rule (checked by check_tags_mapping), stated in the schema, in either shape
        json_schema_extra={
            "anyOf": [
                {
                    "type": "object",
                    "propertyNames": {"pattern": TAG_KEY_PATTERN},
                    "additionalProperties": {"type": "string", "pattern": TAG_VALUE_PATTERN},
                },
                {"type": "array", "items": {"type": "string", "pattern": TAG_PATTERN}},
                {"type": "null"},
            ]
        },
    )

    @classmethod
    def parse(cls, items: Iterable[str]) -> SearchFilter:
        """A filter from ``key=value`` strings (``--filter``, ``GET /search``): ``doc_id=ID``,
        ``source=PATH`` (made absolute like the stored sources) or ``source=NAME`` (a document's name,
        without a path separator: kept as it is) and ``tag=KEY=VALUE``; :class:`InputError` for an unknown
        key, a malformed item or a condition given twice."""
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
            if key == "source" and not is_source_name(value):
                value = os.path.abspath(os.path.expanduser(value))
            if found.get(key, value) != value:
                raise InputError(f"filter {key} given twice ({found[key]!r} and {value!r})")
            found[key] = value
        try:
            return cls(doc_id=found.get("doc_id"), source=found.get("source"), tags=tags or None)
        except ValidationError as e:
            first = e.errors()[0]
            if first["type"] == DOCVEC_RULE:
                raise InputError(first["msg"]) from None
            field = ".".join(str(p) for p in first.get("loc", ()))
            raise InputError(f"filter {field}: {first.get('msg', 'invalid')}") from None

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
    snippet of its text around the query's terms, and, when asked for, its whole text. The same in this
    process and from a server (the page image of a hit: :meth:`docvec.Index.page_file`)."""

    model_config = ConfigDict(frozen=True)

    doc_id: str
    source: str = Field(description="The file the document was read from.")
    name: str = Field(description="Display name: the file's name, or an upload's original name.")
    page: int = Field(ge=1, description="Page number, 1-based.")
    score: float = Field(
        description=(
            "Higher is closer, within one search; what it measures is the mode's (docs/search.md): the "
            "cosine of the query's and the page's vectors, -1 to 1 (dense); MaxSim, the sum over the "
            "query's tokens of each one's best cosine with the page's, which grows with the query's length "
            "(multi, hybrid); BM25, 0 and up (text); in the fused modes (dense+text and the like), 1/(1 + p) "
            "summed over the two rankings, p the page's place in each (1 for the best; in the keyword one, "
            "divided by DOCVEC_TEXT_WEIGHT): 0.5 is first in one ranking, 1 first in both. None of them is a "
            "probability (rerank_score is)."
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

    @field_serializer("score")
    def _round_score(self, score: float) -> float:
        return round(score, 6)

    @field_serializer("rerank_score")
    def _round_rerank_score(self, score: float | None) -> float | None:
        return None if score is None else round(score, 6)

    @classmethod
    def of_page(cls, page: PagePayload, score: float, **found: Any) -> Hit:
        """The hit for a stored page, its ``score`` and what the search ``found`` of it (snippet, text,
        rerank_score)."""
        return cls(
            doc_id=page.doc_id,
            source=page.source,
            name=page.display_name,
            page=page.page,
            score=score,
            tags=tag_dict(page.tags),
            **found,
        )


# -- the search as one value -----------------------------------------------------------------------------

# The bounds are in the schema; the values are checked by docvec's rules (the library's messages), not by
# pydantic's constraints. A number of pages is JSON Schema's integer: 20 and 20.0, never true or "20".
QueryText = Annotated[
    str,
    Field(
        max_length=MAX_QUERY_CHARS,
        json_schema_extra={"minLength": 1, "pattern": QUERY_PATTERN},
        description="What to look for.",
    ),
    rule(check_query),
]
K = Annotated[
    JsonInt,
    Field(json_schema_extra={"minimum": 1, "maximum": MAX_K}, description="How many pages to return."),
    rule(check_k),
]
Prefetch = Annotated[
    JsonInt | None,
    Field(
        json_schema_extra={"minimum": 1, "maximum": MAX_PREFETCH},
        description="Hybrid mode: pages the dense vector finds for MaxSim to rerank (DOCVEC_PREFETCH).",
    ),
    rule(check_prefetch),
]
Rerank = Annotated[
    JsonInt | None,
    Field(
        json_schema_extra={"minimum": 0, "maximum": MAX_RERANK},
        description=(
            "A second stage: the reranker reads the first stage's best this many pages (at least k) with "
            "the query and the k it scores highest come back in its order; 0: none; default: "
            "DOCVEC_RERANK. Without a reranker (DOCVEC_RERANK_MODEL) a search that asks is refused (409)."
        ),
    ),
    rule(lambda rerank: check_rerank(rerank, 1)),  # the range; against k: the model's own check
]


def _known_mode(mode: object) -> object:
    # an unknown mode is docvec's rule broken, in its words (400 over the API, as the library's InputError),
    # not the literal's; a value of another type is left to the type's own refusal
    if isinstance(mode, str) and mode not in get_args(ModeChoice):
        modes = ", ".join(get_args(SearchMode))
        reason = f"search mode must be auto or one of {modes}, not {shortened(mode, 40)!r}"
        raise PydanticCustomError(DOCVEC_RULE, "{reason}", {"reason": reason})
    return mode


#: A search's mode as every face takes it: one of :data:`ModeChoice`, or none (the setting's).
Mode = Annotated[
    ModeChoice | None,
    BeforeValidator(_known_mode),
    Field(description="How pages are scored (default: DOCVEC_SEARCH_MODE, auto): see docs/search.md."),
]
WithText = Annotated[
    JsonBool,
    Field(
        description="Give each hit's whole page text too (a collection with text): one round trip for RAG."
    ),
]


class SearchOptions(TypedDict, total=False):
    """A search's options besides its query, ``k`` and filter, as keyword arguments (``Index.search(query,
    k, filter, mode=..., ...)``): :class:`Search`'s fields, each checked as the value checks it."""

    mode: ModeChoice | None
    prefetch: int | None
    with_text: bool
    rerank: int | None


class Search(BaseModel):
    """One search: a query and how to answer it. Every face takes this value (the library's
    :meth:`docvec.Index.search`, ``POST /search``, whose body is its JSON form, ``GET /search``, ``docvec
    search``, the batch-query flow) and checks it by the same rules, in the same words."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    query: QueryText
    # ``top_k``: the name before docvec settled on ``k`` everywhere; still accepted
    k: K = Field(5, validation_alias=AliasChoices("k", "top_k"))
    filter: SearchFilter | None = None
    mode: Mode = None
    prefetch: Prefetch = None
    with_text: WithText = False
    rerank: Rerank = None

    @model_validator(mode="after")
    def _rerank_reaches_k(self) -> Search:
        # the reranker orders the best `rerank` pages and the search returns k of them
        if self.rerank is not None:
            try:
                check_rerank(self.rerank, self.k)
            except InputError as e:
                raise PydanticCustomError(DOCVEC_RULE, "{reason}", {"reason": e.reason}) from None
        return self

    @classmethod
    def of(cls, query: str | Search, /, **options: Any) -> Search:
        """``query`` itself when it is a search (``options`` replacing its fields), else the search of
        ``query`` with ``options`` (:class:`SearchOptions`, ``k``, ``filter``); an option given as
        ``None`` is left to the default (for each, None means that). :class:`~docvec.InputError` naming
        what is wrong, in the words of docvec's rules."""
        options = {name: value for name, value in options.items() if value is not None}
        if isinstance(query, Search):
            if not options:
                return query
            fields = {name: getattr(query, name) for name in query.model_fields_set} | options
        else:
            fields = {"query": query, **options}
        try:
            return cls.model_validate(fields)
        except ValidationError as e:
            first = e.errors()[0]
            if first["type"] == DOCVEC_RULE:
                raise InputError(first["msg"]) from None
            where = ".".join(str(p) for p in first.get("loc", ())) or "search"
            raise InputError(f"{where}: {first['msg']}") from None


class SearchResult(BaseModel):
    """What a search answers: its hits, best first, and how it was answered (the mode that scored the pages,
    the reranker's depth). It is a sequence of its hits: ``for hit in index.search(...)``."""

    model_config = ConfigDict(frozen=True)

    query: str
    k: int
    mode: SearchMode = Field(
        description="How the pages were scored: the modes that answered (dense+text: both rankings, fused)."
    )
    rerank: int = Field(
        0,
        ge=0,
        le=MAX_RERANK,
        description=(
            "The second stage's depth: the reranker read the first stage's best this many pages (all there "
            "were, when fewer matched) and the hits are in its order, each with its rerank_score; 0: the "
            "search was not reranked."
        ),
    )
    hits: Sequence[Hit]

    # A sequence of hits, as a search answered before it said how: iterating a model yields its fields
    # (pydantic's ``dict(model)``), which nothing of docvec's uses
    def __iter__(self) -> Iterator[Hit]:  # type: ignore[override]
        return iter(self.hits)

    def __len__(self) -> int:
        return len(self.hits)

    def __getitem__(self, i: int) -> Hit:
        return self.hits[i]

    def __bool__(self) -> bool:
        return bool(self.hits)

    def __eq__(self, other: object) -> bool:
        # a list of hits compares with the hits: what a search answered before it said how
        if isinstance(other, list):
            return list(self.hits) == other
        return super().__eq__(other)

    __hash__ = None  # type: ignore[assignment]  # equal to a list: as unhashable as one
