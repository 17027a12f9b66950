"""The multi-vector head of a model whose profile has one (``multivector``): the linear layer the published
GGUFs leave out, in a file of its own.

The head (``multi_vector_projector``: weight [dim, hidden], bias [dim]) maps every token's last hidden state
to a dim-sized vector, L2-normalised per token; queries and pages are then scored by late interaction
(MaxSim).
docvec keeps it beside a model's two GGUFs as a small GGUF of its own::

    <model folder>/multivector-head.gguf
        general.architecture        "docvec.mvhead"
        docvec.mvhead.width         hidden size it takes (the language model's embedding_length)
        docvec.mvhead.dim           size of the vectors it gives
        docvec.mvhead.source        where it came from (a checkpoint, an adapter merged in)
        docvec.mvhead.kind          (optional) "colpali" for colpali-engine's head (``custom_text_proj``):
                                    the model is trained for late interaction only (a ColQwen)
        multi_vector_projector.weight   float32 [dim, width]
        multi_vector_projector.bias     float32 [dim]

written by ``docvec models convert`` (from a Hugging Face checkpoint), ``docvec models tiny`` and ``docvec
models pull`` (of a registry model with a ``head_repo``), and checked when it is loaded like the GGUFs are.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from .._errors import ModelFileError, ModelMismatchError
from ._blas import one_blas_thread

__all__ = [
    "ARCHITECTURE",
    "COLPALI",
    "FILE_NAME",
    "KEYS",
    "MultiVectorHead",
    "read_head",
    "write_head",
]

#: the file's name in a model folder
FILE_NAME = "multivector-head.gguf"
#: its general.architecture, which tells it from a language model or an mmproj
ARCHITECTURE = "docvec.mvhead"
#: the tensor names, as in the checkpoint a registry model's head is read from (its ``head_repo``)
KEYS = ("multi_vector_projector.weight", "multi_vector_projector.bias")
#: the kind of a head read from colpali-engine's ``custom_text_proj``: its model has no single vector of its
#: own, and its profile is chosen by it (:attr:`docvec._model._profiles.ModelProfile.head_kind`)
COLPALI = "colpali"

Vectors = npt.NDArray[np.float32]


@dataclass(frozen=True)
class MultiVectorHead:
    """The head's weights, float32: ``weight`` [dim, width], ``bias`` [dim]."""

    weight: Vectors
    bias: Vectors
    path: Path | None = None
    #: which family's head it is, when that chooses the model's profile (:data:`COLPALI`); else ``None``
    kind: str | None = None

    @property
    def width(self) -> int:
        """The hidden size it takes."""
        return int(self.weight.shape[1])

    @property
    def dim(self) -> int:
        """The size of the vectors it gives."""
        return int(self.weight.shape[0])

    def __call__(self, states: npt.NDArray[np.floating]) -> Vectors:
        """The unit-length token vectors of hidden ``states`` [tokens, width] (float64 inside, so that the
        projection adds no rounding of its own to llama.cpp's float32 states)."""
        x = np.asarray(states, np.float64)
        with one_blas_thread():
            out = x @ self.weight.T.astype(np.float64) + self.bias.astype(np.float64)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return np.asarray(out / np.maximum(norms, np.finfo(np.float32).tiny), np.float32)


def write_head(
    path: Path, weight: npt.ArrayLike, bias: npt.ArrayLike, *, source: str, kind: str | None = None
) -> Path:
    """Write the head to ``path`` (checked as :func:`read_head` checks it), with its ``kind`` when it has
    one; returns ``path``."""
    import gguf

    w = np.ascontiguousarray(np.asarray(weight, np.float32))
    b = np.ascontiguousarray(np.asarray(bias, np.float32))
    _check_shapes(path, w, b)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    writer = gguf.GGUFWriter(str(tmp), ARCHITECTURE)
    writer.add_uint32(f"{ARCHITECTURE}.width", int(w.shape[1]))
    writer.add_uint32(f"{ARCHITECTURE}.dim", int(w.shape[0]))
    writer.add_string(f"{ARCHITECTURE}.source", source)
    if kind is not None:
        writer.add_string(f"{ARCHITECTURE}.kind", kind)
    writer.add_tensor(KEYS[0], w)
    writer.add_tensor(KEYS[1], b)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    tmp.replace(path)
    return path


def read_head(path: Path, *, width: int | None = None) -> MultiVectorHead:
    """Load and check the head at ``path``: a head GGUF with both tensors, of matching shapes, finite; and,
    when ``width`` is given, taking that hidden size (the language model's). Any fault is a
    :class:`~docvec._errors.ModelFileError` naming the file."""
    import gguf

    if not path.is_file():
        raise ModelFileError(path, "no such file")
    try:
        reader = gguf.GGUFReader(str(path))
    except Exception as e:  # gguf raises ValueError, struct errors, memmap errors ... on a bad file
        raise ModelFileError(path, f"not a readable GGUF file ({e})") from None
    name = _string(reader, "general.architecture")
    if name != ARCHITECTURE:
        raise ModelFileError(path, f"not a multi-vector head (architecture {name!r}, not {ARCHITECTURE!r})")
    tensors = {t.name: t for t in reader.tensors}
    missing = [k for k in KEYS if k not in tensors]
    if missing:
        raise ModelFileError(path, f"lacks the tensor(s) {', '.join(missing)}")
    arrays = []
    for key in KEYS:
        t = tensors[key]
        if t.tensor_type not in (gguf.GGMLQuantizationType.F32, gguf.GGMLQuantizationType.F16):
            raise ModelFileError(path, f"{key} is {t.tensor_type.name}: the head must be F32 or F16")
        # GGUF lists dimensions innermost first
        arrays.append(np.asarray(t.data, np.float32).reshape(tuple(int(n) for n in reversed(t.shape))))
    weight, bias = arrays
    _check_shapes(path, weight, bias)
    if width is not None and weight.shape[1] != width:
        raise ModelMismatchError(
            f"{path} does not belong to this language model: it takes {weight.shape[1]}-wide hidden states, "
            f"the language model gives {width}"
        )
    return MultiVectorHead(weight, bias, path, _string(reader, f"{ARCHITECTURE}.kind"))


def _string(reader: Any, key: str) -> str | None:
    field = reader.fields.get(key)
    return bytes(field.parts[field.data[0]]).decode() if field is not None else None


def _check_shapes(path: Path, weight: Vectors, bias: Vectors) -> None:
    if weight.ndim != 2 or bias.ndim != 1 or bias.shape[0] != weight.shape[0]:
        raise ModelFileError(
            path,
            f"bad shapes: weight {tuple(weight.shape)}, bias {tuple(bias.shape)} (need [dim, width], [dim])",
        )
    if not (np.isfinite(weight).all() and np.isfinite(bias).all()):
        raise ModelFileError(path, "the head has NaN or infinite weights")
