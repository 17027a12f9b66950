"""Where RAG applications live: the MCP server (a real client session over stdio), the LangChain and
LlamaIndex retrievers (against a local and a served index, LangChain's standard retriever tests), and the
pages handed to a vision-language model (docvec.rag)."""

from __future__ import annotations

import base64
import http.server
import io
import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import anyio
import httpx2
import pytest
from langchain_core.retrievers import BaseRetriever
from langchain_tests.integration_tests import RetrieversIntegrationTests
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from PIL import Image

from docvec import Index, IndexLike, InputError, RemoteIndex, Settings
from docvec.langchain import DocvecRetriever as LangChainRetriever
from docvec.llama_index import DocvecRetriever as LlamaIndexRetriever
from docvec.rag import rag_messages

from .helpers import ROOT, TINY, index_settings
from .processes import DOCVEC, serve_in_thread

QUERY = "total amount due"
DOCUMENTS = ("pysamples__pdflatex-4-pages.pdf", "pysamples__minimal-document.pdf", "pysamples__smile.png")


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory, documents: Path, tiny_dir: Path) -> Settings:
    """An index of six pages (a four-page PDF, a one-page PDF, an image), made once for the module."""
    folder = tmp_path_factory.mktemp("rag-docs")
    for name in DOCUMENTS:
        shutil.copy(documents / name, folder / name)
    s = index_settings(tmp_path_factory.mktemp("rag-data"), tiny_dir, max_pixels=TINY)
    with Index.open(s) as index:
        assert index.add([folder]).ok
    return s


@pytest.fixture(params=["local", "served"])
def index(request: pytest.FixtureRequest, settings: Settings) -> Iterator[IndexLike]:
    """The module's index opened here, and the same index served by the API and reached through it."""
    if request.param == "local":
        with Index.open(settings) as local:
            yield local
    else:
        with serve_in_thread(settings) as url, RemoteIndex(url, settings) as remote:
            yield remote


def _png(data: bytes) -> Image.Image:
    img = Image.open(io.BytesIO(data))
    assert img.format == "PNG"
    return img


# -- LangChain and LlamaIndex ---------------------------------------------------------------------------


def test_the_retrievers_give_the_searchs_pages_in_its_order_with_text_and_image(index: IndexLike) -> None:
    expected = index.search(QUERY, k=4, with_text=True)
    docs = LangChainRetriever(index=index, k=4).invoke(QUERY)
    assert [(d.metadata["doc_id"], d.metadata["page"]) for d in docs] == [
        (h.doc_id, h.page) for h in expected
    ]
    assert [d.page_content for d in docs] == [h.text or "" for h in expected]
    assert [d.metadata["score"] for d in docs] == [h.score for h in expected]
    first = docs[0].metadata
    assert first["name"] == expected[0].name and first["tags"] == expected[0].tags
    if isinstance(index, RemoteIndex):  # a URL the server answers with the page's image
        assert first["image"] == f"{index.url}/documents/{first['doc_id']}/pages/{first['page']}/image"
    else:
        assert Path(first["image"]) == index.page_file(first["doc_id"], first["page"])
    # on request, the image itself
    with_image = LangChainRetriever(index=index, k=1, image_base64=True).invoke(QUERY)[0]
    assert _png(base64.b64decode(with_image.metadata["image_base64"])).size[0] > 0

    nodes = LlamaIndexRetriever(index, k=4).retrieve(QUERY)
    assert [(n.node.metadata["doc_id"], n.node.metadata["page"]) for n in nodes] == [
        (h.doc_id, h.page) for h in expected
    ]
    assert [n.score for n in nodes] == [h.score for h in expected]
    assert [n.node.get_content() for n in nodes] == [h.text or "" for h in expected]
    node = nodes[0].node
    where = node.image_url if isinstance(index, RemoteIndex) else node.image_path  # type: ignore[attr-defined]
    assert where == first["image"] and node.image_mimetype == "image/png"  # type: ignore[attr-defined]


