"""Versioned collections and `docvec reindex`: a new version built while the old one answers searches,
switched in whole, resumed after a kill, on both backends; and the page store collected."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError

from docvec import (
    CollectionMismatchError,
    Embedder,
    EmbedSettings,
    Index,
    IngestReport,
    InputError,
    ModelFiles,
    ReindexReport,
    ReindexSpec,
    Settings,
)
from docvec._store import read_owner_token
from docvec.api import create_app

from .documents import make_text_pdf
from .helpers import TINY, copy_documents, report
from .processes import docvec, docvec_after, served

BIGGER = 28 * 28 * 24
QUERIES = ("total amount due", "the quick brown fox", "a smiling face")
CORPUS = (
    "pysamples__minimal-document.pdf",
    "pysamples__smile.png",
    "pysamples__pdflatex-4-pages.pdf",
    "pysamples__multicolumn.pdf",
)


@pytest.fixture(scope="module")
def bf16_model(tiny_bf16: ModelFiles) -> str:
    """Another model: the tiny checkpoint's BF16 GGUFs (other files, other vectors), as a `LM,MMPROJ`
    pair."""
    return f"{tiny_bf16.language_model},{tiny_bf16.mmproj}"


@pytest.fixture()
def corpus(tmp_path: Path, documents: Path) -> Path:
    folder = copy_documents(documents, tmp_path / "corpus", CORPUS)
    make_text_pdf(folder / "book.pdf", 70, lines=4)  # three batches of pages: a kill can land inside it
    return folder


def _env(data: Path, model: Path | str) -> dict[str, str]:
    return {
        "DOCVEC_DATA_DIR": str(data),
        "DOCVEC_MODEL": str(model),
        "DOCVEC_EMBED__MAX_PIXELS": str(TINY),
        "DOCVEC_EMBED__THREADS": "1",
        "DOCVEC_LOG_LEVEL": "INFO",
    }


def _ingest(corpus: Path, env: dict[str, str]) -> int:
    """Index ``corpus`` with the command line; the pages indexed."""
    r = docvec("ingest", str(corpus), "--json", env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return IngestReport.model_validate_json(r.stdout).pages_indexed


def _answer(hits: list[dict[str, Any]]) -> tuple[tuple[str, int, float], ...]:
    return tuple((h["doc_id"], h["page"], round(h["score"], 4)) for h in hits)


# -- reindexing a served collection while it is searched ----------------------------------------------


@pytest.fixture(scope="module")
def qwen3vl_model(qwen3vl_dir: Path) -> str:
    """A model of the other family: the tiny Qwen3-VL-Embedding (last-token pooling, 32-pixel tokens)."""
    return str(qwen3vl_dir)


@pytest.mark.parametrize("other", ["bf16_model", "qwen3vl_model"])
def test_a_served_collection_is_rebuilt_with_another_model_while_it_answers(
    other: str, tmp_path: Path, corpus: Path, tiny_dir: Path, request: pytest.FixtureRequest
) -> None:
    """From the tiny jina-v4 model to other GGUFs of it, and to the other family."""
    new_model: str = request.getfixturevalue(other)
    env = _env(tmp_path / "data", tiny_dir)
    pages = _ingest(corpus, env)
    with served(env, tmp_path / "serve.log") as server:
        # as the server's own user's commands do: with its token, which lets them name a model by its files
        owner = {"X-API-Key": read_owner_token(tmp_path / "data" / "qdrant") or ""}
        http = httpx.Client(base_url=server.url, timeout=60, headers=owner)

        def search(q: str) -> tuple[tuple[str, int, float], ...]:
            # dense: its scores are the vectors' (a fused search's are ranks, which another model may share)
            r = http.post("/search", json={"query": q, "k": 5, "mode": "dense"})
            r.raise_for_status()
            return _answer(r.json()["hits"])

        before = {q: search(q) for q in QUERIES}
        answers: list[tuple[str, tuple[tuple[str, int, float], ...]]] = []
        errors: list[str] = []
        stop = threading.Event()

        def keep_searching() -> None:
            with httpx.Client(base_url=server.url, timeout=60) as mine:
                i = 0
                while not stop.is_set():
                    q = QUERIES[i % len(QUERIES)]
                    i += 1
                    try:
                        r = mine.post("/search", json={"query": q, "k": 5, "mode": "dense"})
                        r.raise_for_status()
                        answers.append((q, _answer(r.json()["hits"])))
                    except httpx.HTTPError as e:
                        errors.append(f"{q}: {e} {getattr(getattr(e, 'response', None), 'text', '')}")

        searcher = threading.Thread(target=keep_searching)
        searcher.start()
        try:
            started = time.monotonic()
            job = http.post("/reindex", json={"model": new_model})
            assert job.status_code == 202, job.text
            status_url = job.json()["status_url"]
            seen_progress = False
            while (state := http.get(status_url).json())["status"] in ("queued", "running"):
                seen_progress = seen_progress or state["documents_total"] > 0
                assert time.monotonic() - started < 600, f"the reindex is still running\n{server.tail()}"
                time.sleep(0.2)
            seconds = time.monotonic() - started
            during = len(answers)
            time.sleep(1.0)  # searches after the switch
        finally:
            stop.set()
            searcher.join(timeout=120)
        assert state["status"] == "done", f"{state}\n{server.tail()}"
        result = ReindexReport.model_validate(state["result"])
        assert (result.old_version, result.new_version, result.switched) == ("docvec.v1", "docvec.v2", True)
        # the same page budget: every page embedded again from its stored image, none rendered
        assert (result.pages_embedded, result.pages_rendered, result.failures) == (pages, 0, [])
        assert seen_progress
        after = {q: search(q) for q in QUERIES}
        versions = http.get("/collections").json()
        http.close()
    assert after != before  # another model: other scores
    assert not errors, errors[:5]
    # every answer is the old version's or the new one's, whole; never empty, never a mix
    assert all(a in (before[q], after[q]) and a for q, a in answers)
    assert [a for q, a in answers if a == after[q] and a != before[q]], (
        "no search was answered by the new version"
    )
    assert answers[-1][1] == after[answers[-1][0]]  # and once switched, the new one answers
    live = [v for v in versions if v["live"]]
    assert [(v["version"], v["model"], v["pages"]) for v in live] == [("docvec.v2", new_model, pages)]
    family = {"bf16_model": "jina-embeddings-v4", "qwen3vl_model": "qwen3-vl-embedding"}[other]
    assert live[0]["profile"] == family  # which model answers, by family, even when named by a path
    report(f"reindex through the API to {other}: seconds", seconds)
    report(f"reindex through the API to {other}: searches answered meanwhile", during)
    report(f"reindex through the API to {other}: failed or empty searches", len(errors))


# -- a reindex killed, then run again ------------------------------------------------------------------


def _snapshot(data: Path, model: Path) -> tuple[str | None, dict[str, Any], dict[str, np.ndarray]]:
    with Index.open(data, model=str(model)) as index:
        store = index._store
        live = store.live(index.collection)
        assert live is not None
        payloads, vectors = {}, {}
        for p in store.scroll(live, with_vectors=True):
            payloads[p.id] = p.payload
            vectors[p.id] = p.vector
        return live, payloads, vectors


def _killed_at(n: int, args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`docvec ARGS` killed with SIGKILL at its ``n``-th write of pages to the store."""
    preamble = (
        "from docvec._store import Store\n"
        "write, calls = Store.upsert, []\n"
        "def upsert(self, name, points):\n"
        "    calls.append(name)\n"
        f"    if len(calls) == {n}:\n"
        "        os.kill(os.getpid(), signal.SIGKILL)\n"
        "    return write(self, name, points)\n"
        "Store.upsert = upsert"
    )
    return docvec_after(preamble, *args, env=env)


