"""Page text's terms (the analysis the index, the query and the snippet share), their sparse vectors, and
the snippet a hit shows."""

from __future__ import annotations

import subprocess
import sys

import pydantic
import pytest

from docvec._text._snippet import ELLIPSIS, Snippet, snippet
from docvec._text._terms import (
    Analyzer,
    SparseVector,
    TermWeights,
    Token,
    document_vector,
    query_vector,
    term_id,
)

EN = Analyzer()
PLAIN = Analyzer(stemmer="none")


def spans(analyzer: Analyzer, text: str) -> list[tuple[str, str]]:
    """Each token's term and the slice of the text its span names."""
    return [(t.term, text[t.start : t.end]) for t in analyzer.tokens(text)]


# -- tokens and terms ---------------------------------------------------------------------------------------


def test_tokens_are_spans_of_the_original_text() -> None:
    text = "  The Quick,\r\nbrown  FOX—jumps (over) 42 lazy dogs."
    tokens = PLAIN.tokens(text)
    assert all(isinstance(t, Token) for t in tokens)
    assert [(t.term, text[t.start : t.end]) for t in tokens] == [
        ("the", "The"),
        ("quick", "Quick"),
        ("brown", "brown"),
        ("fox", "FOX"),
        ("jumps", "jumps"),
        ("over", "over"),
        ("42", "42"),
        ("lazy", "lazy"),
        ("dogs", "dogs"),
    ]
    assert PLAIN.terms(text) == [t.term for t in tokens]
    # English drops its stop words and stems: "jump", "dog"; "over" is no stop word
    assert EN.terms(text) == ["quick", "brown", "fox", "jump", "over", "42", "lazi", "dog"]


def test_offsets_survive_normalisation_that_changes_lengths() -> None:
    text = "ﬁnance Straße ＡＢＣ taki\ufffemata x²"  # ligature, ß, full width, pdfium's hyphenation mark
    assert spans(PLAIN, text) == [
        ("finance", "ﬁnance"),
        ("strasse", "Straße"),
        ("abc", "ＡＢＣ"),
        ("takimata", "taki\ufffemata"),
        ("x2", "x²"),
    ]


def test_accents_fold_so_that_either_spelling_matches() -> None:
    assert PLAIN.terms("Café CAFÉ cafe\u0301 naïve Übergröße ΚΑΛΗΜΈΡΑ Ёлка") == [
        "cafe",
        "cafe",
        "cafe",
        "naive",
        "ubergrosse",
        "καλημερα",
        "елка",
    ]
    assert EN.terms("Übergröße") == EN.terms("ubergrosse") == EN.terms("Ubergrösse")
    # marks that are letters of their script stay: Cyrillic й, Devanagari's vowel signs and virama
    assert PLAIN.terms("йод हिन्दी") == ["йод", "हिन्दी"]


def test_chinese_runs_become_overlapping_bigrams() -> None:
    text = "我住在北京市。中"
    assert spans(PLAIN, text) == [
        ("我住", "我住"),
        ("住在", "住在"),
        ("在北", "在北"),
        ("北京", "北京"),
        ("京市", "京市"),
        ("中", "中"),  # a lone character: a unigram
    ]


def test_japanese_runs_bigram_across_kana_and_kanji() -> None:
    text = "東京タワーへ行く"
    assert PLAIN.terms(text) == ["東京", "京タ", "タワ", "ワー", "ーへ", "へ行", "行く"]
    # half-width katakana is the same text as full width (NFKC), voiced marks included
    assert PLAIN.terms("ｶﾞｷﾞ") == PLAIN.terms("ガギ") == ["ガギ"]
    # the katakana middle dot separates names
    assert PLAIN.terms("ジョン・スミス") == ["ジョ", "ョン", "スミ", "ミス"]


def test_hangul_bigrams_within_each_spaced_word() -> None:
    text = "한국어 텍스트 책"
    assert spans(PLAIN, text) == [
        ("한국", "한국"),
        ("국어", "국어"),
        ("텍스", "텍스"),
        ("스트", "스트"),
        ("책", "책"),
    ]


