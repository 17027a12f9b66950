"""docvec as a LlamaIndex retriever: :class:`DocvecRetriever`, a ``llama_index.core`` ``BaseRetriever``
over any open index, local or served (``pip install 'docvec[llamaindex]'``).

>>> from docvec.llama_index import DocvecRetriever       # doctest: +SKIP
>>> nodes = DocvecRetriever(index=index, k=5).retrieve("total amount due")

Each result is one page, in :meth:`docvec.Index.search`'s order and with its score: an ``ImageNode``
whose text is the page's text, whose image is the page image (its path, or its URL on a served index; with
``image_base64=True`` the PNG itself), and whose metadata is :func:`docvec.rag.hit_metadata`'s.
"""

from __future__ import annotations

from typing import Any

from llama_index.core.callbacks import CallbackManager
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import ImageNode, NodeWithScore, QueryBundle

from ._client import RemoteIndex
from ._contract import IndexLike
from ._records import ModeChoice, Search, SearchFilter
from .rag import hit_metadata

__all__ = ["DocvecRetriever"]


class DocvecRetriever(BaseRetriever):
    """The pages of ``index`` that best match a query, as LlamaIndex nodes with scores; ``k``, ``filter``,
    ``mode`` and ``rerank`` are the search's options. Bad options are docvec's errors
    (:class:`~docvec.InputError`), as from the index."""

    def __init__(
        self,
        index: IndexLike,
        *,
        k: int = 5,
        filter: SearchFilter | None = None,
        mode: ModeChoice | None = None,
        rerank: int | None = None,
        image_base64: bool = False,
        callback_manager: CallbackManager | None = None,
        **kwargs: Any,
    ) -> None:
        # checked now, by docvec's rules: a bad option fails where it is written, as the index says it
        self._options = {"k": k, "filter": filter, "mode": mode, "rerank": rerank}
        Search.of("options", **self._options)
        self.index = index
        self.image_base64 = image_base64
        super().__init__(callback_manager=callback_manager, **kwargs)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        result = self.index.search(Search.of(query_bundle.query_str, with_text=True, **self._options))
        nodes = []
        for hit in result:
            meta = hit_metadata(self.index, hit, image_base64=self.image_base64)
            where = (
                {"image_url": meta["image"]}
                if isinstance(self.index, RemoteIndex)
                else {"image_path": meta["image"]}
            )
            node = ImageNode(
                id_=f"{hit.doc_id}:{hit.page}",
                # the image goes to a model as an image, not as words of its metadata
                excluded_llm_metadata_keys=["image", "image_base64"],
                excluded_embed_metadata_keys=["image", "image_base64"],
                text=hit.text or "",
                image=meta.get("image_base64"),
                image_mimetype="image/png",
                metadata=meta,
                **where,
            )
            nodes.append(NodeWithScore(node=node, score=hit.score))
        return nodes
