"""What a term is: one analysis for the index, the query and the snippet's marks, and the sparse vectors that
carry a page's terms to Qdrant.

Analysis (:class:`Analyzer`), in this order:

1. **Segmentation** of the original text by one precompiled regex, so that every term keeps the span of the
   text it came from. A *word* is a run of letters, digits and combining marks of any script; a soft
   hyphen (U+00AD) or pdfium's hyphenation marks (U+FFFE, U+0002) inside a word join it ("taki\\ufffemata" is
   one word). Everything else (white space, punctuation, symbols, the underscore) separates words.
   Han, Hiragana, Katakana and Hangul, and the scripts written without spaces (Thai, Lao, Myanmar, Khmer),
   form runs of their own.
2. **Normalisation** of each word: NFKC (ligatures, full-width forms, superscripts), case folding
   (``str.casefold``: "Straße" -> "strasse"), and accents folded from Latin and Greek letters ("Café" ->
   "cafe", "Übergröße" -> "ubergrosse", "ά" -> "α"; "ё" -> "е"). Other scripts keep their marks (in
   Devanagari or Arabic they are part of the letters, and Cyrillic "й" is a letter of its own).
3. **CJK runs** become overlapping character bigrams ("東京都" -> 東京, 京都), a run of one character a
   unigram; Lucene's CJKAnalyzer does the same, with no dictionary.
4. **Codes**: words joined by ``- _ . / : , '`` with no space between ("INV-2024-0042", "COVID-19",
   "1,234.56") give each part (inv, 2024, 0042) and, when the code holds a digit, the parts joined as one
   more term ("inv20240042"): a query typed the same way, or with the code written solid, matches the whole
   code as one rare term. Hyphenated words without digits ("state-of-the-art") give their parts only.
5. **Stop words** (English only, :data:`ENGLISH_STOP_WORDS`: Lucene's 33, as bm25s removes them) and the
   English possessive and negation ("company's", "don't": the "s" and "t" after an apostrophe).
6. **Stemming** (Snowball, PyStemmer) of alphabetic words in the analyzer's language; numbers, codes and
   CJK bigrams are not stemmed.
7. Terms longer than :data:`MAX_TERM_CHARS` characters are dropped.

Weights: a document's vector holds BM25's term-frequency part with a fixed average length
(:class:`TermWeights`), and a query's vector each term's count in the query; Qdrant's IDF modifier supplies
the rest at query time, so adding documents needs no global re-weighting.
"""

from __future__ import annotations

import functools
import hashlib
import re
import threading
import unicodedata
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import Stemmer
from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = [
    "ENGLISH_STOP_WORDS",
    "MAX_TERM_CHARS",
    "Analyzer",
    "SparseVector",
    "TermWeights",
    "Token",
    "check_stemmer",
    "document_vector",
    "query_vector",
    "term_id",
]

MAX_TERM_CHARS = 40
"""Longer terms are dropped (base64, hashes, runs of text that lost its spaces)."""

ENGLISH_STOP_WORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "for",
        "if",
        "in",
        "into",
        "is",
        "it",
        "no",
        "not",
        "of",
        "on",
        "or",
        "such",
        "that",
        "the",
        "their",
        "then",
        "there",
        "these",
        "they",
        "this",
        "to",
        "was",
        "will",
        "with",
    ]
)
"""Lucene's English stop words, the list bm25s removes by default; applied when the language is English."""

_STOP_WORDS: dict[str, frozenset[str]] = {"english": ENGLISH_STOP_WORDS, "porter": ENGLISH_STOP_WORDS}
# After an apostrophe, in English: the possessive and the negation ("company's", "don't").
_CLITICS: dict[str, frozenset[str]] = {"english": frozenset({"s", "t"}), "porter": frozenset({"s", "t"})}

# Scripts segmented into character bigrams: Han (with its extensions and compatibility block, the iteration
# mark and ideographic zero), Hiragana, Katakana (with its phonetic extensions and half-width forms) and
# Hangul (syllables and jamo); and the scripts written without spaces between words.
_CJK = (
    "\u1100-\u11ff\u3005-\u3007\u3021-\u3029\u3031-\u3035\u3038-\u303c\u3041-\u309f\u30a1-\u30fa\u30fc-\u30ff\u3130-\u318f"
    "\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff\uff66-\uff9f"
    "\U00016fe0-\U00016fff\U0001b000-\U0001b16f\U00020000-\U0003ffff"
)
_UNSPACED = "\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u19e0-\u19ff\ua9e0-\ua9ff\uaa60-\uaa7f"
_BIGRAMMED = _CJK + _UNSPACED
_JOINERS = "\u00ad\ufffe\x02"  # soft hyphen, pdfium's hyphenation marks: inside a word, not a break
_CONNECTORS = "\\-\u2010\u2011_./:,'\u2019"  # between the parts of a code: "INV-2024-0042", "1,234.56"
_APOSTROPHES = "'\u2019"


