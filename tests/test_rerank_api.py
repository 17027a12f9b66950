"""Reranked searches through the REST API and a :class:`RemoteIndex`, with the real parts: the tiny
embedding model, the embedded store, the tiny random-weight reranker, a server on a real socket.

The reranker's weights are random: its scores order nothing meaningful, but they are its own, so each hit's
``rerank_score`` is checked against the reranker scoring that hit's stored page image with the query."""

from __future__ import annotations

import hashlib
import shutil
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from docvec import (
    ConflictError,
    EmbedSettings,
    Index,
    InputError,
    RemoteIndex,
    RenderSettings,
    Reranker,
    SearchFilter,
    Settings,
)
from docvec.api import create_app

from .processes import free_port

#: 8x8 tokens a page: fast, and the same path
SMALL = 28 * 28 * 64

DOCS = {
    "pysamples__minimal-document.pdf": 1,
    "pysamples__pdflatex-4-pages.pdf": 4,
    "pysamples__smile.png": 1,
}
TAGGED = "pysamples__pdflatex-4-pages.pdf"
QUERY = "a page with a table"


def _settings(data_dir: Path, tiny_dir: Path, **extra: Any) -> Settings:
    return Settings(
        data_dir=data_dir,
        model=str(tiny_dir),
        embed=EmbedSettings(max_pixels=SMALL, threads=2),
        render=RenderSettings(workers=1, timeout_s=120),
        **extra,
    )


def _doc_id(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:32]


