"""The rules docvec's records follow, each defined once: document ids, ``k``, the prefetch, queries, tags
and a document's display name."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Strict
from pydantic_core import PydanticCustomError

from .._errors import InputError

__all__ = [
    "DOCVEC_RULE",
    "DOC_ID_PATTERN",
    "MAX_K",
    "MAX_PREFETCH",
    "MAX_RERANK",
    "QUERY_PATTERN",
    "TAG_KEY_PATTERN",
    "TAG_PATTERN",
    "TAG_VALUE_PATTERN",
    "JsonBool",
    "JsonInt",
    "Tags",
    "check_doc_id",
    "check_k",
    "check_prefetch",
    "check_query",
    "check_rerank",
    "check_tags_mapping",
    "counted",
    "parse_tag",
    "parse_tags",
    "rerank_depth",
    "rule",
    "shortened",
    "tag_dict",
]


DOC_ID_PATTERN = r"^[0-9a-f]{32}$"
#: the type of a validation error that breaks one of docvec's own rules: its message is docvec's, the same
#: with or without a server (docvec.api._errors answers it as the library's InputError)
DOCVEC_RULE = "docvec_rule"


def rule(check: Callable[[Any], Any]) -> AfterValidator:
    """docvec's own check of a value as a pydantic validator: what it raises is the validation error's
    message (of type :data:`DOCVEC_RULE`), so that a model refuses a value in the library's words."""

    def validate(value: Any) -> Any:
        if value is not None:
            try:
                check(value)
            except InputError as e:
                raise PydanticCustomError(DOCVEC_RULE, "{reason}", {"reason": e.reason}) from None
        return value

    return AfterValidator(validate)


def check_doc_id(doc_id: object, where: str = "doc_id") -> str:
    """``doc_id`` when it is a document id (32 hex digits), else :class:`InputError` naming ``where`` it
    was given and what was given."""
    if not isinstance(doc_id, str) or not re.fullmatch(DOC_ID_PATTERN, doc_id):
        shown = shortened(doc_id, 40) if isinstance(doc_id, str) else doc_id
        raise InputError(f"{where}: a document id is 32 hex digits, not {shown!r}")
    return doc_id


def _whole(value: object) -> object:
    # JSON Schema's integer is a number without a fraction: 4.0 is one, true and "4" are not
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


#: A whole number in a JSON body, as JSON Schema's ``integer`` says: 4 and 4.0, never true or "4" (a
#: query string's text is parsed by the fields that read one).
JsonInt = Annotated[int, BeforeValidator(_whole), Strict()]
#: A boolean in a JSON body: true or false, never 0 or "yes".
JsonBool = Annotated[bool, Strict()]
#: The most pages one search returns.
MAX_K = 100


def check_k(k: object) -> int:
    """``k`` when it is a whole number of pages from 1 to :data:`MAX_K`, else :class:`InputError`."""
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
        raise InputError(f"k must be between 1 and {MAX_K}, not {k}")
    return k


#: The most pages the reranker reads again per search: it reads each with the query (seconds a page on a
#: CPU; docs/rerank.md has the measurements).
MAX_RERANK = 100


def check_rerank(rerank: object, k: int) -> int:
    """``rerank`` when it is 0 (no second stage) or a whole number of pages from ``k`` to
    :data:`MAX_RERANK`, else :class:`InputError`: the reranker orders the first stage's best ``rerank``
    pages and the search returns ``k`` of them."""
    if isinstance(rerank, bool) or not isinstance(rerank, int) or not 0 <= rerank <= MAX_RERANK:
        raise InputError(f"rerank must be from 0 (off) to {MAX_RERANK} pages, not {rerank}")
    if 0 < rerank < k:
        raise InputError(
            f"rerank ({rerank}) is below k ({k}): the reranker orders the best rerank pages and the search "
            "returns k of them; ask for rerank >= k"
        )
    return rerank


def rerank_depth(rerank: int | None, default: int, k: int) -> int:
    """How many pages a search for ``k`` reranks: ``rerank`` when it asks (checked: :func:`check_rerank`),
    else the ``default`` (``DOCVEC_RERANK``), raised to ``k`` when the search wants more pages than that;
    0: none."""
    if rerank is None:
        return max(default, k) if default else 0
    return check_rerank(rerank, k)


