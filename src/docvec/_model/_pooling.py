"""Token pooling: a page's token vectors replaced by fewer, each the re-normalised mean of a group of them,
so that a multi-vector collection stores and scores that many times fewer (``DOCVEC_TOKEN_POOL``).

Two ways of grouping; a profile names its family's
(:attr:`docvec._model._profiles.ModelProfile.token_pooling`):

- ``runs``: each run of ``factor`` consecutive tokens. Consecutive tokens of a page are neighbours along a
  row of the image's token grid (Qwen2.5-VL lists them row by row), so this averages small horizontal strips
  of the page: the row-mean pooling Qdrant and ColPali users apply, bounded to ``factor`` tokens so that a row
  keeps its detail.
- ``hierarchical``: colpali-engine's ``HierarchicalTokenPooler`` (colpali_engine/compression/token_pooling/
  hierarchical_token_pooling.py, MIT), the pooler colpali-engine publishes for its retrievers: Ward
  clustering of the tokens by their cosine distances into at most ``n // factor`` groups, whatever their place
  on the page (the ColPali paper: 97.8% of the quality at factor 3). Transcribed here so that the runtime
  needs SciPy only, not colpali-engine and PyTorch; tests/test_multivector.py holds it to colpali-engine's
  own.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import numpy.typing as npt

from ._blas import one_blas_thread

__all__ = ["TokenPooling", "pool_tokens"]

#: how a family groups a page's tokens (see the module's docstring)
TokenPooling = Literal["runs", "hierarchical"]

Vectors = npt.NDArray[np.float32]


def pool_tokens(tokens: Vectors, factor: int, method: TokenPooling = "runs") -> Vectors:
    """``tokens`` [n, dim] pooled by ``factor`` (1: as they are) with ``method``: each group replaced by
    its mean, re-normalised."""
    if factor <= 1 or tokens.shape[0] < 2:
        return tokens
    if method == "hierarchical":
        groups = _ward_groups(tokens, factor)
    else:
        groups = np.arange(tokens.shape[0]) // factor
    sums = np.zeros((int(groups.max()) + 1, tokens.shape[1]), np.float64)
    np.add.at(sums, groups, tokens.astype(np.float64))
    sums = sums[np.bincount(groups) > 0]  # a cluster fcluster left empty gives no vector
    norms = np.linalg.norm(sums, axis=1, keepdims=True)
    return np.asarray(sums / np.maximum(norms, np.finfo(np.float32).tiny), np.float32)


def _ward_groups(tokens: Vectors, factor: int) -> npt.NDArray[np.intp]:
    """Each token's group: colpali-engine's rule (the rows of the cosine-distance matrix clustered by Ward's
    method, cut into at most ``n // factor`` clusters), numbered from 0."""
    from scipy.cluster.hierarchy import fcluster, linkage

    t = np.asarray(tokens, np.float32)
    with one_blas_thread():
        distances = 1 - t @ t.T
    tree = linkage(distances, metric="euclidean", method="ward")
    most = max(t.shape[0] // factor, 1)
    return np.asarray(fcluster(tree, t=most, criterion="maxclust") - 1, np.intp)