def test_a_killed_reindex_resumes_and_ends_as_an_uninterrupted_one(
    tmp_path: Path, corpus: Path, tiny_dir: Path
) -> None:
    start = tmp_path / "start"
    _ingest(corpus, _env(start, tiny_dir))
    clean, killed = tmp_path / "clean", tmp_path / "killed"
    shutil.copytree(start, clean)
    shutil.copytree(start, killed)
    args = ["reindex", "--max-pixels", str(BIGGER), "--json"]

    r = docvec(*args, env=_env(clean, tiny_dir), timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    uninterrupted = ReindexReport.model_validate_json(r.stdout)
    assert uninterrupted.pages_rendered == uninterrupted.pages_embedded > 70  # a new budget: all rendered

    # killed in the middle of the book (the first document, at its second batch of pages), then run again
    first = _killed_at(2, args, _env(killed, tiny_dir))
    assert first.returncode == -signal.SIGKILL, first.stderr[-3000:]
    with Index.open(killed, model=str(tiny_dir)) as index:
        states = {v.version: (v.live, v.state) for v in index.versions()}
        assert states == {"docvec.v1": (True, "complete"), "docvec.v2": (False, "building")}
        assert index.search("the quick brown fox", 3)  # the old version answers meanwhile
    again = docvec(*args, env=_env(killed, tiny_dir), timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    resumed = ReindexReport.model_validate_json(again.stdout)
    assert resumed.new_version == "docvec.v2" and "resuming the reindex" in again.stderr
    # the book went on from its last batch written: one batch (32 pages) was not done again
    assert "book.pdf: resuming after page 32" in again.stderr
    assert resumed.pages_resumed == 32
    assert resumed.pages_embedded == uninterrupted.pages_embedded - 32

    (live_a, payloads_a, vectors_a), (live_b, payloads_b, vectors_b) = (
        _snapshot(clean, tiny_dir),
        _snapshot(killed, tiny_dir),
    )
    assert live_a == live_b == "docvec.v2"
    assert payloads_a == payloads_b
    for pid, vector in vectors_a.items():
        np.testing.assert_allclose(vectors_b[pid], vector, atol=1e-6)
    report("killed reindex: pages done again after the kill", resumed.pages_embedded)
    report("killed reindex: pages of the collection", len(payloads_a))


# -- what does not fit --------------------------------------------------------------------------------


def test_another_model_is_told_to_reindex(
    tmp_path: Path, documents: Path, tiny_dir: Path, bf16_model: str
) -> None:
    data = tmp_path / "data"
    env = _env(data, tiny_dir)
    r = docvec("ingest", str(documents / "pysamples__smile.png"), env=env)
    assert r.returncode == 0, r.stderr
    for command in (["search", "a face"], ["ingest", str(documents / "pysamples__minimal-document.pdf")]):
        r = docvec(*command, env=_env(data, bf16_model))
        assert r.returncode == 2, (command, r.stderr)
        line = r.stderr.strip().splitlines()[-1]
        assert "tiny-qwen25vl-F16.gguf" in line and "tiny-qwen25vl-BF16.gguf" in line, line
        assert "docvec reindex" in line
    r = docvec("serve", "--port", "1", env=_env(data, bf16_model))  # the API does not start either
    assert r.returncode == 2 and "docvec reindex" in r.stderr and "Traceback" not in r.stderr
    settings = Settings(data_dir=data, model=bf16_model, embed=EmbedSettings(max_pixels=TINY))
    with Index.open(settings) as index, pytest.raises(CollectionMismatchError, match="docvec reindex"):
        index.search("a face", 1)


def test_settings_left_unset_follow_the_collection(tmp_path: Path, documents: Path, tiny_dir: Path) -> None:
    """After a reindex to another page budget, commands that name no budget use the collection's."""
    data = tmp_path / "data"
    env = _env(data, tiny_dir)
    assert docvec("ingest", str(documents / "pysamples__smile.png"), env=env).returncode == 0
    assert docvec("reindex", "--max-pixels", str(BIGGER), env=env).returncode == 0
    unset = {k: v for k, v in env.items() if k != "DOCVEC_EMBED__MAX_PIXELS"}
    r = docvec("ingest", str(documents / "pysamples__minimal-document.pdf"), "--json", env=unset)
    assert r.returncode == 0, r.stderr[-2000:]
    r = docvec("collections", "list", "--json", env=unset)
    versions = json.loads(r.stdout)
    assert [(v["version"], v["live"], v["max_pixels"], v["pages"]) for v in versions] == [
        ("docvec.v1", False, TINY, 1),
        ("docvec.v2", True, BIGGER, 2),
    ]
    r = docvec("reindex", "--max-pixels", str(BIGGER), "--json", env=unset)
    assert (
        ReindexReport.model_validate_json(r.stdout).note
        == "its live version docvec.v2 was made with this model and these settings already"
    )


# -- both backends, and collections made before versions ------------------------------------------------


def test_reindex_on_a_qdrant_server(tmp_path: Path, documents: Path, tiny_dir: Path) -> None:
    """The server backend (qdrant-client's local mode runs its code): versions behind a collection alias."""
    settings = Settings(
        data_dir=tmp_path / "data",
        model=str(tiny_dir),
        qdrant_url=":memory:",
        embed=EmbedSettings(max_pixels=TINY, threads=1),
    )
    with Index.open(settings) as index:
        index.add([documents / "pysamples__smile.png", documents / "pysamples__minimal-document.pdf"])
        before = index.search("a face", 2, mode="dense")
        result = index.reindex(ReindexSpec(max_pixels=BIGGER, drop_old=True), settle=0.0)
        assert (result.old_version, result.new_version, result.switched, result.dropped_old) == (
            "docvec.v1",
            "docvec.v2",
            True,
            True,
        )
        assert index._store.backend.aliases() == {"docvec": "docvec.v2"}
        assert [(v.version, v.live, v.pages, v.max_pixels) for v in index.versions()] == [
            ("docvec.v2", True, 2, BIGGER)
        ]
        after = index.search("a face", 2, mode="dense")
        assert {h.doc_id for h in after} == {h.doc_id for h in before}
        assert [h.score for h in after] != [h.score for h in before]


def test_a_collection_made_before_versions_is_adopted_then_rebuilt(
    tmp_path: Path, documents: Path, tiny_dir: Path
) -> None:
    data = tmp_path / "data"
    env = _env(data, tiny_dir)
    assert docvec("ingest", str(documents / "pysamples__smile.png"), env=env).returncode == 0
    # the layout earlier docvec left: the collection under its own name, no pointer, no record
    store = data / "qdrant"
    (store / "docvec.v1").rename(store / "docvec")
    (store / "aliases.json").unlink()
    meta = json.loads((store / "docvec" / "docvec.json").read_text())
    del meta["record"]
    (store / "docvec" / "docvec.json").write_text(json.dumps(meta))
    r = docvec("search", "a face", "--json", env=env)
    assert r.returncode == 0 and len(json.loads(r.stdout)) == 1, r.stderr[-2000:]
    r = docvec("reindex", "--max-pixels", str(BIGGER), "--drop-old", "--json", env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    result = ReindexReport.model_validate_json(r.stdout)
    assert (result.old_version, result.new_version, result.dropped_old) == ("docvec", "docvec.v1", True)
    assert not (store / "docvec").exists() and json.loads((store / "aliases.json").read_text()) == {
        "aliases": {"docvec": "docvec.v1"}
    }
    r = docvec("search", "a face", "--json", env=env)
    assert r.returncode == 0 and len(json.loads(r.stdout)) == 1


# -- vanished sources ------------------------------------------------------------------------------------


def test_a_vanished_source_is_carried_over_or_reported(
    tmp_path: Path, documents: Path, tiny_dir: Path, bf16_model: str
) -> None:
    data, docs = tmp_path / "data", tmp_path / "docs"
    docs.mkdir()
    for name in ("pysamples__smile.png", "pysamples__minimal-document.pdf"):
        shutil.copy(documents / name, docs / name)
    env = _env(data, tiny_dir)
    assert docvec("ingest", str(docs), env=env).returncode == 0
    (docs / "pysamples__smile.png").unlink()
    # a new page budget needs the file again: the same model carries the page's vector over
    r = docvec("reindex", "--max-pixels", str(BIGGER), "--json", env=env)
    carried = ReindexReport.model_validate_json(r.stdout)
    assert r.returncode == 0 and (carried.pages_carried, carried.pages_rendered) == (1, 1)
    assert carried.vanished == [str(docs / "pysamples__smile.png")]
    r = docvec("search", "a face", "--json", env=env)
    assert {Path(h["source"]).name for h in json.loads(r.stdout)} == {
        "pysamples__smile.png",
        "pysamples__minimal-document.pdf",
    }
    # another model at another budget: its page can neither be rendered nor carried: lost, and said so; the
    # collection keeps its version with the page, and --drop-old drops nothing
    args = ("reindex", "--model", bf16_model, "--max-pixels", str(TINY), "--drop-old", "--json")
    r = docvec(*args, env=env)
    held = ReindexReport.model_validate_json(r.stdout)
    assert r.returncode == 2 and (held.switched, held.dropped_old) == (False, False), r.stderr[-2000:]
    assert (held.new_version, held.pages_missing, held.pages_lost, held.pages_rendered) == (
        "docvec.v3",
        1,
        1,
        1,
    )
    assert "pysamples__smile.png" in held.failures[0].path and "gone" in held.failures[0].reason
    line = r.stderr.strip().splitlines()[-1]
    assert (
        line.startswith("error: collection 'docvec' did not switch to docvec.v3") and "--allow-loss" in line
    )
    r = docvec("search", "a face", "--json", env=env)  # the live version answers with every page
    assert r.returncode == 0 and len(json.loads(r.stdout)) == 2
    # accepted: the run resumes the version it began (the PDF is done), switches without the page, drops
    r = docvec(*args, "--allow-loss", env=env)
    lost = ReindexReport.model_validate_json(r.stdout)
    assert r.returncode == 1 and (lost.new_version, lost.switched, lost.dropped_old) == (
        "docvec.v3",
        True,
        True,
    )
    assert (lost.pages_missing, lost.pages_lost, lost.pages_resumed, lost.pages_embedded) == (1, 1, 1, 0)
    assert lost.note and lost.note.startswith("switched without 1 page of 1 document of docvec.v2")


# -- a reindex that would lose pages ----------------------------------------------------------------------


def _lacks_memory(monkeypatch: pytest.MonkeyPatch, dim: int, fail: set[int]) -> list[int]:
    """Make the model's ``dim``-d view (the reindex's, the live version's being another size) refuse the
    pages of its calls numbered in ``fail`` (from 1, a set the caller may change), as a page the embedder
    cannot take is refused; returns the calls so far, a list the caller may clear."""
    calls: list[int] = []
    embed = Embedder.embed_images

    def embed_images(self: Embedder, images: Any, **kwargs: Any) -> Any:
        if self.dim == dim:
            calls.append(len(calls) + 1)
            if calls[-1] in fail:
                raise InputError("not enough memory for this page (injected)")
        return embed(self, images, **kwargs)

    monkeypatch.setattr(Embedder, "embed_images", embed_images)
    return calls


def _indexed(tmp_path: Path, documents: Path, tiny_dir: Path) -> Settings:
    """A 4-page PDF (first by path, so it is read first) and an image, indexed: 5 pages."""
    settings = Settings(
        data_dir=tmp_path / "data", model=str(tiny_dir), embed=EmbedSettings(max_pixels=TINY, threads=1)
    )
    with Index.open(settings) as index:
        assert index.add(
            [documents / "pysamples__pdflatex-4-pages.pdf", documents / "pysamples__smile.png"]
        ).ok
        assert index.count() == 5
    return settings


def test_a_reindex_whose_pages_fail_does_not_switch_nor_drop_and_a_rerun_finishes_it(
    tmp_path: Path, documents: Path, tiny_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = _indexed(tmp_path, documents, tiny_dir)
    pdf = str(documents / "pysamples__pdflatex-4-pages.pdf")
    with Index.open(settings) as index:
        _lacks_memory(monkeypatch, 32, fail={2, 3, 4})  # 3 of the PDF's 4 pages
        held = index.reindex(ReindexSpec(dim=32, drop_old=True))
        assert (held.new_version, held.switched, held.dropped_old, held.pages_missing) == (
            "docvec.v2",
            False,
            False,
            3,
        )
        assert held.note and held.note.startswith(
            f"did not switch: docvec.v2 lacks 3 pages of 1 document of docvec.v1: {pdf} (3)"
        )
        assert "allow_loss" in held.note and "run the reindex again" in held.note.lower()
        assert [(v.version, v.live, v.state, v.pages) for v in index.versions()] == [
            ("docvec.v1", True, "complete", 5),
            ("docvec.v2", False, "building", 2),
        ]
        assert index.count() == 5 and len(index.search("a page", 10)) == 5  # the live version, whole
        monkeypatch.undo()  # the cause fixed: run again, it resumes and tries the short document again
        done = index.reindex(ReindexSpec(dim=32, drop_old=True))
        assert (done.new_version, done.switched, done.dropped_old, done.pages_missing) == (
            "docvec.v2",
            True,
            True,
            0,
        )
        assert (done.pages_embedded, done.pages_resumed, done.note) == (4, 1, None)
        assert [(v.version, v.live, v.dim, v.pages) for v in index.versions()] == [("docvec.v2", True, 32, 5)]
        assert len(index.search("a page", 10)) == 5


def test_a_reindex_embeds_pages_in_groups_across_documents(
    tmp_path: Path, documents: Path, tiny_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``embed.vision_batch`` a reindex groups pages as an ingest does, across documents: an image, a
    one-page PDF and a four-page one make two groups of three, with the vectors of one page at a time."""
    settings = Settings(
        data_dir=tmp_path / "data",
        model=str(tiny_dir),
        embed=EmbedSettings(max_pixels=TINY, threads=1, vision_batch=3),
    )
    names = ("pysamples__smile.png", "pysamples__minimal-document.pdf", "pysamples__pdflatex-4-pages.pdf")
    with Index.open(settings) as index:
        assert index.add([documents / name for name in names]).pages_indexed == 6
        groups: list[int] = []
        embed = Embedder.embed_images

        def sizes(self: Embedder, images: Any, **kwargs: Any) -> Any:
            if self.dim == 32:
                groups.append(len(images))
            return embed(self, images, **kwargs)

        monkeypatch.setattr(Embedder, "embed_images", sizes)
        done = index.reindex(ReindexSpec(dim=32))
        assert (done.switched, done.pages_embedded, done.pages_rendered) == (True, 6, 0)
        assert groups == [3, 3]
        grouped = {(h.doc_id, h.page): h.score for h in index.search("a page", 10, mode="dense")}
    one = settings.model_copy(
        update={"data_dir": tmp_path / "one", "embed": EmbedSettings(max_pixels=TINY, threads=1)}
    )
    with Index.open(one) as index:
        index.add([documents / name for name in names])
        index.reindex(ReindexSpec(dim=32))
        alone = {(h.doc_id, h.page): h.score for h in index.search("a page", 10, mode="dense")}
    assert grouped.keys() == alone.keys() and len(alone) == 6
    assert max(abs(grouped[k] - alone[k]) for k in alone) < 1e-5


def test_a_loss_accepted_switches_and_a_document_added_meanwhile_counts(
    tmp_path: Path, documents: Path, tiny_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The last pass, under the write lock, brings over a document added while the reindex ran: its page
    failing there is a page the new version lacks, found before the switch."""
    settings = _indexed(tmp_path, documents, tiny_dir)
    added = documents / "pysamples__minimal-document.pdf"
    with Index.open(settings) as index:
        fail = {6}  # the 5 pages of the first pass, then the new document's in the last
        calls = _lacks_memory(monkeypatch, 32, fail)
        began: list[bool] = []

        def add_once(progress: object) -> None:
            if not began:  # the first pass has listed the documents: the new one comes in the last
                began.append(True)
                assert index.add([added]).ok  # into the live version, by its own model

        held = index.reindex(ReindexSpec(dim=32), progress=add_once)
        assert (held.switched, held.pages_missing) == (False, 1) and held.note and str(added) in held.note
        assert index.count() == 6 and [v.live for v in index.versions()] == [True, False]
        # run again, it resumes: the two documents done are kept, the new one is tried again, and fails
        calls.clear()
        fail.clear()
        fail.add(1)
        accepted = index.reindex(ReindexSpec(dim=32, allow_loss=True, drop_old=True))
        assert (accepted.switched, accepted.dropped_old, accepted.pages_missing) == (True, True, 1)
        assert (
            accepted.note == f"switched without 1 page of 1 document of docvec.v1: {added} (1) (allow_loss)"
        )
        assert index.count() == 5 and [(v.version, v.live) for v in index.versions()] == [("docvec.v2", True)]


def test_a_reindex_spec_takes_json_types_and_the_models_bounds(
    tmp_path: Path, documents: Path, tiny_dir: Path
) -> None:
    """JSON Schema's booleans and integers only (4.0 is an integer, true and "4" are not), and a page
    budget over the model's largest image refused before any work: a client's error (400 class), not the
    server's."""
    assert ReindexSpec.model_validate_json('{"dim": 32.0, "drop_old": true}') == ReindexSpec(
        dim=32, drop_old=True
    )
    for body in (
        '{"drop_old": 0}',
        '{"allow_loss": "yes"}',
        '{"dim": true}',
        '{"dim": "32"}',
        '{"dim": 32.5}',
    ):
        with pytest.raises(ValidationError):
            ReindexSpec.model_validate_json(body)
    settings = Settings(
        data_dir=tmp_path / "data", model=str(tiny_dir), embed=EmbedSettings(max_pixels=TINY, threads=1)
    )
    with Index.open(settings) as index:
        assert index.add([documents / "pysamples__smile.png"]).ok
    # an operator's endpoint: a client on the server's machine, calling it by its name there
    app = create_app(settings)
    with TestClient(app, base_url="http://127.0.0.1", client=("127.0.0.1", 50000)) as client:
        refused: list[dict[str, object]] = [
            {"max_pixels": 14_921_870_872},  # over every model's largest image: the schema's bound
            {"drop_old": 0},
            {"dim": True},
            {"max_pixels": "4000"},
        ]
        for sent in refused:
            r = client.post("/reindex", json=sent)
            assert r.status_code == 400, (sent, r.text)
        # within the schema's bound (the largest model's), over this model's (jina-embeddings-v4's 768
        # tokens): refused before the answer, as the library refuses it
        r = client.post("/reindex", json={"max_pixels": 700_000})
        assert (r.status_code, r.json()["error"]) == (400, "InputError"), r.text
        assert r.json()["detail"] == (
            "reindex with max_pixels=700000: max_pixels must lie between 784 and 602112 pixels "
            "(jina-embeddings-v4: 1 to 768 image tokens of 28x28 px), not 700000"
        )
        assert [v["version"] for v in client.get("/collections").json()] == ["docvec.v1"]  # nothing begun


# -- the page store ---------------------------------------------------------------------------------------


def _files(data: Path) -> set[str]:
    return {p.relative_to(data / "pages").as_posix() for p in (data / "pages").rglob("*") if p.is_file()}


def test_page_images_go_when_no_version_shows_them(tmp_path: Path, documents: Path, tiny_dir: Path) -> None:
    data = tmp_path / "data"
    env = _env(data, tiny_dir)
    smile, pdf = documents / "pysamples__smile.png", documents / "pysamples__minimal-document.pdf"
    assert docvec("ingest", str(smile), str(pdf), env=env).returncode == 0
    both = _files(data)
    assert len(both) == 4  # two pages, an image and a thumbnail each
    # the same page in another collection shares the files
    assert docvec("ingest", str(smile), "--collection", "other", env=env).returncode == 0
    assert _files(data) == both
    assert docvec("delete", str(smile), env=env).returncode == 0
    assert _files(data) == both  # collection "other" still shows it
    assert docvec("delete", str(smile), "--collection", "other", env=env).returncode == 0
    only_pdf = _files(data)
    assert len(only_pdf) == 2 and only_pdf < both
    # a reindex to another budget keeps the old images while the old version stays; dropping it frees them
    assert docvec("reindex", "--max-pixels", str(BIGGER), env=env).returncode == 0
    assert _files(data) > only_pdf
    r = docvec("collections", "drop", "docvec.v1", env=env)
    assert r.returncode == 0 and "2 files removed" in r.stdout, r.stdout + r.stderr
    assert len(_files(data)) == 2 and not (_files(data) & only_pdf)
    # a stray file (a crash between writing an image and its point) goes with `docvec gc`
    stray = data / "pages" / "ff" / "stray.png"
    stray.parent.mkdir(exist_ok=True)
    stray.write_bytes(b"x")
    r = docvec("gc", "--json", env=env)
    assert json.loads(r.stdout) == {
        "files_removed": 1,
        "bytes_freed": 1,
        "files_kept": 2,
        "uploads_removed": 0,
        "upload_bytes_freed": 0,
    }
    r = docvec("collections", "drop", "docvec.v2", env=env)
    assert r.returncode == 2 and "live" in r.stderr


def test_an_index_follows_its_collection_to_a_version_made_elsewhere(
    tmp_path: Path, documents: Path, tiny_dir: Path, bf16_model: str
) -> None:
    """A server on a Qdrant server sees another machine switch its collection: it goes on with the new
    version, and the model that version names (here the switch is made on the same store, behind the
    index's back)."""
    from docvec import Embedder
    from docvec._pipeline._parts import Parts
    from docvec._pipeline._reindex import Reindexer
    from docvec._render._renderer import Renderer

    settings = Settings(data_dir=tmp_path / "data", model=str(tiny_dir), embed=EmbedSettings(max_pixels=TINY))
    with Index.open(settings) as index:
        index.add([documents / "pysamples__smile.png", documents / "pysamples__minimal-document.pdf"])
        before = index.search("a face", 2)
        with (
            Embedder.open(bf16_model, EmbedSettings(max_pixels=TINY)) as other,
            Renderer(target_pixels=TINY) as renderer,
        ):
            parts = Parts(index._store, index.pages, renderer, other)
            made = Reindexer(parts, collection="docvec", model=bf16_model).run()
            expected = other.embed_queries(["a face"])[0]
        assert made.switched
        after = index.search("a face", 2)
        assert index.embedder.files.language_model.name == "tiny-qwen25vl-BF16.gguf"
        assert [h.score for h in after] != [h.score for h in before]
        stored = {p.id: p.vector for p in index._store.scroll("docvec", with_vectors=True)}
        best = max(float(v @ expected) for v in stored.values())
        assert after[0].score == pytest.approx(best, abs=2e-3)  # the new model's query, the new vectors
