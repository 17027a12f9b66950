"""docvec as a LangChain retriever: :class:`DocvecRetriever`, a ``langchain_core`` ``BaseRetriever`` over
any open index, local or served (``pip install 'docvec[langchain]'``).

>>> from docvec.langchain import DocvecRetriever        # doctest: +SKIP
>>> retriever = DocvecRetriever(index=index, k=5)
>>> docs = retriever.invoke("total amount due")

Each document is one page, in :meth:`docvec.Index.search`'s order: its text as ``page_content`` (empty for a
page without any), and in ``metadata`` its document id, name, page, score, tags and page image (a path, or a
URL on a served index; with ``image_base64=True`` the PNG itself): :func:`docvec.rag.hit_metadata`.
"""

from __future__ import annotations

from typing import Any

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, SkipValidation

from ._contract import IndexLike
from ._records import ModeChoice, Search, SearchFilter
from .rag import hit_metadata

__all__ = ["DocvecRetriever"]


class DocvecRetriever(BaseRetriever):
    """The pages of ``index`` that best match a query, as LangChain documents; the search's options as
    fields (``k``, ``filter``, ``mode``, ``rerank``), each of which ``invoke(query, k=3, ...)`` may set
    for one call. Bad options are docvec's errors (:class:`~docvec.InputError`), as from the index."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    # any index of docvec's (a Protocol, which no isinstance can check)
    index: SkipValidation[IndexLike]
    k: int = 5
    filter: SearchFilter | None = None
    mode: ModeChoice | None = None
    rerank: int | None = None
    image_base64: bool = False

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **options: Any
    ) -> list[Document]:
        chosen = {"k": self.k, "filter": self.filter, "mode": self.mode, "rerank": self.rerank} | options
        image_base64 = bool(chosen.pop("image_base64", self.image_base64))
        search = Search.of(query, with_text=True, **chosen)
        result = self.index.search(search)
        return [
            Document(
                page_content=hit.text or "",
                metadata=hit_metadata(self.index, hit, image_base64=image_base64),
            )
            for hit in result
        ]