def _word_class() -> str:
    """A regex character class of the characters words are made of: letters, digits and marks of every
    script (Unicode categories L, N, M) except the bigrammed scripts. Listed one by one in the BMP, where
    ``re`` tests a class by a bitmap; past it, two broad ranges (historic scripts, mathematical letters;
    variation selectors), since ``re`` tests ranges there one after the other."""
    bigrammed = re.compile(f"[{_BIGRAMMED}]")
    ranges: list[tuple[int, int]] = []
    for cp in range(0x10000):
        ch = chr(cp)
        if unicodedata.category(ch)[0] in "LNM" and not bigrammed.match(ch):
            if ranges and ranges[-1][1] == cp - 1:
                ranges[-1] = (ranges[-1][0], cp)
            else:
                ranges.append((cp, cp))
    ranges += [(0x10000, 0x16FDF), (0x1B170, 0x1EFFF), (0xE0100, 0xE01EF)]  # not 0x16FE0-0x1B16F: kana
    parts = (re.escape(chr(a)) if a == b else f"{re.escape(chr(a))}-{re.escape(chr(b))}" for a, b in ranges)
    return "[" + "".join(parts) + "]"


@functools.cache
def _patterns() -> tuple[re.Pattern[str], re.Pattern[str]]:
    """(the chunk pattern: a bigrammed run as group 1 or a word-or-code as group 2; the word pattern)."""
    word_char = _word_class()
    word = f"{word_char}+(?:[{_JOINERS}]+{word_char}+)*"
    chunk = re.compile(f"([{_BIGRAMMED}]+)|({word}(?:[{_CONNECTORS}]{word})*)")
    return chunk, re.compile(word)


_STRIP_JOINERS = str.maketrans("", "", _JOINERS)
_PLAIN_CJK = re.compile(
    "[\u3041-\u3096\u30a1-\u30fa\u30fc\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7a3]+"
)  # NFKC leaves alone


def _fold(word: str) -> str:
    """NFKC, case folding, and accents off Latin and Greek letters (and Cyrillic ё -> е)."""
    word = word.translate(_STRIP_JOINERS)
    if word.isascii():
        return word.lower()
    word = unicodedata.normalize("NFKC", word).casefold()
    out: list[str] = []
    for ch in unicodedata.normalize("NFD", word):
        if out and unicodedata.combining(ch):
            base = out[-1][-1]
            if base < "\u0400" or "\u1e00" <= base < "\u2000" or (base in "еЕ" and ch == "\u0308"):
                continue  # Latin, Greek, IPA, and ё: the mark goes
        out.append(ch)
    return unicodedata.normalize("NFC", "".join(out))


_local = threading.local()


def _stemmer(language: str) -> Stemmer.Stemmer:
    """A stemmer for this thread (PyStemmer's objects are not shared between threads)."""
    stemmers: dict[str, Stemmer.Stemmer] = _local.__dict__.setdefault("stemmers", {})
    if language not in stemmers:
        stemmers[language] = Stemmer.Stemmer(language)
    return stemmers[language]


_Piece = tuple[str, int, int]  # a term and its span, relative to the chunk it came from


@functools.lru_cache(maxsize=1 << 16)
def _word_terms(chunk: str, language: str) -> tuple[_Piece, ...]:
    """The terms of a word or a code (a regex chunk, cached: words repeat), with their spans in it."""
    _, word = _patterns()
    stop = _STOP_WORDS.get(language, frozenset())
    clitics = _CLITICS.get(language, frozenset())
    stem = None if language == "none" else _stemmer(language).stemWord
    parts = [(_fold(m.group()), m.start(), m.end()) for m in word.finditer(chunk)]
    pieces: list[_Piece] = []
    for folded, start, end in parts:
        # NFKC can make a separator ("½" -> "1⁄2"): what it splits keeps the word's span
        for term in [folded] if folded.isalnum() else word.findall(folded):
            if term in stop or len(term) > MAX_TERM_CHARS:
                continue
            if term in clitics and start > 0 and chunk[start - 1] in _APOSTROPHES:
                continue
            pieces.append((stem(term) if stem is not None and term.isalpha() else term, start, end))
    if len(parts) > 1 and any(c.isdigit() for c in chunk):
        joined = "".join("".join(word.findall(folded)) for folded, _, _ in parts)
        if len(joined) <= MAX_TERM_CHARS:
            pieces.append((joined, 0, len(chunk)))
    return tuple(pieces)


def _bigrams(run: str) -> list[_Piece]:
    """A CJK run's overlapping character bigrams (a lone character: itself), NFKC-normalised; a half-width
    voiced sound mark stays with the kana before it."""
    units: list[tuple[str, int, int]] = []
    for i, ch in enumerate(run):
        if ch in "\uff9e\uff9f" and units:
            text, start, _ = units[-1]
            units[-1] = (text + ch, start, i + 1)
        else:
            units.append((ch, i, i + 1))
    if _PLAIN_CJK.fullmatch(run):
        normal = [u[0] for u in units]
    else:  # half-width kana, compatibility ideographs and jamo, Thai's sara am: NFKC
        normal = [unicodedata.normalize("NFKC", u[0]) for u in units]
    if len(units) == 1:
        return [(normal[0], units[0][1], units[0][2])]
    return [(normal[i] + normal[i + 1], units[i][1], units[i + 1][2]) for i in range(len(units) - 1)]


