"""The text layer through docvec.Index, on the embedded store and on the server backend (qdrant-client's
local mode): pages' text stored with their vectors, keyword search, its fusion with the visual ranking,
snippets, a page's whole text, and `reindex --text`, which embeds no page again."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from docvec import (
    ConflictError,
    Embedder,
    EmbedSettings,
    Index,
    ModelFiles,
    ReindexSpec,
    RenderSettings,
    SearchFilter,
    Settings,
)
from docvec._store import Filter

from .documents import make_pages_pdf
from .helpers import load_flow

SMALL = 28 * 28 * 64
#: a word no other page has: a product code, as a user would search for one
RARE = "ZQ7XK42"
FILLER = [
    "Quarterly report of the northern region",
    "Revenue by product line and by month",
    "Minutes of the board meeting in March",
    "Travel expenses and their receipts",
    "Warranty terms for the service contract",
    "Delivery schedule for spare parts",
    "Staff handbook, chapter on holidays",
    "Invoice for consulting services rendered",
    "Safety instructions for the workshop",
    "Budget plan for the coming year",
    "Letter to the shareholders",
    "Inventory count of the warehouse",
]


@pytest.fixture(scope="module")
def small(tiny_files: ModelFiles) -> Iterator[Embedder]:
    with Embedder(tiny_files, EmbedSettings(max_pixels=SMALL, threads=2)) as emb:
        yield emb


def _settings(data: Path, tiny_dir: Path, **extra: Any) -> Settings:
    return Settings(
        data_dir=data,
        model=str(tiny_dir),
        embed=EmbedSettings(max_pixels=SMALL, threads=2),
        render=RenderSettings(workers=1),
        **({"ocr": "off"} | extra),
    )


def _documents(folder: Path, rare_on: int) -> list[Path]:
    """One single-page PDF per filler line; the page ``rare_on`` also holds the rare code."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, line in enumerate(FILLER):
        lines = [line, f"Document number {i + 1} of the archive, filed by the office."]
        if i == rare_on:
            lines.append(f"Part code {RARE} is listed here.")
        paths.append(make_pages_pdf(folder / f"doc-{i:02d}.pdf", [lines]))
    return paths


BACKENDS = [pytest.param(None, id="embedded"), pytest.param(":memory:", id="server-backend")]


@pytest.mark.parametrize("url", BACKENDS)
def test_a_rare_code_is_found_by_keywords_and_lifted_by_fusion(
    tmp_path: Path, small: Embedder, tiny_dir: Path, url: str | None
) -> None:
    # the visual ranking of the random-weight model is as good as chance: it puts the page with the code
    # in its top 3 for few choices of that page; for each other choice, keywords must find it and fusion
    # must lift it into the top 3
    lifted = 0
    for rare_on in (0, 5, 10):
        data = tmp_path / f"data-{rare_on}-{url is None}"
        with Index.open(_settings(data, tiny_dir, qdrant_url=url), embedder=small) as index:
            report = index.add(_documents(tmp_path / f"docs-{rare_on}", rare_on))
            assert report.ok and report.pages_indexed == len(FILLER)
            assert index.search_mode() == "dense+text"  # auto: fused, on a collection with text
            query = f"part {RARE}"
            target = f"doc-{rare_on:02d}.pdf"

            found = index.search(query, k=3, mode="text")
            assert found[0].name == target
            # the snippet shows the code, marked, and the rest of the line around it
            assert found[0].snippet is not None
            marked = [found[0].snippet.text[a:b] for a, b in found[0].snippet.marks]
            assert RARE in marked and "Part" in marked
            assert found[0].text is None  # only when asked for

            visual = [h.name for h in index.search(query, k=3, mode="dense")]
            fused = index.search(query, k=3)
            assert target in [h.name for h in fused]
            assert fused[0].snippet is not None
            if target not in visual:
                lifted += 1
    assert lifted >= 1, "the visual ranking put the page in its top 3 every time: choose other pages"