def test_the_retrievers_take_the_searchs_options_and_refuse_as_the_index_does(settings: Settings) -> None:
    with Index.open(settings) as index:
        # a call's options replace the retriever's
        assert len(LangChainRetriever(index=index, k=5).invoke(QUERY, k=2, mode="dense")) == 2
        named = LangChainRetriever(index=index).invoke(QUERY, filter={"source": "pysamples__smile.png"})
        assert [d.metadata["name"] for d in named] == ["pysamples__smile.png"]
        with pytest.raises(InputError, match="k must be between 1 and 100"):
            LangChainRetriever(index=index, k=500).invoke(QUERY)
        with pytest.raises(InputError, match="k must be between 1 and 100"):
            LlamaIndexRetriever(index, k=0)
        assert len(LlamaIndexRetriever(index, k=2, mode="dense").retrieve(QUERY)) == 2


class TestLangChainStandard(RetrieversIntegrationTests):
    """LangChain's own tests of a retriever (langchain-tests), on a local index."""

    @pytest.fixture(autouse=True)
    def _index(self, settings: Settings) -> Iterator[None]:
        with Index.open(settings) as index:
            type(self).opened = index
            yield

    @property
    def retriever_constructor(self) -> type[BaseRetriever]:
        return LangChainRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"index": type(self).opened}

    @property
    def retriever_query_example(self) -> str:
        return QUERY


# -- pages to a vision-language model ---------------------------------------------------------------------


def test_rag_messages_hold_each_page_image_citation_and_text_then_the_question(index: IndexLike) -> None:
    hits = index.search(QUERY, k=3)
    messages = rag_messages("What is the total amount due?", hits, index, max_side=200)
    assert [m["role"] for m in messages] == ["system", "user"]
    content = messages[1]["content"]
    assert content[-1] == {"type": "text", "text": "Question: What is the total amount due?"}
    citations = [c["text"] for c in content if c["type"] == "text" and c["text"].startswith("[")]
    assert citations == [f"[{n}] {h.name}, page {h.page}" for n, h in enumerate(hits, start=1)]
    images = [c["image_url"]["url"] for c in content if c["type"] == "image_url"]
    assert len(images) == 3
    for url in images:
        head, data = url.split(",", 1)
        assert head == "data:image/png;base64" and max(_png(base64.b64decode(data)).size) <= 200
    texts = [c["text"] for c in content if c["type"] == "text" and c["text"].startswith("Text of [")]
    for n, h in enumerate(hits, start=1):
        page_text = index.page_text(h.doc_id, h.page).text
        assert (f"Text of [{n}]:\n{page_text}" in texts) == bool(page_text)
    # what a model server accepts: plain JSON
    assert json.loads(json.dumps(messages)) == messages
    with pytest.raises(InputError, match="max_side"):
        rag_messages("why?", hits, index, max_side=10)
    bare = rag_messages("why?", hits[:1], index, with_text=False, system=None)
    assert [m["role"] for m in bare] == ["user"] and not any(
        c["type"] == "text" and c["text"].startswith("Text of") for c in bare[0]["content"]
    )


# -- MCP --------------------------------------------------------------------------------------------------


def _mcp_command(settings: Settings, **env: str) -> StdioServerParameters:
    """`docvec mcp` on the index of ``settings``, with ``env`` (more DOCVEC_* settings) on top."""
    return StdioServerParameters(
        command=DOCVEC,
        args=["mcp"],
        env={
            **os.environ,
            "DOCVEC_DATA_DIR": str(settings.data_dir),
            "DOCVEC_MODEL": settings.model,
            "DOCVEC_EMBED__MAX_PIXELS": str(TINY),
            **env,
        },
    )


async def _session(settings: Settings) -> Any:
    params = _mcp_command(settings)
    found: dict[str, Any] = {}
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        found["tools"] = {t.name: t for t in (await session.list_tools()).tools}
        found["search"] = await session.call_tool("search", {"query": QUERY, "k": 2, "with_text": True})
        hit = json.loads(found["search"].content[0].text)["hits"][0]
        found["page"] = await session.call_tool("get_page", {"doc_id": hit["doc_id"], "page": hit["page"]})
        found["resource"] = await session.read_resource(hit["image"])
        found["listed"] = await session.call_tool("list_documents", {})
        found["bad_k"] = await session.call_tool("search", {"query": QUERY, "k": 500})
        found["unknown"] = await session.call_tool("get_page", {"doc_id": "0" * 32, "page": 1})
        found["path"] = await session.call_tool("search", {"query": QUERY, "source": "/etc/passwd"})
    return found


