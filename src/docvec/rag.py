"""Pages to a vision-language model: what a RAG application hands a model after a search.

:func:`rag_messages` turns a question and the pages a search found into a chat request's messages in the
OpenAI-compatible format that llama.cpp's server, vLLM and hosted APIs accept: every page as an image (a
``data:`` URL), with its citation (``[1] invoice.pdf, page 2``) and, where the index keeps it, its text.
The call to a model is the caller's (docs/rag.md). :func:`page_image` and :func:`hit_metadata` are the
pieces the framework retrievers (:mod:`docvec.langchain`, :mod:`docvec.llama_index`) and the MCP server
(:mod:`docvec.mcp`) share, so that a page reads the same through each of them.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from PIL import Image

from ._client import RemoteIndex
from ._contract import IndexLike
from ._errors import ConflictError, InputError
from ._records import Hit

__all__ = ["DEFAULT_MAX_SIDE", "SYSTEM_PROMPT", "PageImage", "hit_metadata", "page_image", "rag_messages"]

#: the longest side, in pixels, of a page image handed to a model unless the caller says otherwise: an A4
#: page keeps 9-point print legible, and a model's own image budget is rarely larger
DEFAULT_MAX_SIDE = 1536
#: the most a caller may ask for: a page is stored at the embedding model's budget, far below this
_LARGEST_SIDE = 8192

SYSTEM_PROMPT = (
    "You answer questions from the document pages you are given, and from nothing else. Each page comes "
    "as an image, with its citation in brackets and, where available, its text. Cite the pages you use by "
    "their numbers, like [1]. If the pages do not hold the answer, say so."
)


@dataclass(frozen=True)
class PageImage:
    """A page's image as a model or an agent takes it: ``data`` (PNG bytes), its ``mime_type`` and size."""

    data: bytes
    mime_type: str
    width: int
    height: int

    @property
    def base64(self) -> str:
        """The bytes, base64-encoded (MCP image content, a LangChain document's metadata)."""
        return base64.b64encode(self.data).decode("ascii")

    @property
    def data_url(self) -> str:
        """A ``data:`` URL of the image (an OpenAI-style ``image_url``)."""
        return f"data:{self.mime_type};base64,{self.base64}"


def page_image(
    index: IndexLike, doc_id: str, page: int, *, max_side: int | None = DEFAULT_MAX_SIDE
) -> PageImage:
    """Page ``page`` of document ``doc_id`` as the index keeps it (a PNG), scaled down so that its longer
    side is at most ``max_side`` pixels (``None``: as kept). The same from a local and a served index;
    :class:`~docvec.NotFoundError` for an unknown document or page, :class:`~docvec.InputError` for a bound
    outside 64..8192."""
    if max_side is not None and not 64 <= max_side <= _LARGEST_SIDE:
        raise InputError(f"max_side must be between 64 and {_LARGEST_SIDE} pixels, not {max_side}")
    path = index.page_file(doc_id, page)
    with Image.open(path) as img:
        if max_side is None or max(img.size) <= max_side:
            return PageImage(path.read_bytes(), "image/png", img.width, img.height)
        scale = max_side / max(img.size)
        size = (max(1, round(img.width * scale)), max(1, round(img.height * scale)))
        small = img.convert("RGB").resize(size, Image.Resampling.LANCZOS)
    out = io.BytesIO()
    small.save(out, format="PNG", optimize=True)
    return PageImage(out.getvalue(), "image/png", small.width, small.height)


def image_location(index: IndexLike, hit: Hit) -> str:
    """Where a hit's page image is: its URL on a served index, its file on a local one."""
    if isinstance(index, RemoteIndex):
        return f"{index.url}/documents/{hit.doc_id}/pages/{hit.page}/image"
    return str(index.page_file(hit.doc_id, hit.page))


def hit_metadata(index: IndexLike, hit: Hit, *, image_base64: bool = False) -> dict[str, Any]:
    """A hit as a framework's document metadata: its document id, name, page, score (and the reranker's),
    tags, where its page image is, and with ``image_base64`` the image itself (PNG, base64)."""
    meta: dict[str, Any] = {
        "doc_id": hit.doc_id,
        "name": hit.name,
        "page": hit.page,
        "score": hit.score,
        "tags": dict(hit.tags),
        "image": image_location(index, hit),
    }
    if hit.rerank_score is not None:
        meta["rerank_score"] = hit.rerank_score
    if image_base64:
        meta["image_base64"] = page_image(index, hit.doc_id, hit.page, max_side=None).base64
    return meta


def citation(number: int, hit: Hit) -> str:
    """How a page is cited to a model and back to a reader: ``[1] invoice.pdf, page 2``."""
    return f"[{number}] {hit.name}, page {hit.page}"


def _text_of(index: IndexLike, hit: Hit) -> str | None:
    if hit.text is not None:
        return hit.text or None
    try:
        return index.page_text(hit.doc_id, hit.page).text or None
    except ConflictError:  # a collection that keeps no text: the image alone
        return None


def rag_messages(
    question: str,
    hits: Sequence[Hit],
    index: IndexLike,
    *,
    max_side: int | None = DEFAULT_MAX_SIDE,
    with_text: bool = True,
    system: str | None = SYSTEM_PROMPT,
) -> list[dict[str, Any]]:
    """The messages of an OpenAI-compatible chat request that asks ``question`` of the pages ``hits`` name,
    in their order: a system message (``system``; ``None``: none), then one user message holding, for each
    page, its citation, its image (at most ``max_side`` pixels on its longer side) and, with ``with_text``,
    its text where the index keeps it; the question last. Pages are numbered from 1 as cited.
    """
    if not question.strip():
        raise InputError("the question is empty")
    content: list[dict[str, Any]] = []
    for number, hit in enumerate(hits, start=1):
        image = page_image(index, hit.doc_id, hit.page, max_side=max_side)
        content.append({"type": "text", "text": citation(number, hit)})
        content.append({"type": "image_url", "image_url": {"url": image.data_url}})
        text = _text_of(index, hit) if with_text else None
        if text:
            content.append({"type": "text", "text": f"Text of [{number}]:\n{text}"})
    content.append({"type": "text", "text": f"Question: {question}"})
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    return [*messages, {"role": "user", "content": content}]
