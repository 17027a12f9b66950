"""The HTTP API with the real parts (tiny model, embedded Qdrant): in process and over a socket; and
reranked searches through it and a :class:`RemoteIndex`, with the tiny random-weight reranker.

The reranker's weights are random: its scores order nothing meaningful, but they are its own, so each hit's
``rerank_score`` is checked against the reranker scoring that hit's stored page image with the query."""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import signal
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from PIL import Image

from docvec import (
    ConflictError,
    DocvecError,
    Index,
    InputError,
    RemoteIndex,
    Reranker,
    SearchFilter,
    Settings,
    StoreUnavailableError,
)
from docvec._pipeline._ingest import Interrupted
from docvec._store import Filter, Point, point_id
from docvec.api import API_MODELS, MAX_QUERY_CHARS, create_app

from .documents import make_text_pdf, png_header_only
from .helpers import MINIMAL, SMALL, index_settings, page_image
from .processes import Served, docvec, serve_in_thread, served

DOCS = {
    "pysamples__minimal-document.pdf": 1,
    "pysamples__pdflatex-4-pages.pdf": 4,
    "pysamples__smile.png": 1,
}
TAGGED = "pysamples__pdflatex-4-pages.pdf"
PNG = b"\x89PNG\r\n\x1a\n"
JPEG = b"\xff\xd8\xff"


def _doc_id(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:32]


