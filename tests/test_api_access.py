"""Who may do what over the API (docs/api.md, "Who may do what"): the reader's and the operator's keys, the
folders an operator's ingest may read, the server's own user, this machine's programs and what is not
this machine, browsers' cross-site requests, the search page's session, the paths a reader is shown, and
files served by the type their bytes have. The real app on the tiny model; the same checks in a real
browser are in test_web.py."""

from __future__ import annotations

import io
import json
import os
import shutil
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from PIL import PngImagePlugin

from docvec import Index, connect
from docvec._store._owner import read_owner
from docvec.api import create_app

from .helpers import SMALL, docvec_env, index_settings, page_image
from .processes import docvec, served

READER = "reader-key-1"
OPERATOR = "operator-key-2"
HERE = "http://127.0.0.1:8000"  # how a program on the server's machine names it
AFAR = ("203.0.113.9", 40000)  # a client on another machine


def _png(seed: int, *, text: str | None = None) -> bytes:
    info = PngImagePlugin.PngInfo()
    if text is not None:
        info.add_text("Comment", text)
    buf = io.BytesIO()
    page_image(120, 160, seed=seed).save(buf, "PNG", pnginfo=info)
    return buf.getvalue()


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A folder the operator lists (papers/, with a sub-folder and a link out of it), and files beside it
    it does not list."""
    base = tmp_path_factory.mktemp("access-tree")
    papers, private = base / "srv" / "papers", base / "private"
    (papers / "2024").mkdir(parents=True)
    private.mkdir()
    (papers / "2024" / "report.png").write_bytes(_png(1))
    (papers / "later.png").write_bytes(_png(2))
    (private / "secret.png").write_bytes(_png(3))
    (papers / "escape.png").symlink_to(private / "secret.png")
    return {"base": base, "papers": papers, "private": private}


@pytest.fixture(scope="module")
def keyed(
    tiny_dir: Path, tree: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TestClient]:
    """A server with a reader's key, an operator's key and one ingest root; indexed: one document under
    the root, one outside it (ingested on the server's machine by its user)."""
    s = index_settings(
        tmp_path_factory.mktemp("access-keyed"),
        tiny_dir,
        api_key=READER,
        operator_key=OPERATOR,
        ingest_roots=[tree["papers"]],
    )
    with Index.open(s) as ix:
        assert ix.add([tree["papers"] / "2024" / "report.png", tree["private"] / "secret.png"]).ok
    with TestClient(create_app(s), base_url=HERE, client=AFAR) as c:
        yield c


def _as(c: TestClient, key: str | None = None, **headers: str) -> dict[str, str]:
    return {**({"X-API-Key": key} if key else {}), **headers}


def _finish(c: TestClient, job: dict[str, Any], key: str) -> dict[str, Any]:
    deadline = time.monotonic() + 120
    while job["status"] not in ("done", "failed"):
        assert time.monotonic() < deadline, job
        time.sleep(0.1)
        job = c.get(job["status_url"], headers=_as(c, key)).json()
    return job


# -- the reader's key and the operator's ------------------------------------------------------------------

OPERATORS = [
    ("POST", "/ingest", {"paths": []}),
    ("POST", "/reindex", {}),
    ("POST", "/gc", None),
    ("GET", "/collections", None),
    ("DELETE", "/collections/docvec.v9", None),
    ("DELETE", "/documents?target=/etc/passwd&by=path", None),
]


def test_a_readers_key_reads_and_uploads_but_is_no_operator(keyed: TestClient) -> None:
    c = keyed
    assert c.get("/search", params={"q": "x"}).status_code == 401  # no key
    assert c.get("/search", params={"q": "x"}, headers=_as(c, READER)).status_code == 200
    listed = c.get("/documents", headers=_as(c, READER)).json()
    assert listed["total"] == 2
    doc_id = listed["documents"][0]["doc_id"]
    assert c.get(f"/documents/{doc_id}/pages/1/image", headers=_as(c, READER)).status_code == 200
    up = c.post(
        "/documents", headers=_as(c, READER), files={"file": ("mine.png", _png(9))}, params={"wait": "true"}
    )
    assert up.status_code == 200, up.text
    assert c.get(f"/documents/{doc_id}/pages", headers=_as(c, READER)).status_code == 403  # stored payloads
    for method, url, body in OPERATORS:
        r = c.request(method, url, json=body, headers=_as(c, READER))
        assert r.status_code == 403, (url, r.text)
        assert r.json()["error"] == "ForbiddenError" and "DOCVEC_OPERATOR_KEY" in r.json()["detail"]


def test_the_operators_key_does_the_operators_work_and_reads_too(keyed: TestClient) -> None:
    c = keyed
    assert c.get("/collections", headers=_as(c, OPERATOR)).status_code == 200
    assert c.post("/gc", headers=_as(c, OPERATOR)).status_code == 200
    assert c.get("/search", params={"q": "x"}, headers=_as(c, OPERATOR)).status_code == 200
    assert c.get("/collections", headers=_as(c, "wrong")).status_code == 401


def test_remote_ingest_reads_only_the_listed_folders_with_one_answer_for_any_path(
    keyed: TestClient, tree: dict[str, Path]
) -> None:
    c = keyed
    secret, missing = tree["private"] / "secret.png", tree["private"] / "no-such.png"
    answers = []
    for path in (secret, missing, tree["papers"] / ".." / ".." / "private" / "secret.png", "/etc/*"):
        r = c.post("/ingest", json={"paths": [str(path)]}, headers=_as(c, OPERATOR))
        assert r.status_code == 403 and "DOCVEC_INGEST_ROOTS" in r.json()["detail"], r.text
        answers.append(r.json()["detail"].replace(str(path), "PATH"))
    # the same words whether the file is there or not: the answer tells nothing of the server's files
    assert answers[0] == answers[1]
    # inside the folder: indexed; a link in it to a file outside is a failure of its own, not read
    r = c.post("/ingest", json={"paths": [str(tree["papers"])]}, headers=_as(c, OPERATOR))
    assert r.status_code == 202, r.text
    report = _finish(c, r.json(), OPERATOR)["result"]
    assert (report["documents_indexed"], report["documents_skipped"]) == (1, 1), report
    assert [f["reason"] for f in report["failures"]] == [
        "a link to a file outside the folders this server ingests from"
    ]


def test_a_reindex_over_the_api_names_a_registry_model_not_a_path(keyed: TestClient, tiny_dir: Path) -> None:
    c = keyed
    details = set()
    for model in (str(tiny_dir), "/no/such/model", "/etc/passwd"):
        r = c.post("/reindex", json={"model": model}, headers=_as(c, OPERATOR))
        assert r.status_code == 403, r.text
        details.add(r.json()["detail"].replace(model, "M"))
    assert len(details) == 1  # an existing folder, a missing one and a file: one answer


def test_readers_see_paths_under_the_ingest_roots_and_names_elsewhere(
    keyed: TestClient, tree: dict[str, Path]
) -> None:
    c = keyed
    sources = {
        d["name"]: d["source"] for d in c.get("/documents", headers=_as(c, READER)).json()["documents"]
    }
    assert sources["report.png"] == "papers/2024/report.png" and sources["secret.png"] == "secret.png"
    hits = c.get("/search", params={"q": "x", "k": 10}, headers=_as(c, READER)).json()["hits"]
    assert {h["source"] for h in hits} >= {"papers/2024/report.png", "secret.png"}
    assert all(str(tree["base"]) not in json.dumps(h) for h in hits)
    # a reader filters by source in the same terms; the server's own paths name nothing for a reader
    r = c.get("/search", params={"q": "x", "source": "papers/2024"}, headers=_as(c, READER))
    assert r.status_code == 200 and [h["name"] for h in r.json()["hits"]] == ["report.png"]
    r = c.get("/search", params={"q": "x", "source": str(tree["private"])}, headers=_as(c, READER))
    assert r.status_code == 400 and "as this server shows paths" in r.json()["detail"]
    # the operator sees where the server read them
    operator = c.get("/documents", headers=_as(c, OPERATOR)).json()["documents"]
    assert {d["source"] for d in operator} >= {str(tree["private"] / "secret.png")}
    health = c.get("/healthz").json()  # open to anyone: the model by its folder's name only
    assert "/" not in health["model"], health


def test_an_api_key_is_printable_ascii_or_the_server_does_not_start(tmp_path: Path, tiny_dir: Path) -> None:
    env = {**docvec_env(tmp_path / "data", tiny_dir, max_pixels=SMALL), "DOCVEC_API_KEY": "schlüssel"}
    r = docvec("serve", "--port", "0", env=env, timeout=60)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.strip().splitlines() == [
        "error: DOCVEC_API_KEY: a key must be printable ASCII without spaces (letters, digits, punctuation): "
        "it is sent in an HTTP header"
    ]
    assert "schlüssel" not in r.stderr  # a refused key is not printed


# -- this machine, and what only looks like it --------------------------------------------------------------


@pytest.fixture(scope="module")
def open_app(tiny_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """A server with no key at all (the default), on the tiny model; its client is on another machine."""
    s = index_settings(tmp_path_factory.mktemp("access-open"), tiny_dir)
    with TestClient(create_app(s), base_url=HERE, client=AFAR) as c:
        yield c


def _from(c: TestClient, client: tuple[str, int], base_url: str = HERE) -> TestClient:
    return TestClient(c.app, base_url=base_url, client=client)  # the same app and lifespan


def test_without_keys_the_operators_work_is_this_machines_programs_only(open_app: TestClient) -> None:
    assert open_app.get("/collections").status_code == 403  # another machine
    local = _from(open_app, ("127.0.0.1", 50000))
    assert local.get("/collections").status_code == 200
    assert local.post("/gc").status_code == 200
    # a browser on this machine is no program of it: a page's script may not act on the server's files
    for browser in ({"Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "cors"}, {"Origin": HERE}):
        r = local.post("/gc", headers=browser)
        assert r.status_code == 403 and "operator" in r.json()["detail"], r.text
    # a page that rebinds its own name to 127.0.0.1 reaches the server from this machine, by that name
    rebound = _from(open_app, ("127.0.0.1", 50000), "http://docvec.attacker.example:8000")
    for url in ("/collections", "/documents", "/search?q=x"):
        r = rebound.get(url)
        assert r.status_code == 403 and "DOCVEC_ALLOWED_HOSTS" in r.json()["detail"], (url, r.text)


def test_forwarded_for_is_a_trusted_proxys_word_only(tiny_dir: Path, tmp_path: Path) -> None:
    s = index_settings(tmp_path / "data", tiny_dir)
    with TestClient(create_app(s), base_url=HERE, client=AFAR) as c:
        # from afar, claiming to be this machine: not believed
        assert c.post("/gc", headers={"X-Forwarded-For": "127.0.0.1"}).status_code == 403
    # a proxy on this machine, named: the client is whom it names, and a request that names none came
    # through it from who knows where
    s = index_settings(tmp_path / "data2", tiny_dir, trusted_proxies=["127.0.0.1"])
    with TestClient(create_app(s), base_url=HERE, client=("127.0.0.1", 40000)) as c:
        assert c.post("/gc", headers={"X-Forwarded-For": "198.51.100.7"}).status_code == 403
        assert c.post("/gc").status_code == 403
        # nor is a client the proxy calls 127.0.0.1 (itself, or any page of this machine's): behind a proxy
        # on this machine, its programs are the owner's commands (their token) or send the operator's key
        assert c.post("/gc", headers={"X-Forwarded-For": "127.0.0.1"}).status_code == 403


def test_docvec_serve_ignores_forwarded_for_from_untrusted_clients(tmp_path: Path, tiny_dir: Path) -> None:
    # uvicorn's own default believes X-Forwarded-For from 127.0.0.1: docvec serve names the proxies itself
    env = docvec_env(tmp_path / "data", tiny_dir, max_pixels=SMALL)
    with served(env, tmp_path / "serve.log") as server:
        r = httpx.post(f"{server.url}/gc", headers={"X-Forwarded-For": "198.51.100.7"}, timeout=60)
    assert r.status_code == 200, r.text


# -- browsers: cross-site requests and the page's session -------------------------------------------------


def test_a_browser_may_change_things_from_the_servers_own_page_only(open_app: TestClient) -> None:
    c = open_app
    files = {"file": ("x.png", _png(21))}
    for foreign in ({"Origin": "http://evil.example"}, {"Sec-Fetch-Site": "cross-site"}):
        r = c.post("/documents", files=files, headers=foreign, params={"wait": "true"})
        assert r.status_code == 403 and r.json()["error"] == "ForbiddenError", r.text
    # another port of this machine is another origin (a page another local server serves)
    r = c.post("/documents", files=files, headers={"Origin": "http://127.0.0.1:9999"})
    assert r.status_code == 403
    assert c.get("/documents").json()["total"] == 0  # nothing was kept
    r = c.post(
        "/documents",
        files=files,
        headers={"Origin": HERE, "Sec-Fetch-Site": "same-origin"},
        params={"wait": "true"},
    )
    assert r.status_code == 200, r.text


def test_the_pages_session_is_a_readers_right_in_a_cookie_no_script_reads(keyed: TestClient) -> None:
    c = TestClient(keyed.app, base_url=HERE, client=AFAR)
    assert c.get("/session").json() == {"key_required": True, "reader": False}
    assert c.post("/session", json={"key": "wrong"}).status_code == 403
    r = c.post("/session", json={"key": READER})
    assert r.status_code == 204
    cookie = r.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=strict" in cookie and READER not in cookie
    assert c.get("/session").json() == {"key_required": True, "reader": True}
    assert c.get("/documents").status_code == 200  # the cookie alone
    # typed into the page, the operator's key too gives a reader's session, and a session is no operator
    c2 = TestClient(keyed.app, base_url=HERE, client=("127.0.0.1", 50001))
    assert c2.post("/session", json={"key": OPERATOR}).status_code == 204
    assert c2.get("/collections").status_code == 403
    # a session sent by another site's page is refused, even to read
    assert c.get("/documents", headers={"Sec-Fetch-Site": "cross-site"}).status_code == 403
    assert c.delete("/session").status_code == 204
    assert c.get("/documents").status_code == 401


def test_the_page_and_every_answer_carry_their_policies(open_app: TestClient) -> None:
    page = open_app.get("/")
    policy = page.headers["content-security-policy"]
    assert (
        "script-src 'self'" in policy and "unsafe-inline" not in policy and "frame-ancestors 'none'" in policy
    )
    assert "<script src=" in page.text and "<script>" not in page.text and "<style>" not in page.text
    for url in ("/", "/app.js", "/healthz", "/documents", "/nowhere"):
        r = open_app.get(url)
        assert r.headers["x-content-type-options"] == "nosniff", url
        assert r.headers["x-frame-options"] == "DENY", url
    assert "sandbox" in open_app.get("/documents").headers["content-security-policy"]


# -- a stored file, by the type its bytes have ---------------------------------------------------------------


def test_a_stored_file_is_served_by_its_verified_type(open_app: TestClient, documents: Path) -> None:
    c = open_app
    html = "<html><script>document.title='ran'</script></html>"
    up = c.post(
        "/documents", files={"file": ("x.html", _png(31, text=html), "text/html")}, params={"wait": "true"}
    )
    assert up.status_code == 200, up.text
    r = c.get(f"/documents/{up.json()['doc_id']}/file")
    assert r.status_code == 200 and r.headers["content-type"] == "image/png"
    assert r.headers["x-content-type-options"] == "nosniff"
    assert (
        r.headers["content-disposition"].startswith("inline")
        and 'x.html.png"' in r.headers["content-disposition"]
    )
    assert c.head(f"/documents/{up.json()['doc_id']}/file").status_code == 200
    pdf = c.post(
        "/documents",
        files={"file": ("minutes.txt", (documents / "pysamples__minimal-document.pdf").read_bytes())},
        params={"wait": "true"},
    )
    r = c.get(f"/documents/{pdf.json()['doc_id']}/file")
    assert (
        r.headers["content-type"] == "application/pdf"
        and 'minutes.txt.pdf"' in r.headers["content-disposition"]
    )


# -- the server's own user --------------------------------------------------------------------------------


def test_the_servers_own_commands_are_its_owner_through_a_token_only_they_read(
    tmp_path: Path, tiny_dir: Path, tree: dict[str, Path]
) -> None:
    data = tmp_path / "data"
    env = docvec_env(data, tiny_dir, max_pixels=SMALL)
    env["DOCVEC_API_KEY"] = READER
    mine = tmp_path / "mine.png"
    mine.write_bytes(_png(41))
    with served(env, tmp_path / "serve.log") as server:
        record = data / "qdrant" / ".owner.json"
        assert stat.S_IMODE(record.stat().st_mode) == 0o600  # the token's file: this user's eyes only
        token = json.loads(record.read_text())["token"]
        # the reader's key from this machine names no file outside the (empty) ingest roots
        r = httpx.post(f"{server.url}/ingest", json={"paths": [str(mine)]}, headers={"X-API-Key": READER})
        assert r.status_code == 403, r.text
        # `docvec ingest` of this user goes through the server as its owner: any file it can read
        r = docvec("ingest", str(mine), "--json", env=env)
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["documents_indexed"] == 1
        old = {k: v for k, v in os.environ.items() if k.startswith("DOCVEC_")}
        try:
            os.environ.update(env)
            with connect() as index:  # the library's front door, as this user: the same
                assert type(index).__name__ == "RemoteIndex"
                assert index.documents().total == 1
        finally:
            for k in env:
                os.environ.pop(k, None)
            os.environ.update(old)
        # what errors and logs tell of the store's owner leaves the token out
        assert read_owner(data / "qdrant") is not None and token not in json.dumps(
            read_owner(data / "qdrant")
        )
        assert httpx.get(f"{server.url}/collections", headers={"X-API-Key": token}).status_code == 200
    shutil.rmtree(data, ignore_errors=True)