@pytest.mark.parametrize("url", BACKENDS)
def test_filters_hold_in_every_mode_and_text_comes_with_hits_on_request(
    tmp_path: Path, small: Embedder, tiny_dir: Path, url: str | None
) -> None:
    docs = _documents(tmp_path / "docs", rare_on=3)
    with Index.open(_settings(tmp_path / "data", tiny_dir, qdrant_url=url), embedder=small) as index:
        assert index.add(docs[:6], tags=["team=a"]).ok
        assert index.add(docs[6:], tags=["team=b"]).ok
        team_b = SearchFilter(tags={"team": "b"})
        for mode in ("text", "dense", "dense+text"):
            # "the" and "of" are in every page's text; the filter alone decides
            hits = index.search("report of the office", k=10, filter=team_b, mode=mode)  # type: ignore[arg-type]
            assert hits and {h.tags["team"] for h in hits} == {"b"}, mode
        rare = index.search(RARE, k=5, filter=team_b, mode="text")
        assert rare == []  # the code is on a page of team a
        whole = index.search(RARE, k=1, mode="text", with_text=True)[0]
        assert whole.text is not None and RARE in whole.text and FILLER[3] in whole.text
        page = index.page_text(whole.doc_id, whole.page)
        assert page.text == whole.text and page.text_from == "pdf"


def test_accents_and_symbols_round_trip_and_match_either_way(
    tmp_path: Path, small: Embedder, tiny_dir: Path
) -> None:
    line = "Café crème, Übergröße & naïve façade: 12,50 € (TVA 20%)"
    pdf = make_pages_pdf(tmp_path / "menu.pdf", [[line]])
    with Index.open(_settings(tmp_path / "data", tiny_dir), embedder=small) as index:
        assert index.add([pdf]).ok
        doc = index.documents().documents[0]
        assert index.page_text(doc.doc_id, 1).text == line
        for query in ("cafe creme", "Café", "ubergrosse", "FACADE"):
            hits = index.search(query, k=1, mode="text")
            assert hits and hits[0].doc_id == doc.doc_id, query
            assert hits[0].snippet is not None and hits[0].snippet.marks, query


