"""Ingestion end to end with the real parts: pypdfium2 in processes, the tiny model, embedded Qdrant."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from docvec import (
    Embedder,
    EmbedSettings,
    Index,
    IngestReport,
    ModelFiles,
    PagePayload,
    SearchFilter,
    Settings,
    discover,
)
from docvec._cli import app
from docvec._errors import RenderError
from docvec._pipeline._feed import END, Failed, Feed
from docvec._pipeline._ingest import IngestProgress, Interrupted
from docvec._records import DocumentSummary
from docvec._render._renderer import DocumentInfo, Renderer
from docvec._store import Filter, PageStore

from .documents import make_text_pdf, make_tiff
from .helpers import MINIMAL, SMALL, index_settings, page_image
from .processes import docvec_after

#: 8x8 tokens a page: rendering and embedding stay fast, the path is the same

#: documents and what must happen to each: (expected pages indexed, failure reason fragments)
CASES = {
    "pysamples__minimal-document.pdf": (1, []),
    "pysamples__pdflatex-4-pages.pdf": (4, []),
    "pysamples__habibi-rotated.pdf": (4, []),
    "pypdf__indirect-rotation.pdf": (5, []),
    "pysamples__smile.png": (1, []),
    "scan.tiff": (2, []),  # generated: two frames, two pages
    "pysamples__image.jpg": (1, []),
    "pdfium__bad_page_type.pdf": (1, ["page 2"]),
    "pdfium__cropped_no_overlap.pdf": (0, ["page 1: the page has no visible area"]),  # one entry
    "pysamples__libreoffice-writer-password.pdf": (0, ["password"]),
    "qpdf__empty.pdf": (0, ["no pages"]),
    "qpdf__bad1.pdf": (0, ["not a document"]),
    "pdfium__bug_325_a.pdf": (0, ["corrupt"]),
}


@pytest.fixture()
def docs(documents: Path, tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    (folder / "sub").mkdir(parents=True)
    for i, name in enumerate(CASES):
        target = folder / ("sub" if i % 3 == 0 else "") / name
        if name == "scan.tiff":
            make_tiff(target, [(300, 400), (400, 300)])
        else:
            shutil.copy(documents / name, target)
    (folder / "notes.txt").write_text("not a document, and not named like one: ignored in folders")
    return folder


@pytest.fixture()
def settings(tmp_path: Path, tiny_dir: Path) -> Settings:
    return index_settings(tmp_path / "data", tiny_dir)


@pytest.fixture()
def index(settings: Settings, small_embedder: Embedder) -> Iterator[Index]:
    with Index.open(settings, embedder=small_embedder) as ix:
        yield ix


def _points(ix: Index) -> dict[str, dict[str, object]]:
    return {pid: p for pid, p in ix._store.scroll(ix.collection)}


def test_documents_each_do_what_the_manifest_says(docs: Path, index: Index) -> None:
    report = index.add([docs])
    by_doc: dict[str, int] = {}
    for p in _points(index).values():
        payload = PagePayload.model_validate(p)  # every stored payload is a valid PagePayload
        by_doc[Path(payload.source).name] = by_doc.get(Path(payload.source).name, 0) + 1
        assert payload.width * payload.height <= SMALL * 4 and payload.page <= payload.page_count
        assert (index.pages.root / payload.image).is_file() and (
            index.pages.root / payload.thumbnail
        ).is_file()
    for name, (pages, reasons) in CASES.items():
        assert by_doc.get(name, 0) == pages, name
        text = " | ".join(
            f"page {f.page}: {f.reason}" if f.page else f.reason
            for f in report.failures
            if Path(f.path).name == name
        )
        for r in reasons:
            assert r in text, (name, text)
        if not reasons:
            assert not text, (name, text)
    # a one-page document whose page fails is one failure, not two
    cropped = [f for f in report.failures if Path(f.path).name == "pdfium__cropped_no_overlap.pdf"]
    assert len(cropped) == 1 and cropped[0].page == 1
    assert report.pages_indexed == sum(p for p, _ in CASES.values())
    assert report.documents_indexed == sum(1 for p, _ in CASES.values() if p)
    assert not any("notes.txt" in f.path for f in report.failures)


def test_pages_embedded_in_groups_are_the_pages_embedded_one_at_a_time(
    docs: Path, index: Index, tmp_path: Path, tiny_dir: Path, tiny_files: ModelFiles
) -> None:
    """With ``embed.vision_batch`` pages go to the model in groups across documents (a group of three
    takes the last page of one document and the first of the next; failed pages keep their place): the
    same points, vectors and failures as one page at a time."""
    report = index.add([docs])
    want = {p.id: p.vector for p in index._store.scroll(index.collection, with_vectors=True)}
    with (
        Embedder(tiny_files, EmbedSettings(max_pixels=SMALL, threads=2, vision_batch=3)) as embedder,
        Index.open(index_settings(tmp_path / "grouped", tiny_dir), embedder=embedder) as grouped,
    ):
        groups: list[int] = []
        embed_images = embedder.embed_images
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(
                embedder, "embed_images", lambda images: groups.append(len(images)) or embed_images(images)
            )
            grouped_report = grouped.add([docs])
        # every group full but the last, although most documents have fewer pages than a group
        assert groups[:-1] == [3] * (len(groups) - 1) and sum(groups) == report.pages_indexed, groups
        got = {p.id: p.vector for p in grouped._store.scroll(grouped.collection, with_vectors=True)}
    assert got.keys() == want.keys() and len(got) == report.pages_indexed
    for pid, vector in got.items():
        cos = np.dot(vector, want[pid]) / (np.linalg.norm(vector) * np.linalg.norm(want[pid]))
        assert float(cos) >= 0.999999, (pid, float(np.abs(vector - want[pid]).max()))
    failures = sorted((f.path, f.page, f.reason) for f in report.failures)
    assert sorted((f.path, f.page, f.reason) for f in grouped_report.failures) == failures


def test_the_next_pages_render_while_a_group_is_embedded(
    tmp_path: Path, tiny_dir: Path, tiny_files: ModelFiles
) -> None:
    """Rendering runs ahead of the model (up to two groups), across documents: pages of the next group
    reach the ingest stage while the model embeds the group before them; their images are written to the
    page store by threads other than the model's."""
    folder = tmp_path / "scans"
    folder.mkdir()
    for i in range(5):
        make_text_pdf(folder / f"scan-{i}.pdf", 2, lines=2 + i)  # five contents
    kinds: list[str] = []
    writers: set[threading.Thread] = set()
    original, put = Renderer.pages, PageStore.put

    def rendering(self: Renderer, document: DocumentInfo, **kw: int) -> Iterator[object]:
        for page in original(self, document, **kw):
            kinds.append("page")
            yield page

    def storing(self: PageStore, image: object) -> object:
        writers.add(threading.current_thread())
        return put(self, image)  # type: ignore[arg-type]

    with (
        Embedder(tiny_files, EmbedSettings(max_pixels=MINIMAL, threads=2, vision_batch=2)) as embedder,
        Index.open(index_settings(tmp_path / "data", tiny_dir, max_pixels=MINIMAL), embedder=embedder) as ix,
        pytest.MonkeyPatch.context() as mp,
    ):
        embed_images = embedder.embed_images

        def slow(images: list[object]) -> object:  # a model slower than rendering, as on a CPU
            kinds.append("embed")
            time.sleep(0.5)
            out = embed_images(images)
            kinds.append("embedded")
            return out

        mp.setattr(embedder, "embed_images", slow)
        mp.setattr(Renderer, "pages", rendering)
        mp.setattr(PageStore, "put", storing)
        report = ix.add([folder])
    assert report.pages_indexed == 10 and report.documents_indexed == 5
    assert writers and threading.current_thread() not in writers  # the model's thread writes no image
    assert kinds.count("embed") == 5 and kinds.count("page") == 10
    # the pages rendered while the model was busy: the whole next group during the first group's turn,
    # most of the eight after the first group in all (a page may come between two groups' turns)
    during = [kinds[start : kinds.index("embedded", start)].count("page") for start in _starts(kinds)]
    assert during[0] >= 2 and sum(during) >= 6, kinds


