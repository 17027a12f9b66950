"""The model runtime: where a page's pixels and a query's words become vectors.

GGUF files (:mod:`._gguf`, :mod:`._files`), the native llama.cpp and mtmd bindings (:mod:`._native`), images
as the model sees them (:mod:`._images`), model profiles (:mod:`._profiles`: prompts, pooling, sizes), the
registry of models known by name (:mod:`._registry`), the multi-vector head (:mod:`._head`), one loaded
model's native handles and their guard (:mod:`._session`), and the model kinds that compose one: the
:class:`~docvec.Embedder` (:mod:`._embedder`) and the :class:`~docvec.Reranker` that scores (query, page)
pairs (:mod:`._reranker`). No PyTorch and no network: building, converting and downloading models are
build-time tools (:mod:`docvec._tools`).
"""

from ._embedder import Embedder, normalize
from ._files import ModelFiles
from ._reranker import Reranker
from ._resolve import resolve_model

__all__ = ["Embedder", "ModelFiles", "Reranker", "normalize", "resolve_model"]