def test_a_collection_without_text_refuses_keyword_modes_until_reindex_adds_it_without_embedding(
    tmp_path: Path, small: Embedder, tiny_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = _documents(tmp_path / "docs", rare_on=2)
    data = tmp_path / "data"
    with Index.open(_settings(data, tiny_dir, text=False), embedder=small) as index:
        assert index.add(docs).ok
        assert index.search_mode() == "dense"
        with pytest.raises(ConflictError, match="reindex --text"):
            index.search(RARE, mode="text")
        with pytest.raises(ConflictError, match="keeps no text"):
            index.page_text(index.documents().documents[0].doc_id, 1)
        before = {(h.doc_id, h.page): h.score for h in index.search("budget", k=12, mode="dense")}
        old = index.versions()[-1].version

    def no_embedding(*args: object, **kwargs: object) -> None:
        raise AssertionError("reindex --text embedded a page")

    monkeypatch.setattr(Embedder, "embed_images", no_embedding)
    monkeypatch.setattr(Embedder, "embed_images_multi", no_embedding)
    # the settings say no text for new collections: --text wins for this version
    with Index.open(_settings(data, tiny_dir, text=False), embedder=small) as index:
        report = index.reindex(ReindexSpec(text=True))
        assert report.switched and report.pages_embedded == 0
        assert report.pages_carried == len(FILLER) and report.pages_with_text == len(FILLER)
        assert report.vanished == []  # the files are there: carried because nothing else changed
        versions = index.versions()
        assert [v.text for v in versions] == [False, True] and versions[0].version == old
        assert index.search_mode() == "dense+text"
        assert index.search(RARE, k=1, mode="text")[0].name == "doc-02.pdf"
        after = {(h.doc_id, h.page): h.score for h in index.search("budget", k=12, mode="dense")}
        assert after.keys() == before.keys()
        assert np.allclose([after[p] for p in before], list(before.values()), atol=1e-6)
        # run again: nothing to do
        assert index.reindex(ReindexSpec(text=True)).new_version is None
    # a stemmer the settings name explicitly is taken by the next reindex (the vectors carried again)
    with Index.open(_settings(data, tiny_dir, text_stemmer="none"), embedder=small) as index:
        again = index.reindex()
        assert again.switched and (again.pages_embedded, again.pages_with_text) == (0, len(FILLER))
        assert index._live.text(again.new_version or "").analyzer.stemmer == "none"  # type: ignore[union-attr]
        # "budget" is on one page; without stems "budgets" no longer finds it
        assert index.search("budget", k=1, mode="text")[0].name == "doc-09.pdf"
        assert not index.search("budgets", k=1, mode="text")


def test_a_page_without_text_has_no_terms_and_is_found_by_its_look_only(
    tmp_path: Path, small: Embedder, tiny_dir: Path
) -> None:
    from .helpers import page_image

    image = page_image(300, 400, seed=3)
    image.save(tmp_path / "photo.png")
    docs = _documents(tmp_path / "docs", rare_on=0)
    with Index.open(_settings(tmp_path / "data", tiny_dir), embedder=small) as index:
        assert index.add([*docs, tmp_path / "photo.png"]).ok
        photo = next(d for d in index.documents(limit=100).documents if d.name == "photo.png")
        assert index.page_text(photo.doc_id, 1).text == ""
        stored = index.stored_pages(photo.doc_id)[0]
        assert (
            stored.text is None
            and stored.text_from is None
            and index.pages_of(photo.doc_id)[0].text_from is None
        )
        # the fused ranking still reaches it by its look; a keyword search never does
        assert photo.doc_id in {h.doc_id for h in index.search("photo", k=13)}
        assert photo.doc_id not in {h.doc_id for h in index.search("photo office report", k=13, mode="text")}
        hit = next(h for h in index.search("photo", k=13) if h.doc_id == photo.doc_id)
        assert hit.snippet is None
        store = index._store
        version = index.versions()[-1].version
        assert store.count(version, Filter(doc_ids=(photo.doc_id,))) == 1


def test_the_command_line_shows_snippets_and_eval_scores_keyword_modes(
    tmp_path: Path, tiny_dir: Path
) -> None:
    import json

    from typer.testing import CliRunner

    from docvec._cli import app

    runner = CliRunner()
    env = {
        "DOCVEC_DATA_DIR": str(tmp_path / "data"),
        "DOCVEC_MODEL": str(tiny_dir),
        "DOCVEC_EMBED__MAX_PIXELS": str(SMALL),
        "DOCVEC_OCR": "off",
        "COLUMNS": "120",
    }
    corpus = tmp_path / "ds" / "corpus"
    _documents(corpus, rare_on=4)
    r = runner.invoke(app, ["ingest", str(corpus)], env=env)
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["search", f"code {RARE}", "-k", "2", "--mode", "text"], env=env)
    assert r.exit_code == 0, r.output
    assert "doc-04.pdf" in r.stdout and f"Part code {RARE} is listed here." in " ".join(r.stdout.split())
    r = runner.invoke(app, ["search", RARE, "-k", "1", "--json", "--with-text"], env=env)
    assert r.exit_code == 0, r.output
    (hit,) = json.loads(r.stdout)
    assert hit["name"] == "doc-04.pdf" and RARE in hit["text"]
    assert [hit["snippet"]["text"][a:b] for a, b in hit["snippet"]["marks"]] == [RARE]

    # a dataset whose queries are words on its pages: keywords find each one's page first
    queries = {"q1": f"part {RARE}", "q2": "spare parts delivery", "q3": "letter to the shareholders"}
    (tmp_path / "ds" / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in queries.items())
    )
    (tmp_path / "ds" / "qrels.tsv").write_text("q1\tdoc-04\t1\nq2\tdoc-05\t1\nq3\tdoc-10\t1\n")
    args = ["eval", str(tmp_path / "ds"), "-k", "3", "--mode", "dense", "--mode", "text", "--mode", "auto"]
    r = runner.invoke(app, [*args, "--json"], env=env)
    assert r.exit_code == 0, r.output
    modes = json.loads(r.stdout)["modes"]
    assert set(modes) == {"dense", "text", "dense+text"}
    assert modes["text"]["ndcg@5"] == pytest.approx(1.0)
    assert modes["dense+text"]["recall@3"] == pytest.approx(1.0)  # found by keywords, kept by the fusion