@dataclass(frozen=True)
class Token:
    """A term and the span of the original text it came from: ``text[start:end]``."""

    term: str
    start: int
    end: int


class Analyzer(BaseModel):
    """How text becomes terms (the module's docstring tells the rules). Kept in a collection's record:
    a collection is searched with the analyzer that indexed it, and ``version`` tells analyses apart."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    stemmer: str = Field(
        "english",
        description='The Snowball language of stemming (and of stop words: English has some), or "none".',
    )
    version: int = Field(
        1,
        ge=1,
        description="The version of the analysis, so that a collection analysed another way is known.",
    )

    @field_validator("stemmer")
    @classmethod
    def _known_stemmer(cls, value: str) -> str:
        return check_stemmer(value)

    def tokens(self, text: str) -> list[Token]:
        """The terms of ``text`` with their spans, in the order of the text (a code's joined term after its
        parts)."""
        return [Token(term, start, end) for term, start, end in _pieces(text, self.stemmer)]

    def terms(self, text: str) -> list[str]:
        """The terms of ``text``, in order, with repeats: what :meth:`tokens` gives, without the spans."""
        chunk, _ = _patterns()
        language = self.stemmer
        out: list[str] = []
        for run, word in chunk.findall(text):
            out.extend(_word_strings(word, language) if word else (p[0] for p in _bigrams(run)))
        return out


def _pieces(text: str, language: str) -> Iterator[_Piece]:
    """The terms of ``text`` with their spans in it (:meth:`Analyzer.tokens`, without making tokens)."""
    chunk, _ = _patterns()
    for m in chunk.finditer(text):
        base = m.start()
        run, word = m.groups()
        for term, start, end in _bigrams(run) if run is not None else _word_terms(word, language):
            yield term, base + start, base + end


@functools.lru_cache(maxsize=1 << 16)
def _word_strings(chunk: str, language: str) -> tuple[str, ...]:
    return tuple(p[0] for p in _word_terms(chunk, language))


@functools.lru_cache(maxsize=1 << 16)
def check_stemmer(value: str) -> str:
    """``value`` if it names a Snowball stemmer PyStemmer has, or is ``"none"``; else :class:`ValueError`
    listing them (the settings and :class:`Analyzer` say it the same way)."""
    known = sorted(Stemmer.algorithms())
    if value != "none" and value not in known:
        raise ValueError(f"unknown stemmer {value!r}: use one of {', '.join(known)}, or 'none'")
    return value


def term_id(term: str) -> int:
    """A term's index in a sparse vector: BLAKE2b of the term's UTF-8 bytes with a 4-byte digest, read
    big-endian; stable across processes, machines and Python versions (unlike ``hash``). Terms that share
    an id (about one pair among 10^5 distinct terms, a hundred among 10^6) count as one."""
    return int.from_bytes(hashlib.blake2b(term.encode("utf-8"), digest_size=4).digest(), "big")


@dataclass(frozen=True)
class SparseVector:
    """A sparse vector as Qdrant takes it: unique indices in ascending order, one value each."""

    indices: list[int]
    values: list[float]


@dataclass(frozen=True)
class TermWeights:
    """BM25's term-frequency part, with a fixed average document length instead of the collection's, so
    that a page's weights never change as documents come and go; Qdrant's IDF modifier does the rest.

    ``avg_len``: the mean number of terms (default analyzer) on the pages of real PDFs that hold text (at
    least 50 words): 247, median 253, over 175 pages of 11 documents."""

    k1: float = 1.2
    b: float = 0.75
    avg_len: float = 250.0

    def __post_init__(self) -> None:
        if not (self.k1 >= 0 and 0 <= self.b <= 1 and self.avg_len > 0):
            raise ValueError(f"BM25 needs k1 >= 0, 0 <= b <= 1 and avg_len > 0, not {self}")

    def weight(self, tf: float, length: int) -> float:
        """w = tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / avg_len))."""
        return tf * (self.k1 + 1) / (tf + self.k1 * (1 - self.b + self.b * length / self.avg_len))


def _by_id(terms: Iterable[str]) -> dict[int, int]:
    """Term counts by term id, sorted by id (colliding terms add up)."""
    counts: Counter[int] = Counter()
    for term, n in Counter(terms).items():
        counts[term_id(term)] += n
    return dict(sorted(counts.items()))


def document_vector(text: str, analyzer: Analyzer, weights: TermWeights) -> SparseVector:
    """A page's sparse vector: each term's BM25 term-frequency weight, the page's length being its number of
    terms; empty for a text without terms."""
    terms = analyzer.terms(text)
    counts = _by_id(terms)
    length = len(terms)
    return SparseVector(list(counts), [weights.weight(tf, length) for tf in counts.values()])


def query_vector(query: str, analyzer: Analyzer) -> SparseVector:
    """A query's sparse vector: each term's count in the query (as bm25s scores a repeated query term)."""
    counts = _by_id(analyzer.terms(query))
    return SparseVector(list(counts), [float(n) for n in counts.values()])