def test_an_agent_searches_reads_a_page_and_is_told_what_is_wrong_over_mcp(settings: Settings) -> None:
    found = anyio.run(_session, settings)
    tools = found["tools"]
    assert sorted(tools) == ["get_page", "list_documents", "search"]
    assert (
        tools["search"].input_schema["required"] == ["query"]
        and "k" in tools["search"].input_schema["properties"]
    )
    assert all(t.description and len(t.description) > 60 for t in tools.values())
    assert all(t.annotations and t.annotations.read_only_hint for t in tools.values())

    with Index.open(settings) as index:
        expected = index.search(QUERY, k=2, with_text=True)
        head = json.loads(found["search"].content[0].text)
        assert [(h["doc_id"], h["page"]) for h in head["hits"]] == [(h.doc_id, h.page) for h in expected]
        assert [h["text"] for h in head["hits"]] == [h.text for h in expected]
        assert head["hits"][0]["cite"] == f"[1] {expected[0].name}, page {expected[0].page}"
        # each page: its citation, then its image, scaled to the search's bound
        kinds = [c.type for c in found["search"].content]
        assert kinds == ["text", "text", "image", "text", "image"]
        image = found["search"].content[2]
        assert max(_png(base64.b64decode(image.data)).size) <= 768 and image.mime_type == "image/png"

        page = found["page"]
        assert not page.is_error
        told = json.loads(page.content[0].text)
        first = expected[0]
        assert told["text"] == index.page_text(first.doc_id, first.page).text
        whole = _png(base64.b64decode(page.content[1].data))
        assert whole.size == Image.open(index.page_file(first.doc_id, first.page)).size
        blob = found["resource"].contents[0]
        assert blob.mime_type == "image/png" and base64.b64decode(blob.blob) == base64.b64decode(
            page.content[1].data
        )
        listed = json.loads(found["listed"].content[0].text)
        assert listed["total"] == 3 and {d["name"] for d in listed["documents"]} == set(DOCUMENTS)

    # errors are docvec's, as every face gives them, and the agent reads them
    assert (
        found["bad_k"].is_error
        and "InputError: k must be between 1 and 100" in found["bad_k"].content[0].text
    )
    assert found["unknown"].is_error and "NotFoundError" in found["unknown"].content[0].text
    # a path outside what is indexed finds nothing and reads nothing
    outside = found["path"]
    assert not outside.is_error and json.loads(outside.content[0].text)["hits"] == []


# -- docs/rag.md's script, as a user runs it ---------------------------------------------------------------


class _ChatServer(http.server.BaseHTTPRequestHandler):
    """An OpenAI-compatible chat endpoint that keeps what it was sent and answers one fixed line."""

    received: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).received.append({"path": self.path, "body": body})
        answer = json.dumps({"choices": [{"message": {"role": "assistant", "content": "1,530.00 EUR [1]"}}]})
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(answer.encode())

    def log_message(self, *args: object) -> None:
        pass