#: The most pages a hybrid search reranks.
MAX_PREFETCH = 10_000


def check_prefetch(prefetch: object) -> int:
    """``prefetch`` when it is a whole number of pages from 1 to :data:`MAX_PREFETCH`, else
    :class:`InputError`."""
    if isinstance(prefetch, bool) or not isinstance(prefetch, int) or not 1 <= prefetch <= MAX_PREFETCH:
        raise InputError(f"prefetch must be from 1 to {MAX_PREFETCH} pages, not {prefetch}")
    return prefetch


#: White space, as docvec strips it from tags and looks past it in queries: ASCII's, which every regular
#: expression engine (the JSON Schema patterns below: Python's, ECMAScript's) agrees on.
BLANKS = " \t\n\r\f\v"
_NOT_BLANK = r"[^ \t\n\r\f\v]"
#: A query has something in it besides white space (as a JSON Schema pattern: searched, not anchored).
QUERY_PATTERN = _NOT_BLANK


def check_query(query: object) -> str:
    """``query`` when it is a text with something in it, else :class:`InputError`."""
    if not isinstance(query, str) or not re.search(QUERY_PATTERN, query):
        raise InputError("the query is empty")
    return query


# -- tags ----------------------------------------------------------------------------------------------


#: A tag is ``key=value``: a key with something besides white space and no ``=``, and a value with
#: something besides white space (both are stored stripped). The API's schema states these patterns.
TAG_KEY_PATTERN = r"^[^=]*[^ \t\n\r\f\v=][^=]*$"
TAG_VALUE_PATTERN = _NOT_BLANK
TAG_PATTERN = r"^[^=]*[^ \t\n\r\f\v=][^=]*=[\s\S]*" + _NOT_BLANK


def _check_tag_part(key: str, value: str, shown: str) -> tuple[str, str]:
    if not re.search(TAG_KEY_PATTERN, key) or not re.search(TAG_VALUE_PATTERN, value):
        raise InputError(f"tag {shown!r} is not of the form key=value (a key without '=', a value)")
    return key.strip(BLANKS), value.strip(BLANKS)


def parse_tag(text: str) -> tuple[str, str]:
    """``"key=value"`` as ``(key, value)``, stripped; :class:`InputError` when it is not of that form."""
    key, sep, value = text.partition("=")
    if not sep:
        raise InputError(f"tag {text!r} is not of the form key=value")
    return _check_tag_part(key, value, text)


#: Tags as a caller gives them, in either shape every face takes: ``key=value`` strings (as ``--tag``) or a
#: mapping (as the API's JSON); stored as sorted ``key=value`` strings (:func:`parse_tags`).
Tags = Sequence[str] | Mapping[str, str]


def parse_tags(items: Iterable[str] | Mapping[str, str]) -> tuple[str, ...]:
    """Tags as docvec stores them: sorted, distinct ``"key=value"`` strings, from ``key=value`` strings
    (as given to ``--tag``) or a mapping (as in the API's JSON)."""
    if isinstance(items, Mapping):
        pairs = [_check_tag_part(k, v, f"{k}={v}") for k, v in items.items()]
    else:
        pairs = [parse_tag(t) for t in items]
    return tuple(sorted({f"{k}={v}" for k, v in pairs}))


def tag_dict(tags: Iterable[object]) -> dict[str, str]:
    """Stored ``"key=value"`` tags as a mapping (the API's shape)."""
    pairs = (str(t).partition("=") for t in tags)
    return {k: v for k, _, v in pairs}


def check_tags_mapping(tags: dict[str, str] | None) -> dict[str, str] | None:
    if tags is not None:
        try:
            parse_tags(tags)
        except InputError as e:
            raise ValueError(e.reason) from None
    return tags


def counted(count: int, word: str) -> str:
    """``"1 page"``, ``"2 pages"``: a count and its noun, as docvec's messages write them."""
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def shortened(text: str, limit: int = 200) -> str:
    """``text`` as a message quotes an input back: whole up to ``limit`` characters, else cut with "..."."""
    return text if len(text) <= limit else f"{text[: limit - 3]}..."