@contextmanager
def _serve(settings: Settings) -> Iterator[httpx.Client]:
    """The app for ``settings`` on a free port (uvicorn in a thread), and a client of it."""
    port = free_port()
    srv = uvicorn.Server(uvicorn.Config(create_app(settings), port=port, log_level="warning"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 120
    while not srv.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the server did not start"
        time.sleep(0.05)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120) as http:
            yield http
    finally:
        srv.should_exit = True
        thread.join(30)


@pytest.fixture(scope="module")
def docs(documents: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("rerank-api-docs")
    return {name: Path(shutil.copy(documents / name, folder / name)) for name in DOCS}


@pytest.fixture(scope="module")
def settings(
    docs: dict[str, Path], tiny_dir: Path, reranker_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Settings:
    s = _settings(tmp_path_factory.mktemp("rerank-api-data"), tiny_dir, rerank_model=str(reranker_dir))
    with Index.open(s) as ix:  # the store has one owner: index first, then let the app open it
        assert ix.add([p for n, p in docs.items() if n != TAGGED]).ok
        assert ix.add([docs[TAGGED]], tags=["team=legal"]).ok
    return s


@pytest.fixture(scope="module")
def http(settings: Settings) -> Iterator[httpx.Client]:
    """A server with the tiny reranker (DOCVEC_RERANK_MODEL), reranking nothing by default."""
    with _serve(settings) as client:
        yield client


@pytest.fixture(scope="module")
def plain(tiny_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    """A server without a reranker (nothing indexed: it refuses a reranked search before it looks)."""
    with _serve(_settings(tmp_path_factory.mktemp("rerank-api-plain"), tiny_dir)) as client:
        yield client


def _ok(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def _check_reranked(
    http: httpx.Client, reranker: Reranker, body: dict[str, Any], k: int, tmp_path: Path
) -> None:
    """``k`` hits, each with the reranker's own score of (query, its stored page image), best first."""
    hits = body["hits"]
    assert len(hits) == k
    scores = [h["rerank_score"] for h in hits]
    assert all(isinstance(s, float) and 0 <= s <= 1 for s in scores), scores
    assert scores == sorted(scores, reverse=True)
    images = []
    for i, hit in enumerate(hits):
        assert isinstance(hit["score"], float)  # the first stage's, kept beside it
        image = tmp_path / f"hit-{i}.png"
        image.write_bytes(http.get(hit["image_url"]).content)
        images.append(image)
    expected = reranker.score(body["query"], images)
    assert scores == pytest.approx([float(s) for s in expected], abs=1e-5)


# -- the server's word ------------------------------------------------------------------------------------


def test_healthz_names_the_reranker(http: httpx.Client, plain: httpx.Client, reranker_dir: Path) -> None:
    health = _ok(http.get("/healthz"))
    # open to anyone: the reranker's folder by its name, not where the server keeps it
    assert (health["reranker"], health["rerank"]) == (reranker_dir.name, 0)
    none = _ok(plain.get("/healthz"))
    assert "reranker" in none and (none["reranker"], none["rerank"]) == (None, 0)


# -- reranked searches --------------------------------------------------------------------------------------


def test_post_and_get_rerank_the_first_stages_best(
    http: httpx.Client, reranker: Reranker, tmp_path: Path
) -> None:
    body = _ok(http.post("/search", json={"query": QUERY, "k": 3, "rerank": 6}))
    assert (body["k"], body["rerank"]) == (3, 6)
    _check_reranked(http, reranker, body, 3, tmp_path)
    # all six pages reranked: the three above are its best three, in its order
    every = _ok(http.post("/search", json={"query": QUERY, "k": 6, "rerank": 6}))
    _check_reranked(http, reranker, every, 6, tmp_path)
    assert every["hits"][:3] == body["hits"]
    # the same search as a link
    got = _ok(http.get("/search", params={"q": QUERY, "k": 3, "rerank": 6}))
    assert got["hits"] == body["hits"] and got["rerank"] == 6


def test_a_search_that_asks_for_no_rerank_is_the_first_stage(http: httpx.Client) -> None:
    first = _ok(http.post("/search", json={"query": QUERY, "k": 6}))
    assert first["rerank"] == 0 and all(h["rerank_score"] is None for h in first["hits"])
    scores = [h["score"] for h in first["hits"]]
    assert scores == sorted(scores, reverse=True)
    assert _ok(http.post("/search", json={"query": QUERY, "k": 6, "rerank": 0}))["hits"] == first["hits"]
    assert _ok(http.get("/search", params={"q": QUERY, "k": 6, "rerank": 0}))["hits"] == first["hits"]
    # the reranked hits are the same pages, the first stage's scores kept
    reranked = _ok(http.post("/search", json={"query": QUERY, "k": 6, "rerank": 6}))["hits"]
    assert {(h["doc_id"], h["page"], h["score"]) for h in reranked} == {
        (h["doc_id"], h["page"], h["score"]) for h in first["hits"]
    }


def test_rerank_within_a_filter(
    http: httpx.Client, reranker: Reranker, docs: dict[str, Path], tmp_path: Path
) -> None:
    tagged = _doc_id(docs[TAGGED])
    body = _ok(
        http.post(
            "/search", json={"query": QUERY, "k": 2, "rerank": 10, "filter": {"tags": {"team": "legal"}}}
        )
    )
    _check_reranked(http, reranker, body, 2, tmp_path)
    assert {h["doc_id"] for h in body["hits"]} == {tagged}
    # deeper than the pages the filter admits: all four are read, their best two come back
    every = _ok(
        http.post("/search", json={"query": QUERY, "k": 4, "rerank": 10, "filter": {"doc_id": tagged}})
    )
    _check_reranked(http, reranker, every, 4, tmp_path)
    assert sorted(h["page"] for h in every["hits"]) == [1, 2, 3, 4] and every["hits"][:2] == body["hits"]
    got = _ok(http.get("/search", params={"q": QUERY, "k": 2, "rerank": 10, "tag": "team=legal"}))
    assert got["hits"] == body["hits"]
    one = _doc_id(docs["pysamples__minimal-document.pdf"])
    single = _ok(http.get("/search", params={"q": QUERY, "k": 3, "rerank": 5, "doc_id": one}))
    assert [(h["doc_id"], h["page"]) for h in single["hits"]] == [(one, 1)]
    assert 0 <= single["hits"][0]["rerank_score"] <= 1


# -- refusals -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("request_", "fragment"),
    [
        ({"k": 5, "rerank": 3}, "rerank (3) is below k (5)"),
        ({"k": 5, "rerank": 101}, "rerank must be from 0 (off) to 100 pages, not 101"),
        ({"k": 5, "rerank": -1}, "rerank must be from 0 (off) to 100 pages, not -1"),
    ],
)
def test_a_bad_rerank_is_400(
    http: httpx.Client, plain: httpx.Client, request_: dict[str, int], fragment: str
) -> None:
    for client in (http, plain):  # with a reranker or without: the request is wrong either way
        for r in (
            client.post("/search", json={"query": QUERY, **request_}),
            client.get("/search", params={"q": QUERY, **request_}),
        ):
            assert r.status_code == 400, r.text
            assert r.json()["error"] == "InputError" and fragment in r.json()["detail"]


def test_a_rerank_that_is_not_a_number_is_422(http: httpx.Client) -> None:
    for value in (True, "10", 10.5):
        r = http.post("/search", json={"query": QUERY, "k": 2, "rerank": value})
        assert r.status_code == 422 and "rerank" in r.json()["detail"], (value, r.text)
    assert http.get("/search", params={"q": QUERY, "rerank": "many"}).status_code == 422


def test_a_server_without_a_reranker_answers_409(plain: httpx.Client) -> None:
    for r in (
        plain.post("/search", json={"query": QUERY, "k": 2, "rerank": 10}),
        plain.get("/search", params={"q": QUERY, "k": 2, "rerank": 10}),
    ):
        assert r.status_code == 409, r.text
        body = r.json()
        assert body["error"] == "ConflictError"
        assert "no reranker" in body["detail"] and "DOCVEC_RERANK_MODEL" in body["detail"]
    # without the second stage it searches as ever
    assert _ok(plain.post("/search", json={"query": QUERY, "rerank": 0})) == {
        "query": QUERY,
        "k": 5,
        "mode": "dense+text",
        "rerank": 0,
        "hits": [],
    }


def test_the_servers_default_rerank(tiny_dir: Path, reranker_dir: Path, tmp_path: Path) -> None:
    """DOCVEC_RERANK: a search that says nothing of rerank is reranked that deep; one that says 0 is not."""
    settings = _settings(tmp_path / "data", tiny_dir, rerank_model=str(reranker_dir), rerank=8)
    with _serve(settings) as client:
        assert _ok(client.get("/healthz"))["rerank"] == 8
        assert _ok(client.post("/search", json={"query": QUERY}))["rerank"] == 8
        assert _ok(client.get("/search", params={"q": QUERY, "k": 8}))["rerank"] == 8
        assert _ok(client.post("/search", json={"query": QUERY, "rerank": 0}))["rerank"] == 0
        assert _ok(client.post("/search", json={"query": QUERY, "k": 9, "rerank": 9}))["rerank"] == 9
        # more pages than the default depth: all of them are reranked (the default is not an error)
        deeper = _ok(client.post("/search", json={"query": QUERY, "k": 9}))
        assert deeper["rerank"] == 9 and all(h["rerank_score"] is not None for h in deeper["hits"])
        # asked for explicitly, a depth below k is
        r = client.post("/search", json={"query": QUERY, "k": 9, "rerank": 8})
        assert r.status_code == 400 and "rerank (8) is below k (9)" in r.json()["detail"]


# -- RemoteIndex -------------------------------------------------------------------------------------------


def test_a_remote_index_reranks_as_a_local_one(
    http: httpx.Client, plain: httpx.Client, settings: Settings, docs: dict[str, Path]
) -> None:
    with RemoteIndex(str(http.base_url), settings) as remote:
        hits = remote.search(QUERY, 3, rerank=6)
        served = _ok(http.post("/search", json={"query": QUERY, "k": 3, "rerank": 6}))["hits"]
        assert [(h.doc_id, h.page, h.rerank_score) for h in hits] == [
            (h["doc_id"], h["page"], h["rerank_score"]) for h in served
        ]
        tagged = remote.search(QUERY, 2, SearchFilter(tags={"team": "legal"}), rerank=4)
        assert {h.doc_id for h in tagged} == {_doc_id(docs[TAGGED])}
        assert all(h.rerank_score is not None for h in tagged)
        assert all(h.rerank_score is None for h in remote.search(QUERY, 3))  # the server's default: 0
        with pytest.raises(InputError, match=r"rerank \(2\) is below k \(3\)"):
            remote.search(QUERY, 3, rerank=2)
    with RemoteIndex(str(plain.base_url), settings) as remote, pytest.raises(ConflictError) as caught:
        remote.search(QUERY, 3, rerank=6)
    assert type(caught.value) is ConflictError and "no reranker" in str(caught.value)
