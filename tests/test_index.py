"""docvec.Index, the front door: its verbs end to end with the real parts, and what it does not load."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from docvec import (
    CollectionNotFoundError,
    Embedder,
    EmbedSettings,
    Index,
    InputError,
    ModelFiles,
    NotFoundError,
    RenderSettings,
    SearchFilter,
    Settings,
)

from .helpers import page_image

SMALL = 28 * 28 * 64


@pytest.fixture(scope="module")
def small(tiny_files: ModelFiles) -> Iterator[Embedder]:
    with Embedder(tiny_files, EmbedSettings(max_pixels=SMALL, threads=2)) as emb:
        yield emb


def _settings(tmp_path: Path, tiny_dir: Path) -> Settings:
    return Settings(
        data_dir=tmp_path / "data",
        model=str(tiny_dir),
        embed=EmbedSettings(max_pixels=SMALL, threads=2),
        render=RenderSettings(workers=1),
    )


def test_the_verbs_end_to_end(tmp_path: Path, documents: Path, small: Embedder, tiny_dir: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    shutil.copy(documents / "pysamples__pdflatex-4-pages.pdf", docs / "report.pdf")
    page_image(300, 400, seed=1).save(docs / "scan.png")
    with Index.open(_settings(tmp_path, tiny_dir), embedder=small) as index:
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
    with Index.open(_settings(tmp_path, tiny_dir), embedder=small) as again:  # closed means released
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


def test_searching_before_anything_is_indexed(tmp_path: Path, small: Embedder, tiny_dir: Path) -> None:
    with (
        Index.open(_settings(tmp_path, tiny_dir), embedder=small) as index,
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
    tmp_path: Path, small: Embedder, tiny_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    page_image(200, 300, seed=4).save(tmp_path / "mine.png")
    with Index.open(_settings(tmp_path, tiny_dir), embedder=small) as index:
        assert index.add(["~/mine.png"]).documents_indexed == 1  # ~ is the home folder, as in a shell
        assert index.documents().documents[0].source == str(tmp_path / "mine.png")
        assert index.delete("~/mine.png") == 1
    assert (tmp_path / "mine.png").is_file()  # a user's own file is never touched


def test_delete_by_an_id_prefix_only_one_id_has(tmp_path: Path) -> None:
    import numpy as np

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