def _starts(kinds: list[str]) -> list[int]:
    return [i for i, kind in enumerate(kinds) if kind == "embed"]


def test_two_copies_of_a_document_in_one_run_are_embedded_once(
    tmp_path: Path, documents: Path, tiny_dir: Path, tiny_files: ModelFiles
) -> None:
    """A document whose content another one of the run has (still being written when it comes up) waits
    for it, and is then skipped as the same content: pages are embedded once, even when planned ahead."""
    folder = tmp_path / "copies"
    folder.mkdir()
    for name in ("a.pdf", "b.pdf"):
        shutil.copy(documents / "pysamples__pdflatex-4-pages.pdf", folder / name)
    with (
        Embedder(tiny_files, EmbedSettings(max_pixels=SMALL, threads=2, vision_batch=3)) as embedder,
        Index.open(index_settings(tmp_path / "data", tiny_dir), embedder=embedder) as ix,
    ):
        report = ix.add([folder])
        assert (report.documents_indexed, report.documents_skipped) == (1, 1)
        assert (report.pages_indexed, report.pages_skipped) == (4, 4)
        assert ix.count() == 4


def test_a_stop_after_a_document_keeps_the_pages_of_the_next_ones_embedded_with_it(
    tmp_path: Path, documents: Path, tiny_dir: Path, tiny_files: ModelFiles
) -> None:
    """A run stopped (:class:`Interrupted`) as one document ends writes the pages of the next document
    that its group embedded with it, and a rerun goes on after them."""
    folder = tmp_path / "two"
    folder.mkdir()
    shutil.copy(documents / "pysamples__minimal-document.pdf", folder / "a.pdf")  # one page
    make_text_pdf(folder / "b.pdf", 6, lines=2)

    def stop(p: IngestProgress) -> None:
        if p.documents_done == 1:
            raise Interrupted(cancelled=True)

    settings = index_settings(tmp_path / "data", tiny_dir)
    with (
        Embedder(tiny_files, EmbedSettings(max_pixels=SMALL, threads=2, vision_batch=3)) as embedder,
        Index.open(settings, embedder=embedder) as ix,
    ):
        with pytest.raises(Interrupted):
            ix.add([folder], progress=stop)
        states = {d.name: (d.state, d.pages_written) for d in ix.documents().documents}
        # the first group: a's page and b's first two
        assert states == {"a.pdf": ("complete", 1), "b.pdf": ("writing", 2)}, states
        again = ix.add([folder])
        assert (again.documents_indexed, again.pages_indexed, again.pages_resumed) == (1, 4, 2)
        assert ix.count() == 7