def test_the_rag_example_runs_as_a_plain_script(settings: Settings, tmp_path: Path) -> None:
    text = (ROOT / "docs" / "rag.md").read_text()
    script = text.split("<!-- rag-example -->\n```python\n", 1)[1].split("```", 1)[0]
    (tmp_path / "ask.py").write_text(script)
    env = {
        **os.environ,
        "DOCVEC_DATA_DIR": str(settings.data_dir),
        "DOCVEC_MODEL": settings.model,
        "DOCVEC_EMBED__MAX_PIXELS": str(TINY),
    }
    env.pop("OPENAI_BASE_URL", None)
    ran = subprocess.run(
        [sys.executable, "ask.py", "What is the total amount due?"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    lines = ran.stdout.splitlines()
    assert [ln.split("]")[0] for ln in lines[:3]] == ["[1", "[2", "[3"] and "parts ready" in lines[3]
    # and the model call, against an endpoint of the OpenAI shape
    server = http.server.HTTPServer(("127.0.0.1", 0), _ChatServer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}/v1"
        asked = subprocess.run(
            [sys.executable, "ask.py"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
            env={**env, "OPENAI_BASE_URL": base, "VLM_MODEL": "qwen2.5-vl"},
        )
    finally:
        server.shutdown()
    assert asked.returncode == 0, asked.stderr[-2000:]
    assert asked.stdout.splitlines()[-1] == "1,530.00 EUR [1]"
    sent = _ChatServer.received[-1]
    assert sent["path"] == "/v1/chat/completions" and sent["body"]["model"] == "qwen2.5-vl"
    parts = sent["body"]["messages"][-1]["content"]
    assert sum(p["type"] == "image_url" for p in parts) == 3


async def _http_session(url: str, key: str | None) -> dict[str, Any]:
    headers = {"x-api-key": key} if key else {}
    found: dict[str, Any] = {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=120) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        found["tools"] = sorted(t.name for t in (await session.list_tools()).tools)
        found["search"] = await session.call_tool("search", {"query": QUERY, "k": 1})
        found["bad"] = await session.call_tool("get_page", {"doc_id": "xyz", "page": 1})
    return found


def test_the_server_answers_mcp_over_http_with_its_readers_key(settings: Settings) -> None:
    keyed = settings.model_copy(update={"api_key": "reader-key"})
    with serve_in_thread(keyed) as url:
        found = anyio.run(_http_session, f"{url}mcp", "reader-key")
        refused = httpx2.post(
            f"{url}mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}},
            headers={"accept": "application/json, text/event-stream"},
        )
    assert found["tools"] == ["get_page", "list_documents", "search"]
    head = json.loads(found["search"].content[0].text)
    assert len(head["hits"]) == 1 and head["hits"][0]["cite"].startswith("[1] ")
    assert [c.type for c in found["search"].content] == ["text", "text", "image"]
    assert found["bad"].is_error and "NotFoundError: no document xyz" in found["bad"].content[0].text
    assert refused.status_code == 401  # no key: the same refusal as every route's


async def _adding(settings: Settings, root: Path, outside: Path) -> dict[str, Any]:
    params = _mcp_command(settings, DOCVEC_MCP_ADD="true", DOCVEC_INGEST_ROOTS=str(root))
    found: dict[str, Any] = {}
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        found["tools"] = {t.name: t for t in (await session.list_tools()).tools}
        found["added"] = await session.call_tool("add", {"paths": [str(root)], "tags": {"via": "agent"}})
        found["outside"] = await session.call_tool("add", {"paths": [str(outside)]})
        found["missing"] = await session.call_tool("add", {"paths": [str(outside.parent / "nope.pdf")]})
        found["climbing"] = await session.call_tool("add", {"paths": [f"{root}/../{outside.name}"]})
    return found


def test_an_agent_adds_files_only_where_the_operator_allows(
    tmp_path: Path, documents: Path, tiny_dir: Path
) -> None:
    settings = index_settings(tmp_path / "data", tiny_dir, max_pixels=TINY)
    root = tmp_path / "inbox"
    root.mkdir()
    shutil.copy(documents / "pysamples__smile.png", root / "smile.png")
    outside = shutil.copy(documents / "pysamples__minimal-document.pdf", tmp_path / "private.pdf")
    found = anyio.run(_adding, settings, root, Path(outside))
    add = found["tools"]["add"]
    assert str(root) in (add.description or "") and not add.annotations.read_only_hint
    added = found["added"]
    assert not added.is_error, added.content
    assert json.loads(added.content[0].text)["documents_indexed"] == 1
    with Index.open(settings) as index:
        listed = index.documents().documents
        assert [(d.name, d.tags) for d in listed] == [("smile.png", {"via": "agent"})]
    # outside the folders, existing or not, climbing out or not: one refusal, nothing read
    refusals = [found[k] for k in ("outside", "missing", "climbing")]
    assert all(r.is_error and "ForbiddenError" in r.content[0].text for r in refusals)
    assert "not under a folder agents may add from" in refusals[1].content[0].text
