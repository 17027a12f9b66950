"""docvec.Index, the front door: its verbs end to end with the real parts, and what it does not load; then
the text layer through it, on the embedded store and on the server backend (qdrant-client's local mode):
pages' text stored with their vectors, keyword search, its fusion with the visual ranking, snippets, a
page's whole text, OCR, and `reindex --text`, which embeds no page again."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from docvec import (
    CollectionNotFoundError,
    ConflictError,
    Embedder,
    Index,
    InputError,
    NotFoundError,
    ReindexSpec,
    SearchFilter,
    Settings,
)
from docvec._store import Filter

from .documents import FILLER, RARE, SCAN_LINES, cjk_layer_pdf, filler_pdfs, make_pages_pdf, scan_pdf
from .helpers import index_settings, page_image


def _settings(tmp_path: Path, tiny_dir: Path) -> Settings:
    return index_settings(tmp_path / "data", tiny_dir)


def _text_settings(data: Path, tiny_dir: Path, **extra: Any) -> Settings:
    """An index's settings with OCR off unless ``extra`` turns it on."""
    return index_settings(data, tiny_dir, **({"ocr": "off"} | extra))


def test_the_verbs_end_to_end(
    tmp_path: Path, documents: Path, small_embedder: Embedder, tiny_dir: Path
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    shutil.copy(documents / "pysamples__pdflatex-4-pages.pdf", docs / "report.pdf")
    page_image(300, 400, seed=1).save(docs / "scan.png")
    with Index.open(_settings(tmp_path, tiny_dir), embedder=small_embedder) as index:
        report = index.add([docs / "report.pdf"], tags=["team=legal"])
        assert (report.documents_indexed, report.pages_indexed) == (1, 4) and report.ok
        again = index.add([docs], tags=["team=legal"])  # the scan is new; the report is skipped unchanged
        assert (again.documents_indexed, again.documents_skipped, again.documents_updated) == (1, 1, 0)

        hits = index.search("quarterly figures", k=10)
        assert len(hits) == 5 and [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
        pdf = SearchFilter(source=str(docs / "report.pdf"), tags={"team": "legal"})
        legal = index.search("quarterly figures", k=10, filter=pdf)
        assert {(h.source, h.page) for h in legal} == {(str(docs / "report.pdf"), n) for n in range(1, 5)}
        assert all(h.tags == {"team": "legal"} and h.name == "report.pdf" for h in legal)

        listing = index.documents()
        assert listing.total == 2 and [d.source for d in listing.documents] == sorted(
            str(docs / n) for n in ("report.pdf", "scan.png")
        )
        report_id = legal[0].doc_id
        pages = index.pages_of(report_id)
        assert [(p.doc_id, p.page) for p in pages] == [(report_id, n) for n in (1, 2, 3, 4)]
        assert index.page_file(report_id, 2).read_bytes().startswith(b"\x89PNG")
        assert index.page_file(report_id, 2, thumbnail=True).read_bytes().startswith(b"\xff\xd8\xff")
        with pytest.raises(NotFoundError):
            index.page_file(report_id, 9)

        assert index.count() == 5
        assert index.delete(str(docs / "report.pdf")) == 4  # by path
        assert index.delete(index.documents().documents[0].doc_id) == 1  # by id
        assert index.count() == 0 and index.delete("0" * 32) == 0
    with Index.open(_settings(tmp_path, tiny_dir), embedder=small_embedder) as again:  # closed means released
        assert again.documents().total == 0


def test_listing_and_deleting_load_no_model(tmp_path: Path) -> None:
    # the model setting points at nothing: only a verb that needs the model may notice
    with Index.open(tmp_path / "data", model=str(tmp_path / "no-model")) as index:
        assert index.documents().total == 0 and index.count() == 0
        assert index.delete("0" * 32) == 0
        with pytest.raises(InputError, match="the query is empty"):
            index.search("   ", 5)  # checked before the model would load
        with pytest.raises(InputError, match="k must be between 1 and 100"):
            index.search("x", 0)
        assert index._live._model is None


def test_searching_before_anything_is_indexed(
    tmp_path: Path, small_embedder: Embedder, tiny_dir: Path
) -> None:
    with (
        Index.open(_settings(tmp_path, tiny_dir), embedder=small_embedder) as index,
        pytest.raises(CollectionNotFoundError, match="run `docvec ingest` first"),
    ):
        index.search("anything", 3)


def test_open_takes_settings_a_folder_or_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DOCVEC_DATA_DIR", str(tmp_path / "from-env"))
    monkeypatch.setenv("DOCVEC_COLLECTION", "papers")
    with Index.open() as index:
        assert index.settings.data_dir == tmp_path / "from-env" and index.collection == "papers"
    with Index.open(tmp_path / "folder", collection="scans") as index:
        assert index.settings.data_dir == tmp_path / "folder" and index.collection == "scans"
    with Index.open(Settings(data_dir=tmp_path / "s"), collection="other") as index:
        assert index.settings.data_dir == tmp_path / "s" and index.collection == "other"
    assert (tmp_path / "folder" / "qdrant").is_dir()


def test_paths_under_home(
    tmp_path: Path, small_embedder: Embedder, tiny_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    page_image(200, 300, seed=4).save(tmp_path / "mine.png")
    with Index.open(_settings(tmp_path, tiny_dir), embedder=small_embedder) as index:
        assert index.add(["~/mine.png"]).documents_indexed == 1  # ~ is the home folder, as in a shell
        assert index.documents().documents[0].source == str(tmp_path / "mine.png")
        assert index.delete("~/mine.png") == 1
    assert (tmp_path / "mine.png").is_file()  # a user's own file is never touched


def test_delete_by_an_id_prefix_only_one_id_has(tmp_path: Path) -> None:
    from docvec._store import Point, point_id

    from .helpers import stored_page

    with Index.open(tmp_path / "data") as index:
        store = index._store
        store.ensure_collection(index.collection, 4)
        ids = ["abcd" + "1" * 28, "abcd" + "2" * 28, "beef" + "3" * 28]
        vector = np.ones(4, np.float32)
        store.upsert(
            index.collection, [Point(point_id(d), vector, stored_page(d, f"/docs/{d}")) for d in ids]
        )
        with pytest.raises(InputError, match=r"2 documents have ids starting with 'abcd' \(abcd1+, abcd2+\)"):
            index.delete("abcd")
        assert index.delete("abcd2") == 1 and index.delete("be") == 1  # unique: that document
        assert index.delete("abc") == 1 and index.count() == 0


# -- the text layer ---------------------------------------------------------------------------------------


BACKENDS = [pytest.param(None, id="embedded"), pytest.param(":memory:", id="server-backend")]


@pytest.mark.parametrize("url", BACKENDS)
def test_a_rare_code_is_found_by_keywords_and_lifted_by_fusion(
    tmp_path: Path, small_embedder: Embedder, tiny_dir: Path, url: str | None
) -> None:
    # the visual ranking of the random-weight model is as good as chance: it puts the page with the code
    # in its top 3 for few choices of that page; for each other choice, keywords must find it and fusion
    # must lift it into the top 3
    lifted = 0
    for rare_on in (0, 5, 10):
        data = tmp_path / f"data-{rare_on}-{url is None}"
        with Index.open(_text_settings(data, tiny_dir, qdrant_url=url), embedder=small_embedder) as index:
            report = index.add(filler_pdfs(tmp_path / f"docs-{rare_on}", rare_on))
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
    tmp_path: Path, small_embedder: Embedder, tiny_dir: Path, url: str | None
) -> None:
    docs = filler_pdfs(tmp_path / "docs", rare_on=3)
    with Index.open(
        _text_settings(tmp_path / "data", tiny_dir, qdrant_url=url), embedder=small_embedder
    ) as index:
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
    tmp_path: Path, small_embedder: Embedder, tiny_dir: Path
) -> None:
    line = "Café crème, Übergröße & naïve façade: 12,50 € (TVA 20%)"
    pdf = make_pages_pdf(tmp_path / "menu.pdf", [[line]])
    with Index.open(_text_settings(tmp_path / "data", tiny_dir), embedder=small_embedder) as index:
        assert index.add([pdf]).ok
        doc = index.documents().documents[0]
        assert index.page_text(doc.doc_id, 1).text == line
        for query in ("cafe creme", "Café", "ubergrosse", "FACADE"):
            hits = index.search(query, k=1, mode="text")
            assert hits and hits[0].doc_id == doc.doc_id, query
            assert hits[0].snippet is not None and hits[0].snippet.marks, query


def test_a_collection_without_text_refuses_keyword_modes_until_reindex_adds_it_without_embedding(
    tmp_path: Path, small_embedder: Embedder, tiny_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = filler_pdfs(tmp_path / "docs", rare_on=2)
    data = tmp_path / "data"
    with Index.open(_text_settings(data, tiny_dir, text=False), embedder=small_embedder) as index:
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
    with Index.open(_text_settings(data, tiny_dir, text=False), embedder=small_embedder) as index:
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
    with Index.open(_text_settings(data, tiny_dir, text_stemmer="none"), embedder=small_embedder) as index:
        again = index.reindex()
        assert again.switched and (again.pages_embedded, again.pages_with_text) == (0, len(FILLER))
        assert index._live.text(again.new_version or "").analyzer.stemmer == "none"  # type: ignore[union-attr]
        # "budget" is on one page; without stems "budgets" no longer finds it
        assert index.search("budget", k=1, mode="text")[0].name == "doc-09.pdf"
        assert not index.search("budgets", k=1, mode="text")


def test_a_page_without_text_has_no_terms_and_is_found_by_its_look_only(
    tmp_path: Path, small_embedder: Embedder, tiny_dir: Path
) -> None:
    image = page_image(300, 400, seed=3)
    image.save(tmp_path / "photo.png")
    docs = filler_pdfs(tmp_path / "docs", rare_on=0)
    with Index.open(_text_settings(tmp_path / "data", tiny_dir), embedder=small_embedder) as index:
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


def test_a_scan_is_read_by_ocr_and_cjk_text_is_found_by_its_words(
    tmp_path: Path, small_embedder: Embedder, tiny_dir: Path
) -> None:
    from docvec._render import _ocr

    assert _ocr.available() is None, "OCR's engine must be here: `make test` installs tesseract"
    scan = scan_pdf(tmp_path / "scan.pdf")
    cjk_line = "東京都の人口は約1400万人です"
    cjk = cjk_layer_pdf(tmp_path / "tokyo.pdf", [cjk_line])
    with Index.open(
        _text_settings(tmp_path / "data", tiny_dir, ocr="auto"), embedder=small_embedder
    ) as index:
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
    with Index.open(
        _text_settings(tmp_path / "data2", tiny_dir, ocr="off"), embedder=small_embedder
    ) as index:
        assert index.add([scan]).ok
        doc = index.documents().documents[0]
        assert index.page_text(doc.doc_id, 1).text == ""


def test_the_text_settings_are_checked_when_read() -> None:
    with pytest.raises(ValidationError, match="unknown stemmer 'klingon': use one of arabic"):
        Settings(text_stemmer="klingon")
    with pytest.raises(ValidationError, match="ocr"):
        Settings(ocr="maybe")  # type: ignore[arg-type]
    assert Settings(text_stemmer="none").text_stemmer == "none"


def test_pages_indexed_while_ocr_is_missing_are_known_and_reindex_text_reads_them_without_embedding(
    tmp_path: Path, small_embedder: Embedder, tiny_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scan = scan_pdf(tmp_path / "scan.pdf")
    born_digital = filler_pdfs(tmp_path / "docs", rare_on=0)[:1]
    data = tmp_path / "data"
    path = os.environ["PATH"]
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))  # no tesseract on it
    with Index.open(_text_settings(data, tiny_dir, ocr="auto"), embedder=small_embedder) as index:
        report = index.add([scan, *born_digital])
        assert report.ok and report.pages_unread == 1, report
        assert "1 page without OCR's text" in report.summary()
        by_name = {d.name: d.doc_id for d in index.documents().documents}
        assert index.pages_of(by_name["scan.pdf"])[0].text_from == "unread"
        assert index.pages_of(by_name[born_digital[0].name])[0].text_from == "pdf"
        # still no OCR: nothing to do yet, and the note says why
        waiting = index.reindex(ReindexSpec(text=True))
        assert waiting.new_version is None and "OCR still cannot run" in (waiting.note or ""), waiting
        assert "tesseract" in (waiting.note or "")
    monkeypatch.setenv("PATH", path)

    def no_embedding(*args: object, **kwargs: object) -> None:
        raise AssertionError("filling in the text embedded a page")

    monkeypatch.setattr(Embedder, "embed_images", no_embedding)
    with Index.open(_text_settings(data, tiny_dir, ocr="auto"), embedder=small_embedder) as index:
        filled = index.reindex(ReindexSpec(text=True))
        assert filled.switched and filled.pages_embedded == 0 and filled.pages_with_text == 2, filled
        read = index.page_text(by_name["scan.pdf"], 1)
        assert read.text_from == "ocr" and SCAN_LINES[0].split()[0] in read.text
        word = max(SCAN_LINES[0].split(), key=len).strip(".,")
        assert index.search(word, k=1, mode="text")[0].name == "scan.pdf"
        assert index.reindex(ReindexSpec(text=True)).new_version is None  # nothing left unread


def test_a_source_filter_names_a_path_or_a_documents_name_and_documents_are_listed_by_name(
    tmp_path: Path, documents: Path, small_embedder: Embedder, tiny_dir: Path
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    shutil.copy(documents / "pysamples__minimal-document.pdf", docs / "Zeta.pdf")
    page_image(200, 260, seed=3).save(docs / "alpha.png")
    with Index.open(_settings(tmp_path, tiny_dir), embedder=small_embedder) as index:
        assert index.add([docs]).ok
        uploads = []
        for seed, name in ((4, "memo.png"), (5, "beta.png"), (6, "memo.png")):
            image = tmp_path / f"{seed}.png"
            page_image(220, 300, seed=seed).save(image)
            with image.open("rb") as f:
                uploads.append(index.add_upload(f, name=name, limit=1 << 20))
        # an upload's source is its kept copy: its name is the one it came with, and a filter takes it
        memos = {u.doc_id for u in uploads if u.name == "memo.png"}
        assert all(Path(u.source).parent == index.uploads for u in uploads)
        by_name = index.search("x", k=10, filter=SearchFilter(source="memo.png"))
        assert {h.doc_id for h in by_name} == memos and {h.name for h in by_name} == {"memo.png"}
        # a file by its name, or by its path, or its folder's
        for source in ("Zeta.pdf", str(docs / "Zeta.pdf")):
            assert [h.name for h in index.search("x", k=10, filter=SearchFilter(source=source))] == [
                "Zeta.pdf"
            ]
        assert len(index.search("x", k=10, filter=SearchFilter(source=str(docs)))) == 2
        assert index.search("x", filter=SearchFilter(source="nothing.png")).hits == []
        # a relative path names no stored source: said, not answered with nothing
        with pytest.raises(InputError, match=r"filter source 'docs/Zeta\.pdf': a source is an absolute path"):
            index.search("x", filter=SearchFilter(source="docs/Zeta.pdf"))
        # --filter keeps a name a name, and makes a path absolute
        assert SearchFilter.parse(["source=memo.png"]).source == "memo.png"
        assert SearchFilter.parse(["source=./memo.png"]).source == str(Path.cwd() / "memo.png")
        # by name, as a person reads a list (case aside), whatever their sources' paths
        listed = index.documents().documents
        assert [d.name for d in listed] == ["alpha.png", "beta.png", "memo.png", "memo.png", "Zeta.pdf"]
        assert [d.doc_id for d in index.documents(offset=2, limit=2).documents] == [
            d.doc_id for d in listed[2:4]
        ]