def test_a_feed_hands_over_streams_in_order_with_their_ends_and_stops_when_closed() -> None:
    """The ingest stage's feed: each stream's items in order, then its end (or what it raised); a feed
    closed while its thread waits for room closes the stream it was in."""
    closed: list[str] = []

    def stream(name: str, n: int, fail: bool = False) -> Iterator[str]:
        try:
            for i in range(n):
                yield f"{name}{i}"
            if fail:
                raise RenderError(Path(name), "broken")
        finally:
            closed.append(name)

    with Feed[str, str](ahead=2) as feed:
        feed.put("a", lambda: stream("a", 2))
        feed.put("b", lambda: stream("b", 1, fail=True))
        feed.put("c", lambda: stream("c", 0))
        got = [feed.get() for _ in range(6)]
        assert feed.open == 0
    assert got[:3] == [("a", "a0"), ("a", "a1"), ("a", END)]
    assert got[3] == ("b", "b0") and got[4][0] == "b" and isinstance(got[4][1], Failed)
    assert isinstance(got[4][1].error, RenderError) and got[5] == ("c", END)
    with pytest.raises(RuntimeError, match="no stream is open"):
        feed.get()

    feed = Feed[str, str](ahead=1)
    with feed:
        feed.put("long", lambda: stream("long", 1000))
        assert feed.get() == ("long", "long0")
        time.sleep(0.2)  # its thread fills the queue, and waits
    assert closed[-1] == "long" and not feed._thread.is_alive()


