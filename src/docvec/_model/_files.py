"""A model's files: its two GGUFs (a language model and the vision encoder, mmproj, that belongs to it) and
the multi-vector head beside them when it has one, checked to belong together.

A model folder may hold the multi-vector head, ``multivector-head.gguf`` (:mod:`docvec._model._head`;
``general.architecture`` ``docvec.mvhead``): it is neither a language model nor an mmproj, and becomes
:attr:`ModelFiles.head`. Its header is checked here (a GGUF, a head, as wide as the language model); its
tensors when the embedder loads it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .._errors import ModelFileError, ModelMismatchError
from ._gguf import GGUFInfo, read_gguf_info
from ._head import ARCHITECTURE as HEAD_ARCHITECTURE
from ._head import FILE_NAME as HEAD_FILE

__all__ = ["ModelFiles", "check_pair", "head_beside", "inspect_pair", "is_head"]


@dataclass(frozen=True)
class ModelFiles:
    """A language model GGUF and the vision encoder (mmproj) GGUF that belongs to it; ``head``, the
    multi-vector head beside them (:mod:`docvec._model._head`), when the model has one."""

    language_model: Path
    mmproj: Path
    head: Path | None = None


def check_pair(lm: GGUFInfo, mmproj: GGUFInfo, head: GGUFInfo | None = None) -> ModelFiles:
    if lm.is_mmproj:
        raise ModelFileError(lm.path, "this is a vision encoder (mmproj), not a language model")
    if is_head(lm):
        raise ModelFileError(lm.path, "this is a multi-vector head, not a language model")
    if not mmproj.is_mmproj:
        raise ModelFileError(mmproj.path, f"this is a '{mmproj.architecture}' language model, not an mmproj")
    if not mmproj.metadata.get("clip.has_vision_encoder", False):
        raise ModelFileError(mmproj.path, "this mmproj has no vision encoder")
    a, b = lm.embedding_length, mmproj.embedding_length
    if a is None or b is None or a != b:
        raise ModelMismatchError(
            f"{mmproj.path} does not belong to {lm.path}: the vision encoder outputs {b}-wide embeddings, "
            f"the language model takes {a}"
        )
    if head is not None:
        _check_head(head, lm)
    return ModelFiles(language_model=lm.path, mmproj=mmproj.path, head=head.path if head else None)


def is_head(info: GGUFInfo) -> bool:
    return info.architecture == HEAD_ARCHITECTURE


def _check_head(head: GGUFInfo, lm: GGUFInfo) -> None:
    """The header of a multi-vector head: a head, and as wide as the language model's hidden states."""
    if not is_head(head):
        raise ModelFileError(
            head.path,
            f"not a multi-vector head (architecture {head.architecture!r}, not {HEAD_ARCHITECTURE!r})",
        )
    width = head.metadata.get(f"{HEAD_ARCHITECTURE}.width")
    if not isinstance(width, int):
        raise ModelFileError(head.path, f"the multi-vector head has no {HEAD_ARCHITECTURE}.width")
    if width != lm.embedding_length:
        raise ModelMismatchError(
            f"{head.path} does not belong to {lm.path}: the multi-vector head takes {width}-wide hidden "
            f"states, the language model gives {lm.embedding_length}"
        )


def head_beside(lm: Path) -> GGUFInfo | None:
    """The header of ``multivector-head.gguf`` in the language model's folder, if there is one."""
    path = lm.parent / HEAD_FILE
    return read_gguf_info(path) if path.exists() else None


def inspect_pair(files: ModelFiles) -> tuple[GGUFInfo, GGUFInfo]:
    """Check that ``files`` are a language model and the mmproj that belongs to it; return both headers.
    (The head, ``files.head``, is checked by the embedder when it loads it.)"""
    lm, mm = read_gguf_info(files.language_model), read_gguf_info(files.mmproj)
    check_pair(lm, mm)
    return lm, mm