def test_cjk_next_to_latin_splits_into_runs() -> None:
    assert PLAIN.terms("iPhone用ケース2024年") == ["iphone", "用ケ", "ケー", "ース", "2024", "年"]


def test_stemming_follows_the_language() -> None:
    assert EN.terms("running runs connected connections") == ["run", "run", "connect", "connect"]
    assert PLAIN.terms("running runs") == ["running", "runs"]
    german = Analyzer(stemmer="german")
    assert german.terms("Häuser Hauses") == ["haus", "haus"]
    # numbers, codes and CJK are never stemmed
    assert EN.terms("1990s INV2024 東京") == ["1990s", "inv2024", "東京"]


def test_english_possessives_and_stop_words_go() -> None:
    assert EN.terms("The company's drivers don't stop.") == ["compani", "driver", "don", "stop"]
    # other languages keep every word ("die", "was" are German content words as often as not)
    assert Analyzer(stemmer="german").terms("die Katze, was") == ["die", "katz", "was"]


def test_numbers_and_codes() -> None:
    text = "Invoice INV-2024-0042 of 2024-01-05, total 1,234.56 and INV2024"
    assert spans(EN, text) == [
        ("invoic", "Invoice"),
        ("inv", "INV"),
        ("2024", "2024"),
        ("0042", "0042"),
        ("inv20240042", "INV-2024-0042"),  # a code with a digit: its parts, and its parts joined
        ("2024", "2024"),
        ("01", "01"),
        ("05", "05"),
        ("20240105", "2024-01-05"),
        ("total", "total"),
        ("1", "1"),
        ("234", "234"),
        ("56", "56"),
        ("123456", "1,234.56"),
        ("inv2024", "INV2024"),
    ]
    # the code typed solid, or with other separators, finds the joined term
    assert "inv20240042" in EN.terms("INV20240042")
    assert "inv20240042" in EN.terms("inv/2024/0042")
    # words joined by hyphens without a digit give their parts only
    assert EN.terms("state-of-the-art e-mail") == ["state", "art", "e", "mail"]
    assert PLAIN.terms("file_name") == ["file", "name"]


def test_very_long_tokens_are_dropped() -> None:
    assert PLAIN.terms(f"short {'x' * 41} {'y' * 40} {'1' * 41}") == ["short", "y" * 40]


def test_empty_and_symbol_only_text_have_no_terms() -> None:
    assert EN.tokens("") == []
    assert EN.terms(" — ∈ ⇒ … !? \r\n") == []


def test_an_unknown_stemmer_is_refused_with_the_known_ones() -> None:
    with pytest.raises(pydantic.ValidationError) as caught:
        Analyzer(stemmer="klingon")
    message = str(caught.value)
    assert "unknown stemmer 'klingon'" in message
    assert "english" in message and "german" in message and "'none'" in message


def test_the_analyzer_is_a_comparable_record() -> None:
    assert Analyzer() == Analyzer(stemmer="english", version=1)
    assert Analyzer(stemmer="french") != Analyzer()
    assert Analyzer.model_validate_json(Analyzer(stemmer="none").model_dump_json()) == PLAIN
    with pytest.raises(pydantic.ValidationError):
        Analyzer.model_validate({"stemmer": "english", "lowercase": True})  # extra fields: forbidden
    with pytest.raises(pydantic.ValidationError):
        EN.stemmer = "german"  # type: ignore[misc]


# -- term ids and vectors -----------------------------------------------------------------------------------


def test_term_id_is_a_stable_unsigned_32_bit_number() -> None:
    assert term_id("invoice") == 1557374889
    assert term_id("東京") == 3179978821
    assert all(0 <= term_id(t) < 2**32 for t in ["", "a", "x" * 40])
    code = "from docvec._text._terms import term_id; print(term_id('invoice'), term_id('東京'))"
    other = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONHASHSEED": "123", "PATH": ""},
    )
    assert other.stdout.split() == ["1557374889", "3179978821"]


