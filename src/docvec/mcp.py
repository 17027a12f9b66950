"""docvec for agents: a Model Context Protocol server over an open index, built on the official ``mcp``
SDK (``pip install 'docvec[mcp]'``; ``docvec mcp`` runs it over stdio).

Tools, each with a JSON schema and a description an agent can act on:

- ``search``: the pages that best match a query (``k``, a filter, ``mode``, ``rerank``, ``with_text``),
  each with its citation, document id, name, page, score and snippet, and its page image (scaled to
  ``max_side`` pixels);
- ``get_page``: one page's image at full size and its text;
- ``list_documents``: what is indexed, by name;
- ``add``, only where the operator allows it (``DOCVEC_MCP_ADD``): index files from the folders
  ``DOCVEC_INGEST_ROOTS`` names, and no others.

Page images are resources too, at ``docvec://documents/{doc_id}/pages/{page}/image``. A bad argument is a
tool error with docvec's own message (the class name first), as every other face gives it; the server reads
nothing but the index (its page images and texts), never a path an agent names.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp_types import ImageContent, TextContent, ToolAnnotations

from ._contract import IndexLike
from ._errors import ConflictError, DocvecError
from ._pipeline._sources import within_roots
from ._records import PageText, Search
from .rag import citation, page_image

__all__ = ["IMAGE_URI", "create_server"]

#: a page image's resource URI
IMAGE_URI = "docvec://documents/{doc_id}/pages/{page}/image"
#: the longer side of the page images a search returns, unless the agent asks otherwise: legible headings
#: and tables at a fraction of a full page's tokens (get_page gives the page whole)
SEARCH_MAX_SIDE = 768

_INSTRUCTIONS = (
    "docvec finds the pages of indexed documents (PDFs, scans, images) that answer a question, by their "
    "look and their text. Call search with the question in words; each hit is a page, with its image and a "
    "citation like [1] invoice.pdf, page 2. Call get_page for a page's full-size image and whole text, "
    "list_documents to see what is indexed. Cite pages by document name and page number."
)
_READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)


def _tool_error(e: DocvecError) -> ToolError:
    """docvec's error as the agent reads it: its class and message (what a caller may correct)."""
    return ToolError(f"{type(e).__name__}: {e}")


