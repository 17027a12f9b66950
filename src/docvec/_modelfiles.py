"""Finding and checking a model's two GGUF files (and its multi-vector head) before llama.cpp sees them.

llama.cpp reports a bad file as a null handle and a log line; checking the header here first turns a
missing, truncated or mismatched file into an error that names the file and says what is wrong.

A model folder may also hold the multi-vector head, ``multivector-head.gguf`` (:mod:`docvec._mvhead`;
``general.architecture`` ``docvec.mvhead``): it is neither a language model nor an mmproj, and becomes
:attr:`ModelFiles.head`. Its header is checked here (a GGUF, a head, as wide as the language model); its
tensors when the embedder loads it.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from ._errors import ModelFileError, ModelMismatchError, ModelNotFoundError
from ._mvhead import ARCHITECTURE as HEAD_ARCHITECTURE
from ._mvhead import FILE_NAME as HEAD_FILE

__all__ = ["GGUFInfo", "ModelFiles", "inspect_pair", "read_gguf_info", "resolve_model"]

_GGUF_MAGIC = b"GGUF"


@dataclass(frozen=True)
class GGUFInfo:
    """What docvec needs from a GGUF header."""

    path: Path
    architecture: str
    metadata: dict[str, Any]

    @property
    def is_mmproj(self) -> bool:
        return self.architecture == "clip"

    @property
    def projector(self) -> str:
        return str(self.metadata.get("clip.projector_type", ""))

    @property
    def embedding_length(self) -> int | None:
        """Width of the language model's hidden state, or of the vision encoder's output."""
        key = "clip.vision.projection_dim" if self.is_mmproj else f"{self.architecture}.embedding_length"
        v = self.metadata.get(key)
        return int(v) if v is not None else None


@dataclass(frozen=True)
class ModelFiles:
    """A language model GGUF and the vision encoder (mmproj) GGUF that belongs to it; ``head``, the
    multi-vector head beside them (:mod:`docvec._mvhead`), when the model has one."""

    language_model: Path
    mmproj: Path
    head: Path | None = None


def read_gguf_info(path: Path) -> GGUFInfo:
    """Read and check a GGUF header: the file exists, is a GGUF, and is not truncated."""
    if not path.exists():
        raise ModelFileError(path, "no such file")
    if not path.is_file():
        raise ModelFileError(path, "not a file")
    size = path.stat().st_size
    try:
        with path.open("rb") as f:
            magic = f.read(4)
            if magic != _GGUF_MAGIC:
                raise ModelFileError(path, "not a GGUF file (bad magic bytes)" if size else "empty file")
            meta, end = _read_header(f)
    except ModelFileError:
        raise
    except OSError as e:
        raise ModelFileError(path, f"cannot read: {e.strerror or e}") from None
    except (_HeaderError, struct.error, ValueError, UnicodeDecodeError, KeyError) as e:
        raise ModelFileError(path, f"corrupt or truncated GGUF header ({e})") from None
    if end > size:
        raise ModelFileError(path, f"truncated: tensor data ends at byte {end}, the file has {size}")
    arch = meta.get("general.architecture")
    if not isinstance(arch, str):
        raise ModelFileError(path, "GGUF has no general.architecture")
    return GGUFInfo(path=path, architecture=arch, metadata=meta)


# A small reader of the GGUF header (spec: ggml/docs/gguf.md) rather than gguf.GGUFReader, which decodes every
# array element in Python: 7.4 s for the 151,936-token vocabulary of a Qwen2 model, against ~0.1 s here.
_SCALARS = {
    0: "<B",
    1: "<b",
    2: "<H",
    3: "<h",
    4: "<I",
    5: "<i",
    6: "<f",
    7: "<?",
    10: "<Q",
    11: "<q",
    12: "<d",
}
_STRING, _ARRAY = 8, 9
_MAX_HEADER_ITEMS = 1 << 24


class _HeaderError(Exception):
    """Inside the reader: the header is cut short or malformed (read_gguf_info names the file)."""


def _read(f: BinaryIO, fmt: str) -> Any:
    n = struct.calcsize(fmt)
    data = f.read(n)
    if len(data) != n:
        raise _HeaderError("unexpected end of file")
    return struct.unpack(fmt, data)[0]


def _read_str(f: BinaryIO) -> str:
    n = _read(f, "<Q")
    if n > 1 << 30:
        raise _HeaderError(f"string of {n} bytes")
    data = f.read(n)
    if len(data) != n:
        raise _HeaderError("unexpected end of file")
    return data.decode("utf-8")


def _read_value(f: BinaryIO, vtype: int, keep: bool) -> Any:
    if vtype in _SCALARS:
        return _read(f, _SCALARS[vtype])
    if vtype == _STRING:
        return _read_str(f)
    if vtype != _ARRAY:
        raise _HeaderError(f"unknown value type {vtype}")
    etype, count = _read(f, "<I"), _read(f, "<Q")
    if count > _MAX_HEADER_ITEMS:
        raise _HeaderError(f"array of {count} items")
    if not keep and etype in _SCALARS:
        f.seek(count * struct.calcsize(_SCALARS[etype]), 1)
        return None
    items = [_read_value(f, etype, keep) for _ in range(count)]
    return items if keep else None


def _read_header(f: BinaryIO) -> tuple[dict[str, Any], int]:
    """Metadata (large arrays such as the vocabulary skipped) and the byte where tensor data ends."""
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

    version = _read(f, "<I")
    if version not in (2, 3):
        raise _HeaderError(f"unsupported GGUF version {version}")
    n_tensors, n_kv = _read(f, "<Q"), _read(f, "<Q")
    if n_tensors > _MAX_HEADER_ITEMS or n_kv > _MAX_HEADER_ITEMS:
        raise _HeaderError(f"{n_tensors} tensors, {n_kv} metadata keys")
    meta: dict[str, Any] = {}
    for _ in range(n_kv):
        key = _read_str(f)
        vtype = _read(f, "<I")
        keep = not key.startswith("tokenizer.ggml.") or key == "tokenizer.ggml.pre"
        value = _read_value(f, vtype, keep)
        if keep:
            meta[key] = value
    ends = []
    for _ in range(n_tensors):
        _read_str(f)
        n_dims = _read(f, "<I")
        if n_dims > 8:
            raise _HeaderError(f"tensor with {n_dims} dimensions")
        n_elems = 1
        for _ in range(n_dims):
            n_elems *= _read(f, "<Q")
        ttype, offset = _read(f, "<I"), _read(f, "<Q")
        block, type_size = GGML_QUANT_SIZES[GGMLQuantizationType(ttype)]
        ends.append(offset + n_elems // block * type_size)
    align = int(meta.get("general.alignment", 32))
    data_start = -(-f.tell() // align) * align
    return meta, data_start + max(ends, default=0)


def _pair(lm: GGUFInfo, mmproj: GGUFInfo, head: GGUFInfo | None = None) -> ModelFiles:
    if lm.is_mmproj:
        raise ModelFileError(lm.path, "this is a vision encoder (mmproj), not a language model")
    if _is_head(lm):
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


def _is_head(info: GGUFInfo) -> bool:
    return info.architecture == HEAD_ARCHITECTURE


def _check_head(head: GGUFInfo, lm: GGUFInfo) -> None:
    """The header of a multi-vector head: a head, and as wide as the language model's hidden states."""
    if not _is_head(head):
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


