"""The snippet a hit shows: a short excerpt of its page's text around the query's terms, with the terms
marked. A term is what :class:`~._terms.Analyzer` says it is, so a mark falls wherever the index matched:
"Café" for a query "cafe", "runs" for "running", both characters of a CJK bigram."""

from __future__ import annotations

import re
from collections import Counter

from pydantic import BaseModel, ConfigDict, Field

from ._terms import Analyzer, Token, _pieces

__all__ = ["ELLIPSIS", "Snippet", "snippet"]

ELLIPSIS = "…"
"""Put where the excerpt cuts the page's text."""

# pdfium's hyphenation marks and soft hyphens are not shown; every run of white space is one space
_HIDDEN = re.compile("[\u00ad\ufffe\x02]+")
_SPACE = re.compile(r"\s+")
_REACH = 20  # how far a cut looks for a space before it cuts a word (text without spaces: CJK)


class Snippet(BaseModel):
    """A short excerpt of a page's text, with where the query's terms are in it."""

    model_config = ConfigDict(frozen=True)

    text: str = Field(
        description="An excerpt of the page's text, white space collapsed to single spaces; '…' where it "
        "cuts the text."
    )
    marks: list[tuple[int, int]] = Field(
        description="Where the query's terms are in `text`: [start, end) character offsets, sorted and "
        "not overlapping."
    )


def _shown(text: str) -> str:
    return _SPACE.sub(" ", _HIDDEN.sub("", text)).strip()


def _best_window(hits: list[Token], width: int) -> tuple[int, int]:
    """The indices [i, j) of the run of hits within ``width`` characters that holds the most distinct terms,
    then the most hits; the earliest of equals."""
    best = (0, 0, 0, 1)  # distinct, count, i, j
    counts: Counter[str] = Counter()
    j = 0
    for i, first in enumerate(hits):
        while j < len(hits) and (j == i or hits[j].end - first.start <= width):
            counts[hits[j].term] += 1
            j += 1
        score = (len(counts), j - i)
        if score > best[:2]:
            best = (*score, i, j)
        counts[first.term] -= 1
        if not counts[first.term]:
            del counts[first.term]
    return best[2], best[3]


def _cut_start(text: str, at: int, keep: int) -> int:
    """Where an excerpt meant to start at ``at`` starts so that it cuts no word: at the next word, or back
    at this word's start where the next would pass ``keep``; between two characters where no space is
    near (CJK)."""
    if at <= 0:
        return 0
    if text[at - 1] == " ":
        return at
    if text[at] == " ":
        return at + 1
    ahead = text.find(" ", at, min(at + _REACH, keep))
    if ahead >= 0:
        return ahead + 1
    low = max(0, at - _REACH)
    back = text.rfind(" ", low, at)
    return back + 1 if back >= 0 else 0 if low == 0 else at


def _cut_end(text: str, at: int, keep: int) -> int:
    """Where an excerpt meant to end at ``at`` ends so that it cuts no word (the mirror of
    :func:`_cut_start`; it ends at ``keep`` or after)."""
    if at >= len(text):
        return len(text)
    if text[at] == " ":
        return at
    if text[at - 1] == " ":
        return at - 1
    back = text.rfind(" ", max(keep, at - _REACH), at)
    if back >= 0:
        return back
    high = min(len(text), at + _REACH)
    ahead = text.find(" ", at, high)
    return ahead if ahead >= 0 else len(text) if high == len(text) else at


def snippet(text: str, query: str, analyzer: Analyzer, *, width: int = 200) -> Snippet | None:
    """An excerpt of about ``width`` characters of a page's ``text``: the window that holds the most
    distinct terms of ``query`` (then the most occurrences; the earliest of equals), each occurrence marked;
    the text's start, unmarked, when no term occurs; ``None`` for a text with nothing to show."""
    shown = _shown(text)
    if not shown:
        return None
    wanted = set(analyzer.terms(query))
    pieces = _pieces(shown, analyzer.stemmer) if wanted else iter(())
    # by start: a code's joined term comes after its parts, and starts where the first does
    hits = sorted((Token(*p) for p in pieces if p[0] in wanted), key=lambda t: (t.start, t.end))
    if hits:
        i, j = _best_window(hits, width)
        first, last = hits[i].start, max(h.end for h in hits[i:j])
        start = max(0, min(first - (width - (last - first)) // 2, len(shown) - width))
        end = max(min(len(shown), start + width), last)
        start = min(_cut_start(shown, start, first), first)
        end = max(_cut_end(shown, end, last), last)
    else:
        start, end = 0, _cut_end(shown, min(width, len(shown)), 1)
    lead = ELLIPSIS if start > 0 else ""
    marks: list[tuple[int, int]] = []
    for hit in hits:
        if hit.start >= start and hit.end <= end:
            a, b = hit.start - start + len(lead), hit.end - start + len(lead)
            if marks and a <= marks[-1][1]:
                marks[-1] = (marks[-1][0], max(b, marks[-1][1]))
            else:
                marks.append((a, b))
    body = shown[start:end]
    return Snippet(text=lead + body + (ELLIPSIS if end < len(shown) else ""), marks=marks)