def test_a_run_ends_by_optimizing_then_flushing(
    docs: Path, index: Index, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    store = index._store
    optimize, flush = store.optimize, store.flush
    monkeypatch.setattr(store, "optimize", lambda name: calls.append(f"optimize {name}") or optimize(name))
    monkeypatch.setattr(store, "flush", lambda: calls.append("flush") or flush())
    index.add([docs / "sub"])
    # the last writes are quantized (once there are enough of them) before the run says it is done
    assert calls[-2:] == [f"optimize {index.collection}.v1", "flush"]


def test_second_run_skips_unchanged_files_without_rendering(
    docs: Path, index: Index, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = index.add([docs])
    before = _points(index)
    calls: list[Path] = []
    original = Renderer.pages

    def spy(self: Renderer, document: DocumentInfo, **kw: int) -> Iterator[object]:
        calls.append(document.path)
        return original(self, document, **kw)

    monkeypatch.setattr(Renderer, "pages", spy)
    second = index.add([docs])
    assert second.documents_indexed == 0 and second.documents_skipped == first.documents_indexed
    assert second.pages_skipped == first.pages_indexed
    assert all(Path(c).name in {"pdfium__cropped_no_overlap.pdf"} for c in calls)  # only the never-indexed
    after = _points(index)
    assert after.keys() == before.keys()


def test_changed_moved_pruned_and_deleted_files(tmp_path: Path, documents: Path, index: Index) -> None:
    folder = tmp_path / "d"
    folder.mkdir()
    a = folder / "a.pdf"
    shutil.copy(documents / "pysamples__minimal-document.pdf", a)
    shutil.copy(documents / "pysamples__pdflatex-4-pages.pdf", folder / "b.pdf")
    index.add([folder])
    old_id = next(p["doc_id"] for p in _points(index).values() if p["source"] == str(a))

    # changed: new pages written, then the old version removed
    shutil.copy(documents / "pysamples__habibi-rotated.pdf", a)
    r = index.add([folder])
    assert r.documents_indexed == 1 and r.documents_removed == 1 and r.documents_skipped == 1
    pts = _points(index)
    assert not any(p["doc_id"] == old_id for p in pts.values())
    assert sum(1 for p in pts.values() if p["source"] == str(a)) == 4

    # moved: no re-embedding, the pages follow the file
    moved = folder / "renamed.pdf"
    (folder / "b.pdf").rename(moved)
    r = index.add([folder])
    assert r.documents_indexed == 0 and r.documents_skipped == 2
    assert sum(1 for p in _points(index).values() if p["source"] == str(moved)) == 4

    # pruned: the file is gone
    a.unlink()
    r = index.add([folder], prune=True)
    assert r.documents_removed == 1
    assert not any(p["source"] == str(a) for p in _points(index).values())

    # deleted by path and by id
    assert index.delete(str(moved)) == 4
    shutil.copy(documents / "pysamples__minimal-document.pdf", a)
    index.add([a], tags=["team=ml", "year=2026"])
    doc = next(iter(_points(index).values()))
    assert doc["tags"] == ["team=ml", "year=2026"]
    assert index._store.count(index.collection, Filter(tags=("team=ml",))) == 1
    assert index.delete(str(doc["doc_id"])) == 1
    assert index._store.count(index.collection) == 0


def test_each_file_is_looked_at_once(docs: Path, index: Index, monkeypatch: pytest.MonkeyPatch) -> None:
    import docvec._pipeline._sources as sources
    import docvec._render._renderer as render

    sniffed: list[str] = []
    detect_kind = render.detect_kind

    def counting(path: Path) -> object:
        sniffed.append(Path(path).name)
        return detect_kind(path)

    monkeypatch.setattr(sources, "detect_kind", counting)
    monkeypatch.setattr(render, "detect_kind", counting)
    report = index.add([docs / "pysamples__pdflatex-4-pages.pdf", docs / "pysamples__smile.png"])
    assert report.documents_indexed == 2
    assert sorted(sniffed) == ["pysamples__pdflatex-4-pages.pdf", "pysamples__smile.png"]


def test_discover_handles_globs_and_missing_paths(docs: Path) -> None:
    found = discover([docs / "*.png", docs / "nope.pdf", docs / "sub"], recursive=True)
    files, failures = found.files, found.failures
    assert sorted(f.name for f in files) == sorted(
        [n for i, n in enumerate(CASES) if i % 3 == 0] + ["pysamples__smile.png"]
    )
    assert [f.reason for f in failures] == ["no such file or folder"]


def _cli(args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    exe = Path(sys.executable).with_name("docvec")
    return subprocess.Popen(
        [str(exe), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **env},
        # Ctrl-C as at a terminal: a test run started in the background (`make test &`) passes its children
        # SIGINT ignored, and Python then installs no KeyboardInterrupt for it
        preexec_fn=_default_sigint,
    )


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _env(settings: Settings, data: Path) -> dict[str, str]:
    return {
        "DOCVEC_DATA_DIR": str(data),
        "DOCVEC_MODEL": settings.model,
        "DOCVEC_EMBED__MAX_PIXELS": str(SMALL),
        "DOCVEC_EMBED__THREADS": "2",
        "DOCVEC_LOG_LEVEL": "INFO",
    }


def _docvec(args: list[str], env: dict[str, str], *, timeout: float) -> subprocess.CompletedProcess[str]:
    """Run the docvec command as a user does (another process, this environment plus ``env``)."""
    return subprocess.run(
        [str(Path(sys.executable).with_name("docvec")), *args],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=timeout,
    )


def _snapshot(data: Path, settings: Settings) -> dict[str, dict[str, object]]:
    with Index.open(settings, data_dir=data) as index:
        return {
            pid: {k: v for k, v in p.items() if k != "ingested_at"}
            for pid, p in index._store.scroll(index.collection)
        }


def test_sigkill_mid_ingest_then_rerun_equals_a_clean_run(
    tmp_path: Path, documents: Path, settings: Settings
) -> None:
    folder = tmp_path / "k"
    folder.mkdir()
    for name in (
        "pysamples__pdflatex-4-pages.pdf",
        "pypdf__indirect-rotation.pdf",
        "pysamples__multicolumn.pdf",
        "pysamples__habibi-rotated.pdf",
        "qpdf__enc-XI-R6,V5,O=master.pdf",
    ):
        shutil.copy(documents / name, folder / name)
    clean, killed = tmp_path / "clean", tmp_path / "killed"
    r = _docvec(["ingest", str(folder), "--json"], _env(settings, clean), timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]

    proc = _cli(["ingest", str(folder)], _env(settings, killed))
    assert proc.stderr is not None
    seen = 0
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if "indexed" in line and "INFO" in line:
            seen += 1
            if seen == 2:  # two documents in, the third on its way
                break
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert seen == 2
    partial = _snapshot(killed, settings)
    assert 0 < len(partial) < len(_snapshot(clean, settings))

    again = _cli(["ingest", str(folder), "--json"], _env(settings, killed))
    out, errs = again.communicate(timeout=600)
    assert again.returncode == 0, errs[-2000:]
    report = IngestReport.model_validate_json(out)
    assert report.documents_skipped == 2 and report.documents_indexed == 3
    assert _snapshot(killed, settings) == _snapshot(clean, settings)


def test_cli_json_summary_and_exit_code(docs: Path, settings: Settings) -> None:
    env = _env(settings, settings.data_dir)
    r = CliRunner().invoke(app, ["ingest", str(docs), "--json", "--tag", "src=corpus"], env=env)
    assert r.exit_code == 1  # some documents failed
    report = json.loads(r.stdout)
    assert set(report) >= {"documents_indexed", "pages_indexed", "documents_skipped", "failures"}
    assert any(f["page"] == 2 and "bad_page_type" in f["path"] for f in report["failures"])
    r = CliRunner().invoke(app, ["ingest", str(docs / "pysamples__smile.png")], env=env)
    assert r.exit_code == 0 and "skipped 1 unchanged" in r.stdout
    r = CliRunner().invoke(app, ["ingest", "--tag", "oops", str(docs)], env=env)
    assert r.exit_code == 2 and "key=value" in r.output


def test_second_process_gets_a_clear_message(settings: Settings, index: Index, docs: Path) -> None:
    """While one process owns the embedded store, another is told who and what to do (here at once: it
    may wait no time for its turn)."""
    env = {**_env(settings, settings.data_dir), "DOCVEC_STORE_WAIT_S": "0"}
    r = _docvec(["ingest", str(docs / "pysamples__smile.png")], env, timeout=300)
    assert r.returncode == 2
    assert str(os.getpid()) in r.stderr and "Traceback" not in r.stderr
    assert "docvec serve" in r.stderr and "DOCVEC_STORE_WAIT_S" in r.stderr


def test_unreachable_qdrant_server_fails_clearly(settings: Settings, docs: Path) -> None:
    import socket

    with socket.socket() as s:  # a local port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**_env(settings, settings.data_dir), "DOCVEC_QDRANT_URL": f"http://127.0.0.1:{port}"}
    r = _docvec(["ingest", str(docs / "pysamples__smile.png")], env, timeout=300)
    assert r.returncode == 2, r.stderr[-2000:]
    assert f"127.0.0.1:{port}" in r.stderr and "Traceback" not in r.stderr


def test_new_tags_update_an_unchanged_document_in_place(
    tmp_path: Path, documents: Path, index: Index, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = tmp_path / "a.pdf"
    shutil.copy(documents / "pysamples__pdflatex-4-pages.pdf", a)
    assert index.add([a], tags=["team=ml"]).documents_indexed == 1
    before = {pid: p["embedding"]["key"] for pid, p in _points(index).items()}
    monkeypatch.setattr(Renderer, "pages", lambda *a, **k: pytest.fail("an unchanged file was rendered"))
    r = index.add([a], tags=["team=legal", "year=2026"])
    assert (r.documents_indexed, r.documents_skipped, r.documents_updated) == (0, 1, 1)
    after = _points(index)
    assert after.keys() == before.keys()  # the same points, not re-embedded ones
    assert all(p["tags"] == ["team=legal", "year=2026"] for p in after.values())
    assert index.count() == 4
    r = index.add([a], tags=["team=legal", "year=2026"])
    assert (r.documents_skipped, r.documents_updated) == (1, 0)  # nothing to change: no write


def test_a_run_without_tags_keeps_them_and_the_summary_says_when_they_change(
    tmp_path: Path, documents: Path, index: Index
) -> None:
    a = tmp_path / "a.pdf"
    shutil.copy(documents / "pysamples__minimal-document.pdf", a)
    r = index.add([a], tags=["team=finance"])
    assert r.documents_retagged == 0 and "retagged" not in r.summary()
    # the README's flow command on the quick start's folder: no tags given, the document keeps its own
    r = index.add([a])
    assert (r.documents_skipped, r.documents_updated, r.documents_retagged) == (1, 0, 0)
    assert all(p["tags"] == ["team=finance"] for p in _points(index).values())
    assert [h.name for h in index.search("x", 5, SearchFilter(tags={"team": "finance"}))] == ["a.pdf"]
    # a file changed in place (new content, new id) and read again without tags keeps them too
    shutil.copy(documents / "pysamples__smile.png", a)
    r = index.add([a])
    assert (r.documents_indexed, r.documents_removed, r.documents_retagged) == (1, 1, 0)
    assert all(p["tags"] == ["team=finance"] for p in _points(index).values())
    # new tags replace them, and the summary says so
    r = index.add([a], tags=["team=legal"])
    assert r.documents_retagged == 1 and "; retagged 1 document" in r.summary(), r.summary()
    assert all(p["tags"] == ["team=legal"] for p in _points(index).values())


def test_another_model_or_size_cannot_mix_into_a_collection(
    tmp_path: Path, documents: Path, settings: Settings, tiny_files: ModelFiles
) -> None:
    from docvec import CollectionMismatchError

    shutil.copy(documents / "pysamples__smile.png", tmp_path / "smile.png")
    with (
        Embedder(tiny_files, EmbedSettings(max_pixels=SMALL, threads=2)) as emb,
        Index.open(settings, embedder=emb) as index,
    ):
        assert index.add([tmp_path / "smile.png"]).documents_indexed == 1
    # another page budget: searching is fine (queries are text), adding is not
    other = settings.model_copy(update={"embed": EmbedSettings(max_pixels=SMALL * 4, threads=2)})
    with Index.open(other) as index:
        assert len(index.search("a face", 3)) == 1
        with pytest.raises(CollectionMismatchError, match=r"pages at 3136\.\.50176 pixels.*200704 pixels"):
            index.add([tmp_path / "smile.png"])
    # another model file: neither
    renamed = tmp_path / "model"
    renamed.mkdir()
    os.link(tiny_files.language_model, renamed / "other-F16.gguf")
    os.link(tiny_files.mmproj, renamed / "mmproj-other-F16.gguf")
    with Index.open(settings, model=str(renamed)) as index:
        with pytest.raises(CollectionMismatchError, match=r"tiny-qwen25vl-F16\.gguf.*other-F16\.gguf"):
            index.search("a face", 3)
        with pytest.raises(CollectionMismatchError, match="DOCVEC_COLLECTION"):
            index.add([tmp_path / "smile.png"])
    # another collection takes them
    with Index.open(settings, model=str(renamed), collection="other") as index:
        assert index.add([tmp_path / "smile.png"]).documents_indexed == 1


def test_unattended_runs_print_progress_lines(docs: Path, settings: Settings) -> None:
    env = _env(settings, settings.data_dir)
    r = CliRunner().invoke(app, ["ingest", str(docs / "sub"), "--progress-every", "0"], env=env)
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("progress: ")]
    assert lines, r.stderr
    assert re.fullmatch(
        r"progress: \d+/\d+ documents, \d+ pages, \d+\.\d\d pages/s(, ETA \d+[hms]\S*)?", lines[0]
    )
    assert lines[-1].startswith(f"progress: {len(list((docs / 'sub').iterdir()))}/")


def test_ctrl_c_keeps_every_page_embedded_says_so_and_the_rerun_counts_them(
    tmp_path: Path, documents: Path, settings: Settings
) -> None:
    folder = tmp_path / "k"
    folder.mkdir()
    shutil.copy(documents / "pysamples__pdflatex-4-pages.pdf", folder / "a.pdf")
    make_text_pdf(folder / "b-book.pdf", 20, lines=4)  # fewer pages than a batch: none written before Ctrl-C
    env = _env(settings, tmp_path / "data")
    proc = _cli(["ingest", str(folder), "--progress-every", "0"], env)
    assert proc.stderr is not None
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if line.startswith("progress: 1/2 documents, 7 pages"):  # the book's third page embedded
            break
    proc.send_signal(signal.SIGINT)
    _, errs = proc.communicate(timeout=120)
    assert proc.returncode == 130, errs[-2000:]
    said = re.search(
        r"interrupted: 1 document \(4 pages\) indexed, and b-book.pdf's pages 1-(\d+) of 20 are kept", errs
    )
    assert said, errs[-2000:]
    kept = int(said[1])
    assert 3 <= kept < 20 and "Traceback" not in errs
    # what it said is what is there: the book's first pages, written, the rest to come
    listed = _docvec(["documents", "--json"], env, timeout=120)
    book = next(d for d in json.loads(listed.stdout) if d["name"] == "b-book.pdf")
    assert (book["state"], book["pages_written"]) == ("writing", kept), book
    # the rerun goes on after them, and counts them
    again = _docvec(["ingest", str(folder)], env, timeout=600)
    assert again.returncode == 0, again.stderr[-2000:]
    assert f"indexed 1 document ({20 - kept} pages, after the {kept} an interrupted run kept)" in again.stdout
    assert "skipped 1 unchanged (4 pages)" in again.stdout


def _run_killed_at(where: str, args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`docvec` with one method of the ingest stage replaced by a SIGKILL of the process."""
    preamble = (
        "from docvec._pipeline._ingest import Ingestor\n"
        f"setattr(Ingestor, {where!r}, lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL))"
    )
    return docvec_after(preamble, *args, env=env)


def test_a_kill_between_a_new_version_and_removing_the_old_one_is_healed(
    tmp_path: Path, documents: Path, settings: Settings
) -> None:
    folder = tmp_path / "f"
    folder.mkdir()
    a = folder / "a.pdf"
    shutil.copy(documents / "pysamples__minimal-document.pdf", a)
    env = _env(settings, tmp_path / "data")
    assert _cli(["ingest", str(a)], env).wait(timeout=600) == 0
    shutil.copy(documents / "pysamples__pdflatex-4-pages.pdf", a)  # the file changes
    killed = _run_killed_at("_remove_old_versions", ["ingest", str(a)], env)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    with Index.open(settings, data_dir=tmp_path / "data") as index:
        versions = {p["doc_id"] for _, p in index._store.scroll(index.collection)}
    assert len(versions) == 2  # the crash left both versions of the file
    again = _docvec(["ingest", str(a), "--json"], env, timeout=600)
    report = IngestReport.model_validate_json(again.stdout)
    assert (report.documents_skipped, report.documents_removed) == (1, 1), again.stderr[-2000:]
    with Index.open(settings, data_dir=tmp_path / "data") as index:
        assert {p["doc_id"] for _, p in index._store.scroll(index.collection)} == {_sha_id(a)}
        assert {h.doc_id for h in index.search("anything", 10)} == {_sha_id(a)}


def _sha_id(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()[:32]


def test_a_long_document_killed_late_resumes_and_never_half_replaces_the_old_one(
    tmp_path: Path, settings: Settings
) -> None:
    book = tmp_path / "book.pdf"
    make_text_pdf(book, 1, lines=3)
    env = {**_env(settings, tmp_path / "data"), "DOCVEC_EMBED__MAX_PIXELS": str(MINIMAL)}  # 4 tokens a page
    assert _cli(["ingest", str(book)], env).wait(timeout=600) == 0
    first = _sha_id(book)
    make_text_pdf(book, 2000, lines=3)  # the same file grows into a 2,000-page book
    proc = _cli(["ingest", str(book), "--progress-every", "0"], env)
    assert proc.stderr is not None
    pages = 0
    deadline = time.monotonic() + 900
    while pages < 1600 and time.monotonic() < deadline:
        m = re.match(r"progress: 0/1 documents, (\d+) pages", proc.stderr.readline())
        pages = int(m.group(1)) if m else pages
    proc.kill()  # SIGKILL at 80%
    proc.wait()
    assert pages >= 1600
    with Index.open(settings, data_dir=tmp_path / "data") as index:
        written = index._store.count(index.collection, Filter(doc_ids=(_sha_id(book),)))
        assert written >= 1600 - 64  # written as it went, in batches
        hits = index.search("the quick brown fox", 10)
        assert {h.doc_id for h in hits} == {first}  # searches see the old version, whole, not the new half
    again = _docvec(["ingest", str(book), "--json"], env, timeout=900)
    report = IngestReport.model_validate_json(again.stdout)
    assert report.documents_indexed == 1 and report.documents_removed == 1, again.stderr[-2000:]
    assert report.pages_indexed < 0.25 * 2000  # only what the kill lost is done again
    assert "resuming after page" in again.stderr
    with Index.open(settings, data_dir=tmp_path / "data") as index:
        assert index.count() == 2000
        assert {h.doc_id for h in index.search("the quick brown fox", 10)} == {_sha_id(book)}
        (doc,) = index.documents().documents
        assert doc.pages_indexed == doc.page_count == 2000


def test_a_document_still_being_written_is_listed_as_such(tmp_path: Path, tiny_dir: Path) -> None:
    settings = index_settings(tmp_path / "data", tiny_dir, max_pixels=MINIMAL)
    book = make_text_pdf(tmp_path / "book.pdf", 40, lines=1)

    def stop(p: IngestProgress) -> None:  # a server stopping: between two pages
        if p.page >= 35:
            raise Interrupted(cancelled=False)

    with Index.open(settings) as index:
        with pytest.raises(Interrupted):
            index.add([book], progress=stop)
        (doc,) = index.documents().documents
        # 35 pages stored (the last batch and the pages embedded since), none searchable yet
        assert (doc.state, doc.pages_indexed, doc.pages_written, doc.page_count) == ("writing", 0, 35, 40)
        assert index.count() == 0 and not index.search("quick brown fox", 3)
    env = {"DOCVEC_DATA_DIR": str(settings.data_dir), "DOCVEC_MODEL": str(tiny_dir)}
    listed = CliRunner().invoke(app, ["documents"], env=env)
    assert listed.exit_code == 0 and "writing: 35 of 40" in listed.output, listed.output
    with Index.open(settings) as index:
        assert index.add([book]).pages_indexed == 5  # resumed after the 35 written, none lost
        (doc,) = index.documents().documents
        assert (doc.state, doc.pages_indexed, doc.pages_written, doc.page_count) == ("complete", 40, 40, 40)
        stored = index.stored_pages(doc.doc_id)[0]
    # an older docvec's pages said the page count while they were written: read as none searchable
    older = stored.model_copy(update={"state": "writing", "pages_indexed": 40})
    assert DocumentSummary.of(older).pages_indexed == 0


def test_gc_collects_unused_uploads_and_stale_leftovers(index: Index) -> None:
    def png(seed: int) -> io.BytesIO:
        buf = io.BytesIO()
        page_image(120, 160, seed=seed).save(buf, "PNG")
        buf.seek(0)
        return buf

    limit, old = 1 << 20, time.time() - 2 * 3600
    kept = Path(index.add_upload(png(1), name="kept.png", limit=limit).source)
    queued = index.queue_upload(index.keep_upload(png(2), name="queued.png", limit=limit))
    never = index.keep_upload(png(3), name="never.png", limit=limit).path  # kept, never queued
    orphan = index.uploads / f"{'ab' * 32}.png"  # a copy no document uses (an older docvec left it)
    orphan.write_bytes(png(4).getvalue())
    stale = index.uploads / ".queue" / ".upload-stale"  # a receiving cut short two hours ago
    stale.write_bytes(b"x" * 10)
    os.utime(stale, (old, old))
    fresh = index.uploads / ".upload-fresh"  # one being received now
    fresh.write_bytes(b"y")
    report = index.gc()
    assert (report.uploads_removed, report.upload_bytes_freed) == (2, len(png(4).getvalue()) + 10)
    assert not orphan.exists() and not stale.exists()
    assert kept.is_file() and never.is_file() and fresh.is_file()
    assert (index.uploads / ".queue" / f"{queued.upload_id}.png").is_file()  # a queued upload's file stays
    os.utime(never, (old, old))
    assert index.gc().uploads_removed == 1 and not never.exists()  # kept and forgotten: goes once old
    up = index.index_queued(queued.upload_id)  # and the queued one is still indexed from its own file
    assert up.name == "queued.png" and up.pages == 1 and not up.already_indexed
    assert index.gc().uploads_removed == 0
    left = sorted(p.name for p in index.uploads.rglob("*") if p.is_file())
    assert left == sorted([kept.name, Path(up.source).name, fresh.name])


def test_files_that_are_not_documents_are_listed(tmp_path: Path, index: Index) -> None:
    from docvec._render._renderer import READS_JPEG2000

    folder = tmp_path / "mixed"
    folder.mkdir()
    page_image(120, 160, seed=1).save(folder / "page.png")
    (folder / "letter.xps").write_bytes(b"PK\x03\x04 an XPS is a zip")
    (folder / "notes.docx").write_bytes(b"PK\x03\x04")
    (folder / ".hidden.pdf").write_bytes(b"%PDF-")
    page_image(120, 160, seed=2).save(folder / "scan.jp2")
    report = index.add([folder])
    assert sorted(Path(p).name for p in report.ignored) == (
        ["letter.xps", "notes.docx"] if READS_JPEG2000 else ["letter.xps", "notes.docx", "scan.jp2"]
    )
    assert report.documents_indexed == (2 if READS_JPEG2000 else 1) and report.ok
    assert "ignored 2 files that are not documents" in report.summary() or not READS_JPEG2000


def test_delete_on_a_data_folder_that_does_not_exist_creates_nothing(tmp_path: Path) -> None:
    env = {"DOCVEC_DATA_DIR": str(tmp_path / "nothing-here")}
    for args in (["delete", "0123abcd"], ["documents"]):
        r = CliRunner().invoke(app, args, env=env)
        assert r.exit_code == 2 and "Traceback" not in r.output
        assert "there is no docvec data folder at" in " ".join(r.output.split())
    assert not (tmp_path / "nothing-here").exists()


def test_an_xfa_form_is_indexed_without_advice_about_rebuilding_pdfium(
    tmp_path: Path, settings: Settings
) -> None:
    """PDFium renders an XFA form's pages without the form; pypdfium2's advice to rebuild PDFium with XFA
    is for its own users, not for docvec's (stderr stays for what the user can act on)."""
    pdf = make_text_pdf(tmp_path / "form.pdf", 2, lines=3, xfa=True)
    r = _docvec(["ingest", str(pdf), "--json"], _env(settings, settings.data_dir), timeout=300)
    assert r.returncode == 0, r.stderr
    assert IngestReport.model_validate_json(r.stdout).pages_indexed == 2
    assert "XFA" not in r.stderr and "pypdfium2" not in r.stderr


def test_an_empty_folder_and_a_pattern_matching_nothing_find_nothing_and_say_so(
    tmp_path: Path, documents: Path, settings: Settings
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("not a document")
    found = discover([empty, tmp_path / "notes", tmp_path / "*.pdf", tmp_path / "missing.pdf"])
    assert found.files == [] and found.empty == [str(empty), str(tmp_path / "notes"), str(tmp_path / "*.pdf")]
    assert [f.path for f in found.failures] == [str(tmp_path / "missing.pdf")]  # a name that names nothing
    env = _env(settings, tmp_path / "data")
    r = _docvec(["ingest", str(empty), str(tmp_path / "*.pdf")], env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "failed 0 documents" in r.stdout, r.stdout  # finding nothing is no failure...
    assert f"found no document in {empty}, {tmp_path / '*.pdf'}" in r.stdout  # ...and it is said


def test_delete_a_folder_names_its_documents_asks_then_removes_them(
    tmp_path: Path, documents: Path, settings: Settings
) -> None:
    folder = tmp_path / "f"
    (folder / "sub").mkdir(parents=True)
    shutil.copy(documents / "pysamples__minimal-document.pdf", folder / "one.pdf")
    shutil.copy(documents / "pysamples__smile.png", folder / "sub" / "two.png")
    shutil.copy(documents / "pysamples__pdflatex-4-pages.pdf", tmp_path / "elsewhere.pdf")
    env = _env(settings, tmp_path / "data")
    assert _docvec(["ingest", str(folder), str(tmp_path / "elsewhere.pdf")], env, timeout=600).returncode == 0
    asked = _docvec(
        ["delete", str(folder)], env, timeout=120
    )  # not at a terminal: nothing asked, nothing done
    assert asked.returncode == 1 and "add --yes" in asked.stderr, asked.stderr
    assert "2 documents (2 pages) indexed from" in asked.stdout and "sub/two.png" in asked.stdout
    gone = _docvec(["delete", str(folder), "--yes"], env, timeout=120)
    assert gone.returncode == 0, gone.stderr
    assert f"removed 2 documents (2 pages) read from {folder}" in " ".join(gone.stdout.split())
    left = json.loads(_docvec(["documents", "--json"], env, timeout=120).stdout)
    assert [d["name"] for d in left] == ["elsewhere.pdf"]
    again = _docvec(["delete", str(folder), "--yes"], env, timeout=120)
    assert again.returncode == 1 and "no document indexed was read from" in again.stderr