@pytest.fixture(scope="module")
def docs(documents: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("api-docs")
    return {name: Path(shutil.copy(documents / name, folder / name)) for name in DOCS}


def _indexed(s: Settings, docs: dict[str, Path]) -> Settings:
    """``s``'s index holding ``docs``, :data:`TAGGED` tagged team=legal and year=2024; closed again (the
    store has one owner: the app opens it next)."""
    with Index.open(s) as ix:
        untagged = [p for n, p in docs.items() if n != TAGGED]
        assert ix.add(untagged).ok
        assert ix.add([docs[TAGGED]], tags=["team=legal", "year=2024"]).ok
    return s


@pytest.fixture(scope="module")
def settings(docs: dict[str, Path], tiny_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Settings:
    return _indexed(index_settings(tmp_path_factory.mktemp("api-data"), tiny_dir), docs)


@pytest.fixture(scope="module")
def client(settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(settings)) as c:  # the context runs the lifespan
        yield c


@pytest.fixture(scope="module")
def operator(client: TestClient) -> TestClient:
    """The same app (no second lifespan) asked by a program on the server's machine: with no keys set, the
    operator, who is told and filters by the server's own paths (a reader: test_api_access)."""
    return TestClient(client.app, base_url="http://127.0.0.1", client=("127.0.0.1", 50000))


# -- search --------------------------------------------------------------------------------------------


# as `docvec search --json` prints: a snippet of the page's text on a collection with text, and the whole
# text when asked for (null otherwise)
HIT_FIELDS = {"doc_id", "source", "name", "page", "score", "tags", "snippet", "text", "rerank_score"}


def _check_hit(client: TestClient, hit: dict[str, object], docs: dict[str, Path]) -> None:
    by_id = {_doc_id(p): (n, p) for n, p in docs.items()}
    assert set(hit) == HIT_FIELDS | {"thumbnail_url", "image_url", "file_url"}
    name, _ = by_id[str(hit["doc_id"])]
    # a reader is shown a document's name where it lies outside the ingest roots, not the server's path
    assert hit["source"] == name and hit["name"] == name
    assert 1 <= int(str(hit["page"])) <= DOCS[name]
    base = f"/documents/{hit['doc_id']}/pages/{hit['page']}"
    assert (hit["thumbnail_url"], hit["image_url"]) == (f"{base}/thumbnail", f"{base}/image")
    assert hit["file_url"] == f"/documents/{hit['doc_id']}/file"


def test_search_post_and_get(client: TestClient, docs: dict[str, Path]) -> None:
    r = client.post("/search", json={"query": "a page with a table", "k": 6})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["k"] == 6 and len(body["hits"]) == 6  # 6 indexed pages
    # `top_k`, the name before docvec spelled it `k` everywhere, is still understood
    assert client.post("/search", json={"query": "a page with a table", "top_k": 6}).json() == body
    scores = [h["score"] for h in body["hits"]]
    assert scores == sorted(scores, reverse=True)
    pages = set()
    for hit in body["hits"]:
        _check_hit(client, hit, docs)
        pages.add((hit["doc_id"], hit["page"]))
    assert (_doc_id(docs[TAGGED]), 4) in pages and (_doc_id(docs[TAGGED]), 0) not in pages
    tagged = next(h for h in body["hits"] if h["doc_id"] == _doc_id(docs[TAGGED]))
    assert tagged["tags"] == {"team": "legal", "year": "2024"}

    g = client.get("/search", params={"q": "a page with a table", "k": 6})
    assert g.status_code == 200
    assert g.json()["hits"] == body["hits"]
    assert len(client.get("/search", params={"q": "x"}).json()["hits"]) == 5  # default k


def test_keyword_search_snippets_and_a_pages_text(client: TestClient, docs: dict[str, Path]) -> None:
    # the collection keeps its pages' text (DOCVEC_TEXT, on by default): auto fuses the two rankings
    health = client.get("/healthz").json()
    assert health["text"] is True and health["search_mode"] == "dense+text"
    body = client.get("/search", params={"q": "Huardest gefburn", "k": 3, "mode": "text"}).json()
    assert body["mode"] == "text"
    first = body["hits"][0]
    assert (first["doc_id"], first["page"]) == (_doc_id(docs[TAGGED]), 2)
    snippet = first["snippet"]
    assert {snippet["text"][a:b] for a, b in snippet["marks"]} >= {"Huardest", "gefburn"}
    assert first["text"] is None
    # the RAG caller's one round trip: each hit's whole text
    fused = client.post("/search", json={"query": "Huardest gefburn", "k": 3, "with_text": True}).json()
    assert fused["mode"] == "dense+text"
    whole = next(h for h in fused["hits"] if h["page"] == 2 and h["doc_id"] == first["doc_id"])
    assert "Huardest gefburn" in whole["text"]
    # and a page's text by its address
    page = client.get(f"/documents/{first['doc_id']}/pages/2/text")
    assert page.status_code == 200
    assert page.json() == {"doc_id": first["doc_id"], "page": 2, "text": whole["text"], "text_from": "pdf"}
    assert client.get(f"/documents/{first['doc_id']}/pages/9/text").status_code == 404
    assert client.get(f"/documents/{'0' * 32}/pages/1/text").status_code == 404
    # an image without text: found by its look, never by keywords; its text is empty
    smile = _doc_id(docs["pysamples__smile.png"])
    assert client.get(f"/documents/{smile}/pages/1/text").json()["text"] == ""
    keyword = client.get("/search", params={"q": "smile face", "k": 6, "mode": "text"}).json()["hits"]
    assert smile not in {h["doc_id"] for h in keyword}


def test_keyword_modes_on_a_collection_without_text_are_409(
    tiny_dir: Path, tmp_path: Path, documents: Path
) -> None:
    s = index_settings(tmp_path / "data", tiny_dir, text=False)
    with Index.open(s) as ix:
        assert ix.add([shutil.copy(documents / "pysamples__minimal-document.pdf", tmp_path / "m.pdf")]).ok
    with TestClient(create_app(s)) as c:
        assert c.get("/healthz").json()["search_mode"] == "dense"
        r = c.get("/search", params={"q": "lorem ipsum", "mode": "text"})
        assert r.status_code == 409 and "reindex --text" in r.json()["detail"]
        doc = c.get("/documents").json()["documents"][0]["doc_id"]
        t = c.get(f"/documents/{doc}/pages/1/text")
        assert t.status_code == 409 and "keeps no text" in t.json()["detail"]


def test_hit_urls_serve_page_images(client: TestClient) -> None:
    hits = client.get("/search", params={"q": "smile", "k": 6}).json()["hits"]
    for hit in hits:
        image = client.get(hit["image_url"])
        thumb = client.get(hit["thumbnail_url"])
        assert image.status_code == thumb.status_code == 200
        assert image.headers["content-type"] == "image/png" and image.content.startswith(PNG)
        assert thumb.headers["content-type"] == "image/jpeg" and thumb.content.startswith(JPEG)
        with Image.open(io.BytesIO(thumb.content)) as im:
            assert max(im.size) <= 256


def test_search_filters(client: TestClient, operator: TestClient, docs: dict[str, Path]) -> None:
    one = _doc_id(docs["pysamples__minimal-document.pdf"])
    r = client.post("/search", json={"query": "text", "k": 10, "filter": {"doc_id": one}})
    assert [(h["doc_id"], h["page"]) for h in r.json()["hits"]] == [(one, 1)]
    r = client.post("/search", json={"query": "text", "k": 10, "filter": {"tags": {"team": "legal"}}})
    assert sorted(h["page"] for h in r.json()["hits"]) == [1, 2, 3, 4]
    both = {"team": "legal", "year": "2024"}
    r = client.post("/search", json={"query": "text", "k": 10, "filter": {"tags": both}})
    assert sorted(h["page"] for h in r.json()["hits"]) == [1, 2, 3, 4]
    for tags in ({"team": "nobody"}, {"team": "legal", "year": "1999"}):  # every tag must hold
        r = client.post("/search", json={"query": "text", "filter": {"tags": tags}})
        assert r.status_code == 200 and r.json()["hits"] == []
    folder = str(docs[TAGGED].resolve().parent)  # the operator's terms: a path on the server
    r = operator.post("/search", json={"query": "text", "k": 10, "filter": {"source": folder}})
    assert len(r.json()["hits"]) == 6
    r = operator.post("/search", json={"query": "text", "filter": {"source": "/nowhere/"}})
    assert r.json()["hits"] == []
    # a folder matches at path boundaries: not a sibling whose name extends it
    r = operator.post("/search", json={"query": "text", "k": 10, "filter": {"source": folder[:-1]}})
    assert r.json()["hits"] == []
    # one file
    r = operator.post(
        "/search", json={"query": "text", "k": 10, "filter": {"source": str(docs[TAGGED].resolve())}}
    )
    assert sorted(h["page"] for h in r.json()["hits"]) == [1, 2, 3, 4]


def test_get_search_takes_the_same_filters(
    client: TestClient, operator: TestClient, docs: dict[str, Path]
) -> None:
    one = _doc_id(docs["pysamples__minimal-document.pdf"])
    get = client.get("/search", params={"q": "text", "k": 10, "doc_id": one}).json()
    post = client.post("/search", json={"query": "text", "k": 10, "filter": {"doc_id": one}}).json()
    assert get["hits"] == post["hits"] and [h["doc_id"] for h in get["hits"]] == [one]
    params = [("q", "text"), ("k", "10"), ("tag", "team=legal"), ("tag", "year=2024")]
    assert sorted(h["page"] for h in client.get("/search", params=params).json()["hits"]) == [1, 2, 3, 4]
    folder = str(docs[TAGGED].resolve().parent)
    assert len(operator.get("/search", params={"q": "text", "k": 10, "source": folder}).json()["hits"]) == 6
    for bad, fragment in (({"tag": "team"}, "key=value"), ({"doc_id": "xyz"}, "32 hex digits")):
        r = client.get("/search", params={"q": "text", **bad})
        assert r.status_code == 400 and fragment in r.json()["detail"], r.text
    r = client.get("/search", params={"q": "text", "colour": "red"})
    assert r.status_code == 400 and "colour" in r.json()["detail"]


@pytest.fixture(scope="module")
def rooted(
    documents: Path, tiny_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[TestClient, TestClient, Path]]:
    """A server with an ingest root (``.../srv/papers``) holding zeta.pdf, a file of the owner's outside it
    (alpha.png), and three uploads: beta.png and two documents both named memo.png; a reader's client, an
    operator's, and the root."""
    base = tmp_path_factory.mktemp("rooted")
    root, home = base / "srv" / "papers", base / "home"
    root.mkdir(parents=True)
    home.mkdir()
    shutil.copy(documents / "pysamples__minimal-document.pdf", root / "zeta.pdf")
    shutil.copy(documents / "pysamples__smile.png", home / "alpha.png")
    settings = index_settings(base / "data", tiny_dir, ingest_roots=[str(root)])
    with Index.open(settings) as ix:
        assert ix.add([root / "zeta.pdf", home / "alpha.png"]).ok
    with TestClient(create_app(settings)) as reader:
        for name, seed in (("memo.png", 31), ("beta.png", 32), ("memo.png", 33)):
            r = reader.post("/documents", params={"wait": "true"}, files={"file": (name, _png(seed))})
            assert r.status_code == 200 and not r.json()["already_indexed"], r.text
        yield reader, TestClient(reader.app, base_url="http://127.0.0.1", client=("127.0.0.1", 50000)), root


def _found(client: TestClient, source: str) -> list[tuple[str, str]]:
    """The (name, source) of every page a search filtered by ``source`` finds, by GET and by POST alike."""
    got = client.get("/search", params={"q": "x", "k": 10, "source": source})
    posted = client.post("/search", json={"query": "x", "k": 10, "filter": {"source": source}})
    assert got.status_code == posted.status_code == 200, (got.text, posted.text)
    assert got.json()["hits"] == posted.json()["hits"]
    return sorted((h["name"], h["source"]) for h in got.json()["hits"])


def test_a_source_filter_takes_a_documents_name_as_well_as_a_path(
    rooted: tuple[TestClient, TestClient, Path],
) -> None:
    reader, operator, root = rooted
    # an upload's source is its name to a reader: filtering by it finds it, both documents of that name
    assert _found(reader, "memo.png") == [("memo.png", "memo.png"), ("memo.png", "memo.png")]
    # the same name for the operator, who is shown where the server keeps the uploads
    kept = _found(operator, "memo.png")
    assert [name for name, _ in kept] == ["memo.png"] * 2 and all(s.endswith(".png") for _, s in kept)
    assert all(Path(s).parent.name == "uploads" for _, s in kept)
    # a file outside the ingest roots is shown by its name, and found by it
    assert _found(reader, "alpha.png") == [("alpha.png", "alpha.png")]
    # a folder as the reader is shown it, and the file in it; the operator names the server's paths
    assert _found(reader, "papers") == _found(reader, "papers/zeta.pdf") == [("zeta.pdf", "papers/zeta.pdf")]
    assert _found(operator, str(root)) == [("zeta.pdf", str(root / "zeta.pdf"))]
    assert _found(reader, "nothing.png") == []
    # a reader's path outside the roots, or climbing out of one, and a relative path are refused alike,
    # naming the input, whatever lies on the server's disk; an operator's relative path names nothing
    for client, source in (
        (reader, "/etc"),
        (reader, "/etc/passwd"),
        (reader, "papers/../../home"),
        (reader, ".."),
        (operator, "papers/zeta.pdf"),
    ):
        r = client.get("/search", params={"q": "x", "source": source})
        assert r.status_code == 400 and r.json()["error"] == "InputError", (source, r.text)
        assert repr(source) in r.json()["detail"] and str(root.parent) not in r.text, r.text


def test_documents_are_listed_by_name_for_every_caller(rooted: tuple[TestClient, TestClient, Path]) -> None:
    reader, operator, _ = rooted
    names = ["alpha.png", "beta.png", "memo.png", "memo.png", "zeta.pdf"]
    shown = reader.get("/documents").json()["documents"]
    assert [d["name"] for d in shown] == names
    assert [d["source"] for d in shown] == [
        "alpha.png",
        "beta.png",
        "memo.png",
        "memo.png",
        "papers/zeta.pdf",
    ]
    # the operator's list, sources and all, is in the same order: paged as the reader's
    listed = operator.get("/documents").json()["documents"]
    assert [d["doc_id"] for d in listed] == [d["doc_id"] for d in shown]
    paged = [
        reader.get("/documents", params={"offset": i, "limit": 2}).json()["documents"] for i in (0, 2, 4)
    ]
    assert [d["doc_id"] for page in paged for d in page] == [d["doc_id"] for d in shown]


def test_an_unknown_mode_or_a_malformed_doc_id_is_400_as_the_library_says_it(client: TestClient) -> None:
    index = client.app.state.index  # type: ignore[attr-defined]
    for options, given in (
        ({"mode": "bogus"}, {"mode": "bogus"}),
        ({"filter": {"doc_id": "xyz"}}, {"doc_id": "xyz"}),
    ):
        with pytest.raises(InputError) as raised:
            index.search("x", **options)
        for r in (
            client.get("/search", params={"q": "x", **given}),
            client.post("/search", json={"query": "x", **options}),
        ):
            assert r.status_code == 400, r.text
            assert (r.json()["error"], r.json()["detail"]) == ("InputError", str(raised.value))
    assert "search mode must be auto or one of dense" in client.get("/search?q=x&mode=bogus").json()["detail"]


@pytest.mark.parametrize(
    ("body", "rule", "fragment"),
    [
        # docvec's own rules: its own words, as the library says them
        ({"query": ""}, True, "the query is empty"),
        ({"query": "   "}, True, "the query is empty"),
        ({"query": "x", "k": 0}, True, "k must be between 1 and 100, not 0"),
        ({"query": "x", "k": 101}, True, "k must be between 1 and 100, not 101"),
        ({"query": "x", "prefetch": 0}, True, "prefetch must be from 1 to 10000 pages, not 0"),
        (
            {"query": "x", "filter": {"doc_id": "../../etc"}},
            True,
            "filter doc_id: a document id is 32 hex digits, not '../../etc'",
        ),
        # the request's own shape: the same class, so the same status, each error named
        ({"query": "x" * (MAX_QUERY_CHARS + 1)}, False, "query"),
        ({"query": "x", "k": "many"}, False, "k"),
        ({}, False, "query"),
        ({"query": "x", "filter": {"tags": "team=legal"}}, False, "tags"),
        ({"query": "x", "filter": {"tags": {"team": ""}}}, False, "tags"),
        ({"query": "x", "filter": {"colour": "red"}}, False, "colour"),
        ({"query": "x", "filter": []}, False, "filter"),
    ],
)
def test_search_rejects_bad_input(
    client: TestClient, body: dict[str, object], rule: bool, fragment: str
) -> None:
    r = client.post("/search", json=body)
    assert r.status_code == 400, r.text
    answer = r.json()
    assert answer["error"] == "InputError" and "Traceback" not in r.text
    assert (answer["detail"] == fragment) if rule else (fragment in answer["detail"] and answer["errors"])
    assert len(r.text) < 2000  # the over-long query is not echoed back


def test_search_get_rejects_bad_input(client: TestClient) -> None:
    bad: list[dict[str, str | int]] = [
        {"q": ""},
        {"q": "x" * 1001},
        {"q": "x", "k": 0},
        {"q": "x", "k": 101},
        {},
    ]
    for params in bad:
        r = client.get("/search", params=params)
        assert r.status_code == 400, (params, r.text)
        assert r.json()["detail"] and r.json()["error"] == "InputError"
    r = client.post("/search", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["error"] == "InputError"


def test_the_schema_states_the_rules_the_code_applies(client: TestClient) -> None:
    """What schemathesis found: the schema and the code agreed on every value, and every refusal, the
    framework's own included, has docvec's body."""
    # JSON Schema's integer: 63.0 is one, for rerank as for k and prefetch (this server has no reranker: 409,
    # not a refusal of the number); 4553.5 and true are not
    assert client.post("/search", json={"query": "x", "rerank": 63.0}).json()["error"] == "ConflictError"
    assert client.post("/search", json={"query": "x", "k": 3.0}).status_code == 200
    for body in (
        {"query": "x", "prefetch": 4553.5},
        {"query": "x", "k": True},
        {"query": "x", "rerank": "9"},
    ):
        assert client.post("/search", json=body).status_code == 400, body
    # an empty doc_id is no document id (the schema's pattern), not "no filter"
    r = client.get("/search", params={"q": "x", "doc_id": ""})
    assert r.status_code == 400 and "32 hex digits" in r.json()["detail"]
    # no name holds a NUL: the schema says so, as the code refuses it
    schema = client.get("/openapi.json").json()
    target = next(p for p in schema["paths"]["/documents"]["delete"]["parameters"] if p["name"] == "target")
    assert target["schema"]["pattern"] == r"^[^\x00]+$"
    # the framework's own refusals: docvec's body and class
    for r, status, error in (
        (client.get("/no/such/endpoint"), 404, "NotFoundError"),
        (
            client.post(
                "/search", content=b'{"query": "\xff"}', headers={"content-type": "application/json"}
            ),
            400,
            "InputError",
        ),
        (
            client.post("/documents", content=b"x", headers={"content-type": "multipart/form-data"}),
            400,
            "InputError",
        ),
        (client.put("/search"), 405, "UnsupportedError"),
    ):
        assert r.status_code == status and r.json()["error"] == error and r.json()["detail"], r.text


def test_concurrent_searches_agree(client: TestClient) -> None:
    queries = ["invoice total", "a smiling face", "chapter one"]

    def worker(_: int) -> list[list[tuple[str, int, float]]]:
        out = []
        for q in queries:
            r = client.post("/search", json={"query": q, "k": 4})
            assert r.status_code == 200, r.text
            out.append([(h["doc_id"], h["page"], h["score"]) for h in r.json()["hits"]])
        return out

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(worker, range(8)))
    assert all(r == results[0] for r in results)
    assert all(len(hits) == 4 for hits in results[0])


# -- documents -----------------------------------------------------------------------------------------


def test_documents_list_and_get(operator: TestClient, docs: dict[str, Path]) -> None:
    client = operator  # who is told where the server read each document from
    body = client.get("/documents").json()
    assert body["total"] == 3 and body["offset"] == 0
    entries = {d["doc_id"]: d for d in body["documents"]}
    for name, path in docs.items():
        d = entries[_doc_id(path)]
        assert d["source"] == str(path.resolve())
        assert d["page_count"] == d["pages_indexed"] == DOCS[name]
        assert d["tags"] == ({"team": "legal", "year": "2024"} if name == TAGGED else {})
        assert d["ingested_at"]
    assert [d["name"] for d in body["documents"]] == sorted(d["name"] for d in body["documents"])

    paged = client.get("/documents", params={"offset": 1, "limit": 1}).json()
    assert paged["total"] == 3 and [d["doc_id"] for d in paged["documents"]] == [
        body["documents"][1]["doc_id"]
    ]
    assert client.get("/documents", params={"limit": 0}).status_code == 400


def test_documents_list_while_a_file_has_two_versions(
    client: TestClient, operator: TestClient, docs: dict[str, Path]
) -> None:
    # Ingesting a changed file writes its new version before removing the old one: for that moment one
    # source has two documents. The list then still shows each document once, in (name, source, doc_id)
    # order.
    index = client.app.state.index  # type: ignore[attr-defined]
    store, collection = index._store, index.collection
    old = _doc_id(docs[TAGGED])
    new_id = "f" * 32
    first = next(iter(store.scroll(collection, Filter(doc_ids=(old,)), with_vectors=True)))
    store.upsert(collection, [Point(point_id(new_id, 1), first.vector, {**first.payload, "doc_id": new_id})])
    try:
        body = operator.get("/documents").json()
        assert body["total"] == 4
        listed = [(d["name"], d["source"], d["doc_id"]) for d in body["documents"]]
        assert listed == sorted(listed) and len({d for *_, d in listed}) == 4
        assert (TAGGED, str(docs[TAGGED].resolve()), new_id) in listed
    finally:
        store.delete(collection, [point_id(new_id, 1)])
    assert client.get("/documents").json()["total"] == 3

    doc_id = _doc_id(docs[TAGGED])
    detail = client.get(f"/documents/{doc_id}").json()
    assert [p["page"] for p in detail["pages"]] == [1, 2, 3, 4]
    assert detail["pages"][2]["image_url"] == f"/documents/{doc_id}/pages/3/image"
    assert client.get(detail["pages"][3]["thumbnail_url"]).content.startswith(JPEG)


def test_unknown_document_and_page_are_404(client: TestClient, docs: dict[str, Path]) -> None:
    unknown = "0" * 32
    for url in (
        f"/documents/{unknown}",
        f"/documents/{unknown}/pages/1/image",
        f"/documents/{unknown}/pages/1/thumbnail",
        f"/documents/{_doc_id(docs[TAGGED])}/pages/5/image",
        f"/documents/{_doc_id(docs[TAGGED])}/pages/99/thumbnail",
    ):
        r = client.get(url)
        assert r.status_code == 404, url
        assert r.json()["detail"]
    assert client.delete(f"/documents/{unknown}").status_code == 404
    assert client.get(f"/documents/{_doc_id(docs[TAGGED])}/pages/0/image").status_code == 400


@pytest.mark.parametrize(
    "url",
    [
        "/documents/..%2F..%2Fetc/pages/1/image",
        "/documents/..%2F..%2F..%2F..%2F..%2Fetc%2Fpasswd/pages/1/image",
        "/documents/%2e%2e/pages/1/thumbnail",
        "/documents/abc%2Fdef/pages/1/image",
        "/documents/abc/def/pages/1/image",
        "/documents/" + "a" * 31 + "%2F/pages/1/image",
        "/documents/" + "A" * 32 + "/pages/1/image",
    ],
)
def test_path_traversal_is_refused(client: TestClient, url: str) -> None:
    r = client.get(url)
    assert r.status_code in (400, 404), (url, r.status_code)
    assert b"root:" not in r.content and not r.content.startswith(PNG)


# -- uploads -------------------------------------------------------------------------------------------


def test_upload_png_then_search_then_delete(client: TestClient, tmp_path: Path) -> None:
    buf = io.BytesIO()
    page_image(300, 400, seed=7).save(buf, "PNG")
    r = client.post(
        "/documents", files={"file": ("scan.png", buf.getvalue(), "image/png")}, data={"tag": ["kind=scan"]}
    )
    assert r.status_code == 200, r.text
    up = r.json()
    sha = hashlib.sha256(buf.getvalue()).hexdigest()
    assert up["doc_id"] == sha[:32] and up["pages"] == 1 and not up["already_indexed"]
    # kept under its content's name in the server's uploads folder, shown under the client's, no path told
    assert up["source"] == up["name"] == "scan.png"
    assert client.get(f"/documents/{up['doc_id']}").json()["name"] == "scan.png"
    original = client.get(f"/documents/{up['doc_id']}/file")
    assert original.content == buf.getvalue() and "scan.png" in original.headers["content-disposition"]

    hits = client.post("/search", json={"query": "scan", "filter": {"doc_id": up["doc_id"]}}).json()["hits"]
    assert [(h["doc_id"], h["page"], h["name"], h["source"]) for h in hits] == [
        (up["doc_id"], 1, "scan.png", "scan.png")
    ]
    listed = client.get("/documents").json()["documents"]
    assert [d["source"] for d in listed if d["doc_id"] == up["doc_id"]] == ["scan.png"]
    assert client.get(f"/documents/{up['doc_id']}").json()["source"] == "scan.png"
    kept = Path(client.app.state.index.stored_pages(up["doc_id"])[0].source)  # type: ignore[attr-defined]
    assert kept.name == f"{sha}.png" and kept.parent.name == "uploads"
    assert client.get(hits[0]["image_url"]).content.startswith(PNG)
    assert hits[0]["tags"] == {"kind": "scan"}
    assert client.get("/documents").json()["total"] == 4

    again = client.post("/documents", files={"file": ("copy.png", buf.getvalue(), "image/png")}).json()
    assert again["doc_id"] == up["doc_id"] and again["already_indexed"] and again["name"] == "scan.png"

    assert kept.is_file()
    d = client.delete(f"/documents/{up['doc_id']}")
    assert d.status_code == 200 and d.json() == {"doc_id": up["doc_id"], "pages_removed": 1}
    assert client.get(f"/documents/{up['doc_id']}").status_code == 404
    assert client.get("/documents").json()["total"] == 3
    assert not Path(up["source"]).exists()  # the uploaded copy goes with its document


def test_upload_of_content_indexed_from_a_file_reports_that_document(
    client: TestClient, docs: dict[str, Path]
) -> None:
    data = docs[TAGGED].read_bytes()
    r = client.post("/documents", files={"file": ("renamed.pdf", data, "application/pdf")})
    assert r.status_code == 200, r.text
    assert r.json() == {
        "doc_id": _doc_id(docs[TAGGED]),
        "source": TAGGED,  # a reader is told the document's name, not where the server read it
        "name": TAGGED,
        "pages": 4,
        "already_indexed": True,
    }
    uploads = client.app.state.index.uploads  # type: ignore[attr-defined]
    assert not list(uploads.glob(f"{hashlib.sha256(data).hexdigest()}.*"))  # no second copy kept
    assert client.get("/documents").json()["total"] == 3


def _finish(client: TestClient, job: dict[str, Any]) -> dict[str, Any]:
    """Follow a job's status_url until it is done or failed."""
    deadline = time.monotonic() + 60
    while job["status"] not in ("done", "failed"):
        assert time.monotonic() < deadline, job
        time.sleep(0.1)
        job = client.get(job["status_url"]).json()
    return job


def test_large_uploads_answer_202_with_a_job_to_follow(client: TestClient) -> None:
    buf = io.BytesIO()
    page_image(320, 240, seed=11).save(buf, "PNG")
    r = client.post(
        "/documents", params={"wait": "false"}, files={"file": ("big scan.png", buf.getvalue(), "image/png")}
    )
    assert r.status_code == 202, r.text
    job = r.json()
    assert job["status"] in ("queued", "running") and r.headers["location"] == job["status_url"]
    job = _finish(client, job)
    assert job["status"] == "done" and job["page"] == job["page_count"] == 1
    assert job["result"]["name"] == "big scan.png" and job["result"]["pages"] == 1
    assert client.delete(f"/documents/{job['result']['doc_id']}").status_code == 200
    assert client.get("/jobs/" + "0" * 32).status_code == 404


def test_an_upload_job_counts_its_one_document(client: TestClient) -> None:
    r = client.post("/documents", params={"wait": "false"}, files={"file": ("counted.png", _png(41))})
    assert r.status_code == 202, r.text
    job = r.json()
    assert (job["documents_done"], job["documents_total"]) == (0, 1)
    job = _finish(client, job)
    assert job["status"] == "done" and (job["documents_done"], job["documents_total"]) == (1, 1), job
    assert client.delete(f"/documents/{job['result']['doc_id']}").status_code == 200


def test_failed_uploads_say_why_without_the_servers_paths(client: TestClient, documents: Path) -> None:
    data_dir = str(client.app.state.index.settings.data_dir)  # type: ignore[attr-defined]
    encrypted = (documents / "pysamples__libreoffice-writer-password.pdf").read_bytes()
    r = client.post("/documents", files={"file": ("secret.pdf", encrypted, "application/pdf")})
    assert r.status_code == 422 and r.json()["errors"][0]["path"] == "secret.pdf"
    assert data_dir not in r.text and "uploads" not in r.text
    # refused before it is queued (its pages are counted first): no job to follow, the same answer
    r = client.post("/documents", params={"wait": "false"}, files={"file": ("secret.pdf", encrypted)})
    assert r.status_code == 422 and "password" in r.json()["detail"] and data_dir not in r.text


@contextmanager
def _serving_a_file_of_mine(tmp_path: Path, tiny_dir: Path) -> Iterator[tuple[TestClient, Path]]:
    """An app over an index of one image the user has in their own folder."""
    settings = index_settings(tmp_path / "data", tiny_dir)
    mine = tmp_path / "mine.png"
    page_image(200, 300, seed=3).save(mine)
    with Index.open(settings) as ix:
        assert ix.add([mine]).ok
    with TestClient(create_app(settings)) as c:
        yield c, mine


def test_deleting_an_ingested_document_keeps_the_users_file(tmp_path: Path, tiny_dir: Path) -> None:
    with _serving_a_file_of_mine(tmp_path, tiny_dir) as (c, mine):
        assert c.delete(f"/documents/{_doc_id(mine)}").json()["pages_removed"] == 1
    assert mine.is_file()  # only uploaded copies are docvec's to remove


def test_upload_refusals(client: TestClient, documents: Path) -> None:
    r = client.post("/documents", files={"file": ("notes.txt", b"just some text\n", "text/plain")})
    assert r.status_code == 422
    assert "not a document" in r.json()["detail"]
    r = client.post("/documents", files={"file": ("empty.pdf", b"", "application/pdf")})
    assert r.status_code == 422 and "empty" in r.json()["detail"]
    encrypted = (documents / "pysamples__libreoffice-writer-password.pdf").read_bytes()
    r = client.post("/documents", files={"file": ("secret.pdf", encrypted, "application/pdf")})
    assert r.status_code == 422 and "password" in r.json()["detail"]
    assert r.json()["errors"][0]["reason"]
    assert client.post("/documents").status_code == 400  # no file part: the request's shape
    r = client.post("/documents", files={"file": ("a.png", b"x")}, data={"tag": ["no-equals"]})
    assert r.status_code == 400 and "key=value" in r.json()["detail"]
    assert client.get("/documents").json()["total"] == 3


def test_upload_failures_are_4xx_with_the_reason_the_cli_gives(
    client: TestClient, tmp_path: Path, tiny_dir: Path
) -> None:
    from typer.testing import CliRunner

    from docvec._cli import app

    bomb = png_header_only(tmp_path / "bomb.png", 20_000, 20_000)  # 439 KB in the report; here, bytes
    damaged = tmp_path / "damaged.png"
    Image.effect_mandelbrot((300, 300), (-2, -1, 1, 1), 50).save(damaged)
    damaged.write_bytes(damaged.read_bytes()[:400])
    env = {"DOCVEC_DATA_DIR": str(tmp_path / "cli-data"), "DOCVEC_MODEL": str(tiny_dir)}
    for path in (bomb, damaged):
        r = client.post("/documents", files={"file": (path.name, path.read_bytes(), "image/png")})
        assert r.status_code == 422, r.text
        api_reason = r.json()["errors"][0]["reason"]
        cli = CliRunner().invoke(app, ["ingest", str(path), "--json"], env=env)
        assert cli.exit_code == 1, cli.output
        assert json.loads(cli.stdout)["failures"][0]["reason"] == api_reason, path.name


def test_request_body_limit(client: TestClient) -> None:
    r = client.post(
        "/search", content=b"{" + b" " * (2 << 20) + b"}", headers={"content-type": "application/json"}
    )
    assert r.status_code == 413

    def chunks() -> Iterator[bytes]:  # no content-length: the limit is counted as the body streams
        for _ in range(3):
            yield b" " * (1 << 20)

    r = client.post("/search", content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 413


# -- health, page, key, socket -------------------------------------------------------------------------


def test_healthz_and_page(client: TestClient) -> None:
    r = client.get("/healthz")
    assert r.status_code == 200 and r.json()["status"] == "ok" and r.json()["pages"] == 6
    page = client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert '<script src="app.js"' in page.text  # the page's own script, nothing from elsewhere
    script = client.get("/app.js")
    assert script.headers["content-type"].startswith("text/javascript")
    assert "http://" not in script.text and "https://" not in script.text
    assert client.get("/openapi.json").json()["paths"]["/search"]
    assert {m.__name__ for m in API_MODELS} >= {"SearchResponse", "DocumentList", "ErrorResponse"}


def test_healthz_says_when_the_model_is_the_random_test_model(
    client: TestClient, tiny_dir: Path, tmp_path: Path
) -> None:
    assert client.get("/healthz").json()["test_model"] is True
    # the same weights under other names and without the build's stamp: no longer known as the test model
    other = tmp_path / "model"
    other.mkdir()
    for gguf in tiny_dir.glob("*.gguf"):
        shutil.copy(gguf, other / gguf.name.replace("tiny-qwen25vl", "acme-embed"))
    with TestClient(create_app(index_settings(tmp_path / "data", other))) as c:
        health = c.get("/healthz").json()
        assert health["status"] == "ok" and health["test_model"] is False, health


@pytest.fixture(scope="module")
def keyed_client(tiny_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    s = index_settings(
        tmp_path_factory.mktemp("api-keyed"), tiny_dir, api_key="s3cret", max_upload_mb=1, sync_upload_mb=0
    )
    with TestClient(create_app(s)) as c:
        yield c


def test_api_key(keyed_client: TestClient, client: TestClient) -> None:
    c = keyed_client
    for method, url in (("GET", "/search?q=x"), ("POST", "/search"), ("GET", "/documents"), ("GET", "/docs")):
        assert c.request(method, url).status_code == 401, url
        assert c.request(method, url, headers={"X-API-Key": "wrong"}).status_code == 401
    assert c.get("/search?q=x", headers={"X-API-Key": "s3cret"}).status_code == 200
    assert c.get("/healthz").status_code == 200 and c.get("/").status_code == 200
    assert client.get("/documents").status_code == 200  # no key configured: open


def test_oversized_upload_is_413(keyed_client: TestClient) -> None:
    h = {"X-API-Key": "s3cret"}
    r = keyed_client.post("/documents", headers=h, files={"file": ("big.pdf", b"%PDF-" + b"0" * (2 << 20))})
    assert r.status_code == 413 and "bytes" in r.json()["detail"]
    # under the header limit (multipart slack) but over the upload limit: refused while streaming to disk
    r = keyed_client.post(
        "/documents", headers=h, files={"file": ("big.pdf", b"%PDF-" + b"0" * ((1 << 20) + 1000))}
    )
    assert r.status_code == 413
    uploads = keyed_client.app.state.index.uploads  # type: ignore[attr-defined]
    assert not [p for p in uploads.rglob("*") if p.is_file()]


def test_uploads_over_the_sync_size_go_to_a_job(keyed_client: TestClient) -> None:
    buf = io.BytesIO()
    page_image(100, 100, seed=2).save(buf, "PNG")
    h = {"X-API-Key": "s3cret"}
    r = keyed_client.post("/documents", headers=h, files={"file": ("small.png", buf.getvalue())})
    assert r.status_code == 202  # this server answers every upload over 0 MB with a job
    assert keyed_client.get(r.json()["status_url"]).status_code == 401  # jobs need the key too
    r = keyed_client.post(
        "/documents", headers=h, params={"wait": "true"}, files={"file": ("small.png", buf.getvalue())}
    )
    assert r.status_code == 200 and r.json()["name"] == "small.png"


# -- uploads: the page limit, the writer's queue, cancel, stop and crash -------------------------------


def _png(seed: int) -> bytes:
    buf = io.BytesIO()
    page_image(120, 160, seed=seed).save(buf, "PNG")
    return buf.getvalue()


def _stored_files(folder: Path) -> list[str]:
    """The files under ``folder`` (the uploads folder and its queue), by their path in it."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def _running(get: Any, job: dict[str, Any], page: int, timeout: float = 120) -> dict[str, Any]:
    """Poll a job (``get(url)`` answers its JSON) until it runs with at least ``page`` pages done."""
    deadline = time.monotonic() + timeout
    while not (job["status"] == "running" and job["page"] >= page):
        assert job["status"] in ("queued", "running"), job
        assert time.monotonic() < deadline, job
        time.sleep(0.05)
        job = get(job["status_url"])
    return job


def test_a_long_upload_goes_to_the_queue_and_jobs_can_be_cancelled(tmp_path: Path, tiny_dir: Path) -> None:
    long, other = make_text_pdf(tmp_path / "long.pdf", 200, lines=1), make_text_pdf(tmp_path / "b.pdf", 20)
    with TestClient(create_app(index_settings(tmp_path / "data", tiny_dir))) as c:
        uploads: Path = c.app.state.index.uploads  # type: ignore[attr-defined]
        # over DOCVEC_SYNC_UPLOAD_PAGES (10), however few its bytes: a job at once
        started = time.monotonic()
        r = c.post("/documents", files={"file": ("long.pdf", long.read_bytes())})
        assert r.status_code == 202 and time.monotonic() - started < 10, r.text
        running = _running(lambda url: c.get(url).json(), r.json(), page=2)
        assert running["page_count"] == 200
        queued = c.post("/documents", files={"file": ("b.pdf", other.read_bytes())}).json()
        # a small upload is not held behind them: answered at once, with a job
        started = time.monotonic()
        small = c.post("/documents", files={"file": ("small.png", _png(5))})
        assert small.status_code == 202 and time.monotonic() - started < 5, small.text

        r = c.delete(queued["status_url"])
        assert r.status_code == 200 and r.json()["status"] == "cancelled", r.text
        assert not [f for f in _stored_files(uploads) if queued["job_id"] in f]  # its file went with it
        r = c.delete(running["status_url"])  # stops at its next page, and what it wrote goes
        assert r.status_code == 200 and r.json()["status"] == "cancelled", r.text
        assert c.delete(running["status_url"]).status_code == 409  # nothing left to cancel
        assert c.get(running["status_url"]).json()["status"] == "cancelled"

        done = _finish(c, small.json())
        assert done["status"] == "done" and done["result"]["name"] == "small.png"
        listed = c.get("/documents").json()
        assert [(d["name"], d["state"], d["pages_indexed"]) for d in listed["documents"]] == [
            ("small.png", "complete", 1)
        ]
        sha = hashlib.sha256(_png(5)).hexdigest()
        assert _stored_files(uploads) == [f"{sha}.png"]  # nothing of the cancelled ones is kept
        assert c.app.state.index.count() == 1  # type: ignore[attr-defined]


def test_a_delete_beside_a_new_upload_of_the_same_bytes(tmp_path: Path, tiny_dir: Path) -> None:
    data = _png(9)
    with TestClient(create_app(index_settings(tmp_path / "data", tiny_dir))) as c:
        doc_id = c.post("/documents", params={"wait": "true"}, files={"file": ("a.png", data)}).json()[
            "doc_id"
        ]
        with ThreadPoolExecutor(2) as pool:
            for _ in range(10):
                deleted = pool.submit(c.delete, f"/documents/{doc_id}")
                again = pool.submit(
                    c.post, "/documents", params={"wait": "true"}, files={"file": ("a.png", data)}
                )
                assert deleted.result().status_code == 200
                up = again.result()
                # either order is a right one; a 422 (no document?) never is
                assert up.status_code == 200, up.text
                listed = c.get(f"/documents/{doc_id}").status_code == 200
                assert listed == (not up.json()["already_indexed"])  # indexed after the delete, or before it
                if listed:
                    assert c.get(f"/documents/{doc_id}/file").content == data  # its kept copy is whole
                else:
                    assert c.post(
                        "/documents", params={"wait": "true"}, files={"file": ("a.png", data)}
                    ).is_success


def test_an_upload_left_part_written_without_a_record_is_finished_at_start(
    tmp_path: Path, tiny_dir: Path
) -> None:
    settings = index_settings(tmp_path / "data", tiny_dir, max_pixels=MINIMAL)
    pdf = make_text_pdf(tmp_path / "old.pdf", 40, lines=1)

    def stop(page: int, count: int) -> None:
        if page >= 33:
            raise Interrupted(cancelled=False)

    # as a server of an older docvec left it: its pages part-written, its copy kept, no record of it
    with Index.open(settings) as ix:
        with pytest.raises(Interrupted):
            ix.add_upload(
                io.BytesIO(pdf.read_bytes()), name="old.pdf", tags=["team=ops"], limit=1 << 20, progress=stop
            )
        assert [d.state for d in ix.documents().documents] == ["writing"]
    with TestClient(create_app(settings)) as c:
        deadline = time.monotonic() + 60
        while (doc := c.get("/documents").json()["documents"][0])["state"] != "complete":
            assert time.monotonic() < deadline, doc
            time.sleep(0.1)
        assert (doc["name"], doc["pages_indexed"], doc["tags"]) == ("old.pdf", 40, {"team": "ops"})


def _upload_env(tmp_path: Path, tiny_dir: Path) -> dict[str, str]:
    """A server's environment: 2x2 tokens a page, so that a few hundred pages take seconds."""
    return {
        "DOCVEC_DATA_DIR": str(tmp_path / "data"),
        "DOCVEC_MODEL": str(tiny_dir),
        "DOCVEC_EMBED__MAX_PIXELS": str(MINIMAL),
        "DOCVEC_EMBED__THREADS": "2",
        "DOCVEC_RENDER__WORKERS": "1",
    }


def _get(server: Served, url: str) -> dict[str, Any]:
    r = httpx.get(server.url + url, timeout=30)
    assert r.status_code == 200, r.text
    return dict(r.json())


def _post(server: Served, name: str, data: bytes, timeout: float = 30) -> httpx.Response:
    return httpx.post(f"{server.url}/documents", files={"file": (name, data)}, timeout=timeout)


def _follow(server: Served, url: str, timeout: float = 180) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    job = _get(server, url)
    while job["status"] not in ("done", "failed", "cancelled"):
        assert time.monotonic() < deadline, job
        time.sleep(0.1)
        job = _get(server, url)
    return job


def test_a_stop_keeps_the_queue_and_the_next_start_resumes_it(tmp_path: Path, tiny_dir: Path) -> None:
    env, data = _upload_env(tmp_path, tiny_dir), tmp_path / "data"
    book = make_text_pdf(tmp_path / "book.pdf", 5000, lines=1)  # 1.8 MB: small in bytes
    long = make_text_pdf(tmp_path / "long.pdf", 600, lines=1)  # still running when the stop comes
    with served(env, tmp_path / "serve.log") as server:
        r = _post(server, "book.pdf", book.read_bytes(), timeout=60)
        assert r.status_code == 413, r.text
        assert "5000 pages" in r.json()["detail"] and "DOCVEC_MAX_UPLOAD_PAGES" in r.json()["detail"]
        assert _stored_files(data / "uploads") == []  # nothing of it kept

        r = _post(server, "long.pdf", long.read_bytes())
        assert r.status_code == 202, r.text
        job = _running(lambda url: _get(server, url), r.json(), page=40)
        small = _post(server, "small.png", _png(3), timeout=10)  # answered at once, not after the long one
        assert small.status_code == 202 and small.json()["status"] == "queued", small.text

        stopped = time.monotonic()
        server.process.send_signal(signal.SIGTERM)
        assert server.process.wait(timeout=30) == 0, server.tail()
        assert time.monotonic() - stopped < 15, server.tail()  # at the next page, not at the end
    saved = {
        j: json.loads((data / "jobs" / f"{j}.json").read_text())
        for j in (job["job_id"], small.json()["job_id"])
    }
    assert [s["status"] for s in saved.values()] == ["queued", "queued"]

    with served(env, tmp_path / "again.log") as server:
        done = _follow(server, job["status_url"])
        assert done["status"] == "done" and done["result"]["pages"] == 600, done
        assert _follow(server, small.json()["status_url"])["status"] == "done"
        listed = _get(server, "/documents")["documents"]
        assert sorted((d["name"], d["state"], d["pages_indexed"]) for d in listed) == [
            ("long.pdf", "complete", 600),
            ("small.png", "complete", 1),
        ]
    assert "resuming after page" in server.log.read_text()  # after its last pages written, not from page 1


def test_a_crash_mid_upload_is_listed_as_unfinished_and_resumed(tmp_path: Path, tiny_dir: Path) -> None:
    env = _upload_env(tmp_path, tiny_dir)
    long = make_text_pdf(tmp_path / "long.pdf", 300, lines=1)
    with served(env, tmp_path / "serve.log") as server:
        r = _post(server, "long.pdf", long.read_bytes())
        assert r.status_code == 202, r.text
        job = _running(lambda url: _get(server, url), r.json(), page=40)
        server.process.kill()  # SIGKILL: a crash, a power cut
        server.process.wait()
    listing = docvec("documents", "--json", env=env)
    assert listing.returncode == 0, listing.stderr
    (doc,) = json.loads(listing.stdout)
    # stored in part, searchable not at all: said so, not "300 of 300"
    assert (doc["state"], doc["pages_indexed"], doc["page_count"]) == ("writing", 0, 300)
    assert 32 <= doc["pages_written"] < 300
    with served(env, tmp_path / "again.log") as server:
        done = _follow(server, job["status_url"])  # its job is known after the restart, and resumed
        assert done["status"] == "done" and done["result"]["pages"] == 300, done
        (doc,) = _get(server, "/documents")["documents"]
        assert (doc["state"], doc["pages_indexed"], doc["pages_written"]) == ("complete", 300, 300)
        assert _get(server, "/healthz")["pages"] == 300
    assert "resuming after page" in server.log.read_text()


def test_a_moved_file_is_not_served_and_its_path_not_told(tmp_path: Path, tiny_dir: Path) -> None:
    with _serving_a_file_of_mine(tmp_path, tiny_dir) as (c, mine):
        url = f"/documents/{_doc_id(mine)}/file"
        assert c.get(url).content == mine.read_bytes()
        mine.rename(tmp_path / "elsewhere.png")
        r = c.get(url)
        assert r.status_code == 404 and str(tmp_path) not in r.text


def test_over_a_real_socket(tiny_dir: Path, tmp_path: Path) -> None:
    # serve_in_thread fails the test if the server does not stop
    with (
        serve_in_thread(index_settings(tmp_path / "data", tiny_dir)) as url,
        httpx.Client(base_url=url, timeout=30) as http,
    ):
        assert http.get("/healthz").json()["status"] == "ok"
        assert http.get("/search", params={"q": "anything"}).json()["hits"] == []
        assert http.post("/search", json={"query": ""}).status_code == 400
        assert http.get("/").text.startswith("<!doctype html>")


@pytest.mark.parametrize(
    ("error", "status", "detail"),
    [
        (
            StoreUnavailableError("qdrant at http://q:6333 is down", url="http://q:6333", attempts=3),
            503,
            "down",
        ),
        (InputError("cannot embed this"), 400, "cannot embed this"),
        (DocvecError("the page store is read-only"), 500, "read-only"),
        (RuntimeError("secret internals"), 500, "internal error"),
    ],
)
def test_errors_map_to_status_codes(
    client: TestClient, monkeypatch: pytest.MonkeyPatch, error: Exception, status: int, detail: str
) -> None:
    def failing(*args: object, **kwargs: object) -> None:
        raise error

    monkeypatch.setattr(client.app.state.index, "search", failing)  # type: ignore[attr-defined]
    quiet = TestClient(client.app, raise_server_exceptions=False)  # same app and lifespan state
    r = quiet.get("/search", params={"q": "x"})
    assert r.status_code == status
    assert r.json()["detail"] == detail or detail in r.json()["detail"]
    assert "Traceback" not in r.text and "secret" not in r.text


def test_healthz_503_when_the_store_fails(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    store = client.app.state.index._store  # type: ignore[attr-defined]

    def down(*args: object, **kwargs: object) -> int:
        raise StoreUnavailableError("qdrant unreachable", url="http://q", attempts=3)

    monkeypatch.setattr(store, "count", down)
    r = client.get("/healthz")
    assert (
        r.status_code == 503 and r.json()["status"] == "unavailable" and "unreachable" in r.json()["detail"]
    )


def test_operators_endpoints_answer_this_machine_or_the_key(
    client: TestClient, keyed_client: TestClient, docs: dict[str, Path]
) -> None:
    """They act on the server's files: with no key, only a client on the server's machine may use them."""
    elsewhere = client  # the test client's address is "testclient", not a loopback address
    for method, url, body in (
        ("POST", "/ingest", {"paths": [str(docs[TAGGED])]}),
        ("POST", "/reindex", {}),
        ("POST", "/gc", None),
        ("GET", "/collections", None),
        ("DELETE", "/collections/docvec.v9", None),
    ):
        r = elsewhere.request(method, url, json=body)
        assert r.status_code == 403 and "DOCVEC_OPERATOR_KEY" in r.json()["detail"], (url, r.text)
    # the same app (its lifespan runs in `client`), asked from this machine (no `with`: no second lifespan)
    local = TestClient(client.app, base_url="http://127.0.0.1", client=("127.0.0.1", 50000))
    r = local.get("/collections")
    assert r.status_code == 200 and [v["version"] for v in r.json()] == ["docvec.v1"]
    body = {"paths": [str(docs[TAGGED])], "tags": ["team=legal", "year=2024"]}
    # a program on this machine is an operator, whose paths lie under DOCVEC_INGEST_ROOTS (none here)...
    r = local.post("/ingest", json=body)
    assert r.status_code == 403 and "DOCVEC_INGEST_ROOTS" in r.json()["detail"], r.text
    # ...and the server's own user's commands (the token they read) may name any file it can read
    owner = {"X-API-Key": client.app.state.access.owner_token}  # type: ignore[attr-defined]
    job = local.post("/ingest", json=body, headers=owner)
    assert job.status_code == 202 and job.json()["kind"] == "ingest"
    done = _finish(TestClient(client.app, base_url="http://127.0.0.1", headers=owner), job.json())
    assert done["result"]["documents_skipped"] == 1  # already indexed: the same report `docvec ingest` gives
    assert local.post("/gc").json()["files_removed"] == 0
    h = {"X-API-Key": "s3cret"}
    assert keyed_client.get("/collections").status_code == 401
    # the reader's key is no operator's (the operator's key: test_api_access)
    assert keyed_client.get("/collections", headers=h).status_code == 403


def test_serve_names_the_model_it_loaded_from_the_collection(
    tmp_path: Path, tiny_dir: Path, documents: Path
) -> None:
    data = tmp_path / "data"
    with Index.open(index_settings(data, tiny_dir)) as ix:  # the collection is made with the tiny model...
        assert ix.add([shutil.copy(documents / "pysamples__smile.png", tmp_path / "smile.png")]).ok
    # ...and the server is told no model: it takes the collection's, and says which
    env = {"DOCVEC_DATA_DIR": str(data), "DOCVEC_EMBED__MAX_PIXELS": str(SMALL)}
    assert "DOCVEC_MODEL" not in os.environ
    with served(env, tmp_path / "serve.log") as server:
        health = httpx.get(f"{server.url}/healthz", timeout=30).json()
        banner = server.tail()
    assert health["model"] == tiny_dir.name, health  # open to anyone: the folder's name, not where it is
    assert f"model {tiny_dir} (" in banner and "jina-v4" not in banner, banner


# -- reranked searches: the server's word, the searches, the refusals, RemoteIndex -------------------------


QUERY = "a page with a table"


@contextmanager
def _serve(settings: Settings) -> Iterator[httpx.Client]:
    """The app for ``settings`` on a real socket (uvicorn in a thread), and a client of it."""
    with serve_in_thread(settings) as url, httpx.Client(base_url=url, timeout=120) as http:
        yield http


@pytest.fixture(scope="module")
def rerank_settings(
    docs: dict[str, Path], tiny_dir: Path, reranker_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Settings:
    data = tmp_path_factory.mktemp("rerank-api-data")
    return _indexed(index_settings(data, tiny_dir, rerank_model=str(reranker_dir)), docs)


@pytest.fixture(scope="module")
def http(rerank_settings: Settings) -> Iterator[httpx.Client]:
    """A server with the tiny reranker (DOCVEC_RERANK_MODEL), reranking nothing by default."""
    with _serve(rerank_settings) as client:
        yield client


@pytest.fixture(scope="module")
def plain(tiny_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    """A server without a reranker (nothing indexed: it refuses a reranked search before it looks)."""
    with _serve(index_settings(tmp_path_factory.mktemp("rerank-api-plain"), tiny_dir)) as client:
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


def test_a_rerank_that_is_not_a_number_is_400(http: httpx.Client) -> None:
    for value in (True, "10", 10.5):
        r = http.post("/search", json={"query": QUERY, "k": 2, "rerank": value})
        assert r.status_code == 400 and "rerank" in r.json()["detail"], (value, r.text)
    assert http.get("/search", params={"q": QUERY, "rerank": "many"}).status_code == 400


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
    settings = index_settings(tmp_path / "data", tiny_dir, rerank_model=str(reranker_dir), rerank=8)
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
    http: httpx.Client, plain: httpx.Client, rerank_settings: Settings, docs: dict[str, Path]
) -> None:
    settings = rerank_settings
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