def bm25_tf(tf: int, length: int, k1: float = 1.2, b: float = 0.75, avg_len: float = 250.0) -> float:
    return tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / avg_len))


def test_document_vector_holds_bm25_term_frequency_weights() -> None:
    weights = TermWeights()
    assert (weights.k1, weights.b, weights.avg_len) == (1.2, 0.75, 250.0)
    short = document_vector("alpha beta beta beta", PLAIN, weights)  # 4 terms
    assert short.indices == sorted([term_id("alpha"), term_id("beta")])
    by_id = dict(zip(short.indices, short.values, strict=True))
    # by hand: 1 * 2.2 / (1 + 1.2 * (0.25 + 0.75 * 4 / 250)) and 3 * 2.2 / (3 + 1.2 * (0.25 + 0.75 * 4 / 250))
    assert by_id[term_id("alpha")] == pytest.approx(2.2 / 1.3144, rel=1e-12)
    assert by_id[term_id("beta")] == pytest.approx(6.6 / 3.3144, rel=1e-12)

    long_text = "alpha beta beta beta " + " ".join(f"filler{i}" for i in range(496))  # 500 terms
    long = dict(zip(*_pairs(document_vector(long_text, PLAIN, weights)), strict=True))
    assert long[term_id("alpha")] == pytest.approx(2.2 / (1 + 1.2 * (0.25 + 0.75 * 2)), rel=1e-12)
    assert long[term_id("beta")] == pytest.approx(bm25_tf(3, 500), rel=1e-12)
    assert long[term_id("beta")] < by_id[term_id("beta")]  # the longer page weighs the same tf less

    other = TermWeights(k1=1.5, b=0.5, avg_len=100.0)
    custom = dict(zip(*_pairs(document_vector("alpha beta beta beta", PLAIN, other)), strict=True))
    assert custom[term_id("beta")] == pytest.approx(bm25_tf(3, 4, k1=1.5, b=0.5, avg_len=100.0))


def _pairs(vector: SparseVector) -> tuple[list[int], list[float]]:
    assert vector.indices == sorted(set(vector.indices))
    assert len(vector.values) == len(vector.indices)
    assert all(isinstance(v, float) for v in vector.values)
    return vector.indices, vector.values


def test_document_vector_of_text_without_terms_is_empty() -> None:
    assert document_vector("", EN, TermWeights()) == SparseVector([], [])
    assert document_vector("the — of", EN, TermWeights()) == SparseVector([], [])


def test_colliding_terms_add_their_counts_before_weighing() -> None:
    assert term_id("w52890") == term_id("w55286") == 2945923960  # a 32-bit collision
    vector = document_vector("w52890 w55286 w52890 other", PLAIN, TermWeights())
    by_id = dict(zip(*_pairs(vector), strict=True))
    assert by_id[2945923960] == pytest.approx(bm25_tf(3, 4))


def test_query_vector_counts_each_term() -> None:
    vector = query_vector("Running shoes, running fast", EN)
    assert dict(zip(*_pairs(vector), strict=True)) == {
        term_id("run"): 2.0,
        term_id("shoe"): 1.0,
        term_id("fast"): 1.0,
    }
    assert query_vector("the of", EN) == SparseVector([], [])
    # the query is analysed as the page is: the page's terms are the query's
    page = document_vector("Cafés in Zürich", EN, TermWeights())
    assert set(query_vector("cafe zurich", EN).indices) == set(page.indices)


# -- snippets -----------------------------------------------------------------------------------------------


def marked(s: Snippet) -> list[str]:
    return [s.text[a:b] for a, b in s.marks]


def check_marks(s: Snippet) -> None:
    assert s.marks == sorted(s.marks)
    assert all(0 <= a < b <= len(s.text) for a, b in s.marks)
    assert all(b1 < a2 for (_, b1), (a2, _) in zip(s.marks, s.marks[1:], strict=False))