def create_server(index: IndexLike | Callable[[], IndexLike], *, add_roots: Sequence[Path] = ()) -> MCPServer:
    """The MCP server of ``index`` (local or served: :func:`docvec.connect`'s; or a function that gives
    the index at each call, for a server whose index opens after the routes are made), ready to run on
    any of the SDK's transports. With ``add_roots`` (the operator's choice: ``DOCVEC_MCP_ADD`` and
    ``DOCVEC_INGEST_ROOTS``), it offers the tool ``add`` too, for files under those folders only."""
    server: MCPServer = MCPServer(name="docvec", instructions=_INSTRUCTIONS)
    the_index = index if callable(index) else lambda: index

    @server.tool(
        description=(
            "Find the document pages that best match a query, best first. Returns, for each page, its "
            "citation, document id, name, page number, score (higher is closer, within this search only), "
            "a snippet of its text around the query's words and, with with_text, its whole text; then each "
            "page's image. Filters: doc_id (one document), source (a document's name, or a folder's path), "
            "tags (every key=value must hold)."
        ),
        annotations=_READ_ONLY,
        structured_output=False,
    )
    def search(
        query: str,
        k: int = 5,
        doc_id: str | None = None,
        source: str | None = None,
        tags: dict[str, str] | None = None,
        mode: str | None = None,
        rerank: int | None = None,
        with_text: bool = False,
        images: bool = True,
        max_side: int = SEARCH_MAX_SIDE,
    ) -> list[TextContent | ImageContent]:
        try:
            ix = the_index()
            wanted = {"doc_id": doc_id, "source": source, "tags": tags}
            flt = {key: value for key, value in wanted.items() if value} or None
            # checked by docvec's rules, which name what is wrong as every face does
            search = Search.of(query, k=k, filter=flt, mode=mode, rerank=rerank, with_text=with_text)
            result = ix.search(search)
            hits = [
                {
                    "cite": citation(n, h),
                    "doc_id": h.doc_id,
                    "name": h.name,
                    "page": h.page,
                    "score": round(h.score, 6),  # float32's digits past these are noise
                    **({"rerank_score": round(h.rerank_score, 6)} if h.rerank_score is not None else {}),
                    **({"snippet": h.snippet.text} if h.snippet is not None else {}),
                    **({"text": h.text} if with_text else {}),
                    "image": IMAGE_URI.format(doc_id=h.doc_id, page=h.page),
                }
                for n, h in enumerate(result, start=1)
            ]
            out: list[TextContent | ImageContent] = [
                TextContent(
                    type="text", text=json.dumps({"mode": result.mode, "hits": hits}, ensure_ascii=False)
                )
            ]
            if images:
                for n, h in enumerate(result, start=1):
                    image = page_image(ix, h.doc_id, h.page, max_side=max_side)
                    out.append(TextContent(type="text", text=citation(n, h)))
                    out.append(ImageContent(type="image", data=image.base64, mime_type=image.mime_type))
            return out
        except DocvecError as e:
            raise _tool_error(e) from e

    @server.tool(
        description=(
            "One page of an indexed document: its image at full size and its whole text (empty for a page "
            "without text). doc_id comes from search or list_documents; pages count from 1."
        ),
        annotations=_READ_ONLY,
        structured_output=False,
    )
    def get_page(doc_id: str, page: int, max_side: int | None = None) -> list[TextContent | ImageContent]:
        try:
            ix = the_index()
            image = page_image(ix, doc_id, page, max_side=max_side)
            text = _page_text(ix, doc_id, page)
        except DocvecError as e:
            raise _tool_error(e) from e
        head = {"doc_id": doc_id, "page": page, "width": image.width, "height": image.height}
        if text is not None:
            head |= {"text": text.text, "text_from": text.text_from}
        return [
            TextContent(type="text", text=json.dumps(head, ensure_ascii=False)),
            ImageContent(type="image", data=image.base64, mime_type=image.mime_type),
        ]

    @server.tool(
        description=(
            "The indexed documents, by name: each one's doc_id, name, page count and tags, with the total "
            "(offset and limit page through them, at most 1000 at a time)."
        ),
        annotations=_READ_ONLY,
    )
    def list_documents(offset: int = 0, limit: int = 100) -> dict[str, Any]:
        try:
            listed = the_index().documents(offset=offset, limit=limit)
        except DocvecError as e:
            raise _tool_error(e) from e
        return {
            "total": listed.total,
            "offset": listed.offset,
            "documents": [
                {"doc_id": d.doc_id, "name": d.name, "pages": d.page_count, "tags": d.tags, "state": d.state}
                for d in listed.documents
            ],
        }

    if add_roots:
        _add_tool(server, the_index, tuple(add_roots))

    @server.resource(
        IMAGE_URI, name="page image", description="A page's image (PNG), as indexed.", mime_type="image/png"
    )
    def page_image_resource(doc_id: str, page: str) -> bytes:
        try:
            return page_image(the_index(), doc_id, int(page), max_side=None).data
        except ValueError as e:
            raise ResourceError(f"InputError: page must be a page number, not {page!r}") from e
        except DocvecError as e:
            raise ResourceError(f"{type(e).__name__}: {e}") from e

    return server


def _add_tool(server: MCPServer, the_index: Callable[[], IndexLike], roots: tuple[Path, ...]) -> None:
    folders = ", ".join(str(r) for r in roots)

    @server.tool(
        description=(
            "Index documents (PDFs, images; folders are read with their subfolders; glob patterns) so that "
            f"search finds them. Only paths under these folders are allowed: {folders}. Files already "
            "indexed and unchanged are skipped; tags (key=value) are given to every document read."
        ),
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True),
    )
    def add(paths: list[str], tags: dict[str, str] | None = None) -> dict[str, Any]:
        # one answer whether a path outside exists or not: the server's files are not the agent's to probe
        outside = [p for p in paths if not within_roots(p, roots)]
        if outside:
            raise ToolError(
                f"ForbiddenError: {', '.join(map(repr, outside))}: not under a folder agents may add from "
                f"({folders})"
            )
        try:
            report = the_index().add(paths, tags=[f"{k}={v}" for k, v in (tags or {}).items()])
        except DocvecError as e:
            raise _tool_error(e) from e
        return {"summary": report.summary(), **report.model_dump(mode="json", exclude={"ignored"})}


def _page_text(index: IndexLike, doc_id: str, page: int) -> PageText | None:
    """The page's text; ``None`` in a collection that keeps none."""
    try:
        return index.page_text(doc_id, page)
    except ConflictError:
        return None
