"""numpy's BLAS kept to one thread around the products docvec computes on a model's outputs.

numpy's OpenBLAS wakes its worker threads for a product and leaves them spinning afterwards, waiting for the
next one. The embedder's next llama.cpp call then shares the cores with them, and its threads wait at every
barrier for a thread the spinners pushed off its core: a VultronRetriever Flash query (its multi-vector head
is such a product) took twice as long (docs/models.md, "Speed on a CPU"). The products here, a head over a
page's token states and the distances of token pooling, are small enough for one thread.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import contextmanager

from threadpoolctl import ThreadpoolController

__all__ = ["one_blas_thread"]


@functools.cache
def _controller() -> ThreadpoolController:
    """The process's BLAS libraries, found once (numpy's is loaded with docvec)."""
    return ThreadpoolController()


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """numpy's BLAS (and SciPy's) on one thread inside the block, as many as before after it."""
    with _controller().limit(limits=1, user_api="blas"):
        yield