FILLER = " ".join(f"lorem{i}" for i in range(60))


def test_snippet_picks_the_window_with_the_query_terms() -> None:
    text = f"{FILLER} The total amount due is 42 EUR. {FILLER} amount again {FILLER} total alone"
    s = snippet(text, "total amount due", EN)
    assert s is not None
    check_marks(s)
    assert [m.lower() for m in marked(s)] == ["total", "amount", "due"]
    assert "The total amount due is 42 EUR." in s.text
    assert s.text.startswith(ELLIPSIS) and s.text.endswith(ELLIPSIS)
    assert 150 <= len(s.text) <= 210
    # cut at word boundaries: what follows the leading ellipsis is a whole word of the text
    first = s.text[1:].split(" ")[0]
    last = s.text[:-1].split(" ")[-1]
    assert first in text.split(" ") and last in text.split(" ")


def test_snippet_prefers_distinct_terms_then_more_occurrences_then_the_earliest() -> None:
    text = f"apple apple apple {FILLER} apple banana {FILLER} banana apple banana {FILLER} apple banana"
    s = snippet(text, "apple banana", PLAIN, width=60)
    assert s is not None
    assert marked(s) == ["banana", "apple", "banana"]  # both terms, three occurrences
    s = snippet(f"{FILLER} apple banana {FILLER} banana apple", "apple banana", PLAIN, width=60)
    assert s is not None
    assert "lorem59 apple banana lorem0" in s.text  # equal windows: the earliest


def test_snippet_marks_slice_to_the_original_words() -> None:
    text = "Le Café de Flore\r\n   est   ouvert. He runs daily; RUNNING is good."
    s = snippet(text, "cafe running", EN)
    assert s == Snippet(
        text="Le Café de Flore est ouvert. He runs daily; RUNNING is good.",  # white space collapsed
        marks=[(3, 7), (32, 36), (44, 51)],
    )
    assert marked(s) == ["Café", "runs", "RUNNING"]


def test_snippet_marks_cjk_bigrams_and_merges_overlaps() -> None:
    s = snippet("東京都に住んでいます。京都も好きです。", "京都", PLAIN)
    assert s is not None
    assert marked(s) == ["京都", "京都"]
    s = snippet("東京都に住んでいます。", "東京都", PLAIN)  # bigrams 東京 and 京都 overlap: one mark
    assert s is not None
    assert marked(s) == ["東京都"]
    long = "東京都に住んでいます。" * 40 + "大阪"
    s = snippet(long, "大阪", PLAIN)
    assert s is not None and s.text.startswith(ELLIPSIS) and s.text.endswith("大阪")
    assert marked(s) == ["大阪"]


def test_snippet_marks_a_whole_code() -> None:
    s = snippet("Invoice INV-2024-0042, total 10", "inv-2024-0042", EN)
    assert s is not None
    assert marked(s) == ["INV-2024-0042"]


def test_snippet_without_a_match_is_the_start_of_the_page() -> None:
    text = "Quarterly report. " + FILLER
    s = snippet(text, "zebra", EN)
    assert s is not None
    assert s.marks == []
    assert s.text.startswith("Quarterly report. lorem0") and s.text.endswith(ELLIPSIS)
    assert len(s.text) <= 201
    assert snippet("A short page.", "the", EN) == Snippet(text="A short page.", marks=[])  # no query terms


def test_snippet_of_empty_text_is_none() -> None:
    assert snippet("", "anything", EN) is None
    assert snippet(" \r\n\t ", "anything", EN) is None


def test_snippet_cuts_a_text_without_spaces() -> None:
    s = snippet("a" * 300, "b", EN)
    assert s is not None
    assert s.text == "a" * 200 + ELLIPSIS


def test_term_weights_refuse_what_bm25_cannot_use() -> None:
    for bad in [{"k1": -1.0}, {"b": 1.5}, {"avg_len": 0.0}]:
        with pytest.raises(ValueError, match="BM25 needs"):
            TermWeights(**bad)