def _head_beside(lm: Path) -> GGUFInfo | None:
    """The header of ``multivector-head.gguf`` in the language model's folder, if there is one."""
    path = lm.parent / HEAD_FILE
    return read_gguf_info(path) if path.exists() else None


def inspect_pair(files: ModelFiles) -> tuple[GGUFInfo, GGUFInfo]:
    """Check that ``files`` are a language model and the mmproj that belongs to it; return both headers.
    (The head, ``files.head``, is checked by the embedder when it loads it.)"""
    lm, mm = read_gguf_info(files.language_model), read_gguf_info(files.mmproj)
    _pair(lm, mm)
    return lm, mm


def resolve_model(spec: str | Path, *, find_registered: Any = None) -> tuple[ModelFiles, GGUFInfo, GGUFInfo]:
    """Turn a model setting into checked files.

    ``spec`` is a folder holding one language model GGUF and one mmproj GGUF, a pair
    ``"LM.gguf,MMPROJ.gguf"``, or a registry name; ``find_registered(name)`` returns the cached files of a
    registry name, or None when it is not a name it knows.

    The multi-vector head, :attr:`ModelFiles.head`: in a folder, the GGUF whose architecture is
    ``docvec.mvhead`` (at most one); for a pair, ``multivector-head.gguf`` in the language model's folder;
    for a registry name, the head it returns, else ``multivector-head.gguf`` beside its language model.
    None when there is none. A head that is not readable, not a head, or of another width is an error
    naming the file (:class:`ModelFileError`, :class:`ModelMismatchError` for the width).
    """
    text = str(spec)
    if "," in text:
        lm_s, mm_s = (s.strip() for s in text.split(",", 1))
        lm, mm = read_gguf_info(Path(lm_s).expanduser()), read_gguf_info(Path(mm_s).expanduser())
        return _pair(lm, mm, _head_beside(lm.path)), lm, mm
    path = Path(text).expanduser()
    if path.is_dir():
        infos = [read_gguf_info(p) for p in sorted(path.glob("*.gguf"))]
        heads = [i for i in infos if _is_head(i)]
        lms = [i for i in infos if not i.is_mmproj and not _is_head(i)]
        mms = [i for i in infos if i.is_mmproj]
        if len(lms) != 1 or len(mms) != 1:
            found = ", ".join(p.path.name for p in infos) or "no .gguf files"
            raise ModelNotFoundError(
                f"{path}: a model folder holds exactly one language model GGUF and one mmproj GGUF "
                f"(found {found}); name the pair as 'LM.gguf,MMPROJ.gguf' to choose"
            )
        if len(heads) > 1:
            raise ModelNotFoundError(
                f"{path}: a model folder holds at most one multi-vector head "
                f"(found {', '.join(h.path.name for h in heads)})"
            )
        return _pair(lms[0], mms[0], heads[0] if heads else None), lms[0], mms[0]
    looks_like_path = path.suffix == ".gguf" or "/" in text or "\\" in text or text.startswith((".", "~"))
    if looks_like_path or path.exists():
        raise ModelNotFoundError(
            f"{path}: a model is a folder or a pair 'LM.gguf,MMPROJ.gguf'; "
            "a single file lacks the vision encoder"
            if path.exists()
            else f"{path}: no such file or folder"
        )
    files = find_registered(text) if find_registered is not None else None
    if files is None:
        raise ModelNotFoundError(
            f"'{text}' is neither a model folder, a 'LM.gguf,MMPROJ.gguf' pair, nor a downloaded model; "
            f"for a registry model run `docvec models pull {text}` first"
        )
    lm, mm = read_gguf_info(files.language_model), read_gguf_info(files.mmproj)
    head = read_gguf_info(files.head) if files.head is not None else _head_beside(lm.path)
    return _pair(lm, mm, head), lm, mm