def test_a_scan_is_read_by_ocr_and_cjk_text_is_found_by_its_words(
    tmp_path: Path, small: Embedder, tiny_dir: Path
) -> None:
    from docvec._render import _ocr

    from .test_render_text import SCAN_LINES, cjk_layer_pdf, scan_pdf

    assert _ocr.available() is None, "OCR's engine must be here: `make test` installs tesseract"
    scan = scan_pdf(tmp_path / "scan.pdf")
    cjk_line = "東京都の人口は約1400万人です"
    cjk = cjk_layer_pdf(tmp_path / "tokyo.pdf", [cjk_line])
    with Index.open(_settings(tmp_path / "data", tiny_dir, ocr="auto"), embedder=small) as index:
        assert index.add([scan, cjk]).ok
        by_name = {d.name: d.doc_id for d in index.documents().documents}
        read = index.page_text(by_name["scan.pdf"], 1)
        assert read.text_from == "ocr" and SCAN_LINES[0].split()[0] in read.text
        word = max(SCAN_LINES[0].split(), key=len).strip(".,")
        assert index.search(word, k=1, mode="text")[0].name == "scan.pdf"
        tokyo = index.page_text(by_name["tokyo.pdf"], 1)
        assert (tokyo.text, tokyo.text_from) == (cjk_line, "pdf")
        hit = index.search("人口", k=1, mode="text")[0]
        assert hit.name == "tokyo.pdf" and hit.snippet is not None
        assert [hit.snippet.text[a:b] for a, b in hit.snippet.marks] == ["人口"]
    # with OCR off the scan keeps no text
    with Index.open(_settings(tmp_path / "data2", tiny_dir, ocr="off"), embedder=small) as index:
        assert index.add([scan]).ok
        doc = index.documents().documents[0]
        assert index.page_text(doc.doc_id, 1).text == ""


def test_the_text_settings_are_checked_when_read() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="unknown stemmer 'klingon': use one of arabic"):
        Settings(text_stemmer="klingon")
    with pytest.raises(ValidationError, match="ocr"):
        Settings(ocr="maybe")  # type: ignore[arg-type]
    assert Settings(text_stemmer="none").text_stemmer == "none"


def test_the_batch_query_flow_hands_each_hit_its_page_text(
    prefect_harness: None, tmp_path: Path, small: Embedder, tiny_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    data = tmp_path / "data"
    with Index.open(_settings(data, tiny_dir), embedder=small) as index:
        assert index.add(_documents(tmp_path / "docs", rare_on=7)).ok
    env = {
        "DOCVEC_DATA_DIR": str(data),
        "DOCVEC_MODEL": str(tiny_dir),
        "DOCVEC_EMBED__MAX_PIXELS": str(SMALL),
        "DOCVEC_SEARCH_MODE": "text",
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    module = load_flow("query")
    queries = tmp_path / "queries.txt"
    queries.write_text(f"{RARE}\nwarranty terms\n")
    out = tmp_path / "hits.jsonl"
    assert module.query_flow(str(queries), str(out), k=1, with_text=True) == 2
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["hits"][0]["name"] for r in rows] == ["doc-07.pdf", "doc-04.pdf"]
    assert RARE in rows[0]["hits"][0]["text"] and FILLER[4] in rows[1]["hits"][0]["text"]
    assert rows[1]["hits"][0]["snippet"]["marks"]
