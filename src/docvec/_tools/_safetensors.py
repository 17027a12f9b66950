"""Safetensors files read by byte ranges, and the multi-vector head found in them with its LoRA merged in.

``docvec models pull`` (:mod:`docvec._tools._pull`) reads a checkpoint on the Hugging Face Hub by HTTP Range
requests, ``docvec models convert`` (:mod:`docvec._tools._convert`) a local folder; both read it here, so
that one checkpoint gives one head whichever way it is read:

* the format: an 8-byte little-endian header length, a JSON header ``{name: {dtype, shape, data_offsets}}``,
  then the data. :func:`read_header` parses it from anything :class:`Readable` by byte ranges, and
  :func:`read_tensors` decodes BF16, F16, F32 and F64 tensors with numpy, reading only their bytes (BF16,
  which numpy lacks, needs no PyTorch); :func:`copy_without` rewrites a file without some tensors;
* the head's tensors among a checkpoint's (:func:`find_head_tensors`): its weight and bias
  (``multi_vector_projector.weight``, jina-embeddings-v4's, or ``custom_text_proj.weight``,
  colpali-engine's, under any prefix, or PEFT's ``...base_layer.weight``) and its LoRA factors per task:
  ``lora_A.weight`` (a single-task adapter), ``lora_A.<task>.weight`` (jina-embeddings-v4's adapter),
  ``lora_A.default.<task>.weight`` (the same with PEFT's adapter name left in);
* the merge (:func:`build_head`): W + s·B·A, and bias + s·b_B where lora_B has a bias (PEFT's
  ``lora_bias``), summed in float64 and given in float32, with s from the adapter_config.json as PEFT
  computes it (:func:`read_lora_scale`: ``r``, ``lora_alpha``, ``use_rslora``, ``rank_pattern``,
  ``alpha_pattern``).

What is not as expected raises :class:`CheckpointError`, whose message names the file; the callers add what
to do.

The format is read here rather than by the libraries, which do not do this job: the safetensors package
opens local files only, gives whole tensors (in numpy none of BF16; PyTorch would, but ``docvec models
pull`` runs without it) and neither the tensors' places in the file nor a header from bytes, which a read
by ranges and a copy tensor by tensor need; huggingface_hub's ``parse_safetensors_file_metadata`` reads a
Hub file's first 100 kB whatever the header's size, does not say where the data starts, and takes a
server's whole answer when it ignores the Range header (a shard of several GB).
"""

from __future__ import annotations

import json
import math
import re
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from .._errors import CheckpointError, TaskNotFoundError
from .._model._head import COLPALI

__all__ = [
    "MAX_HEADER",
    "PROJECTORS",
    "HeadRefs",
    "Header",
    "LocalFile",
    "Lora",
    "LoraScale",
    "MergedHead",
    "Readable",
    "TensorInfo",
    "TensorRef",
    "build_head",
    "copy_without",
    "find_head_tensors",
    "is_head_key",
    "read_header",
    "read_lora_scale",
    "read_tensors",
    "read_weight_map",
]

#: the head's module in the checkpoint (possibly under a prefix), as the models that have one name it:
#: jina-embeddings-v4's ``multi_vector_projector``, colpali-engine's ``custom_text_proj`` (ColQwen3,
#: ColQwen3.5); a checkpoint holds one of them
PROJECTORS = ("multi_vector_projector", "custom_text_proj", "embedding_proj_layer")
_PROJECTOR = "(?:" + "|".join(PROJECTORS) + ")"
#: the format's cap on the JSON header (the safetensors library's MAX_HEADER_SIZE): a longer one means the
#: file is no safetensors file
MAX_HEADER = 100_000_000
#: tensors closer than this in one file are read in one range (one HTTP round trip instead of two)
_MERGE_GAP = 64 << 10
_COPY_CHUNK = 64 << 20
_DTYPES: dict[str, str] = {"BF16": "<u2", "F16": "<f2", "F32": "<f4", "F64": "<f8"}

_F64 = npt.NDArray[np.float64]
_F32 = npt.NDArray[np.float32]


# ----------------------------------------------------------------------------------------------- the format


class Readable(Protocol):
    """A file read by byte ranges: a local file, or one on the Hub read by HTTP Range requests."""

    @property
    def name(self) -> str:
        """How messages name the file."""
        ...

    @property
    def size(self) -> int | None:
        """Its length in bytes, where known (a Hub file knows it once it has answered a read)."""
        ...

    def read(self, start: int, stop: int) -> bytes:
        """Bytes ``start`` to ``stop`` (exclusive); fewer only past the end of the file."""
        ...


class LocalFile:
    """A file on disk, read by byte ranges; ``name`` (default: the path) is how messages name it."""

    def __init__(self, path: Path, name: str | None = None) -> None:
        self.path = path
        self.name = str(path) if name is None else name
        self.size: int | None = None
        try:
            self.size = path.stat().st_size
        except OSError as exc:
            raise CheckpointError(f"{self.name}: cannot be read ({exc.strerror or exc})") from None

    def read(self, start: int, stop: int) -> bytes:
        """Bytes ``start`` to ``stop`` (exclusive); short at the end of the file."""
        try:
            with self.path.open("rb") as f:
                f.seek(start)
                return f.read(max(stop - start, 0))
        except OSError as exc:
            raise CheckpointError(f"{self.name}: cannot be read ({exc.strerror or exc})") from None


@dataclass(frozen=True)
class TensorInfo:
    """One tensor's header entry: ``begin`` and ``end`` are its byte offsets in the file's data section."""

    dtype: str
    shape: tuple[int, ...]
    begin: int
    end: int


@dataclass(frozen=True)
class Header:
    """A safetensors file's header: its tensors, its ``__metadata__`` and where its data section starts."""

    file: Readable
    tensors: dict[str, TensorInfo]
    metadata: dict[str, Any] | None
    data_start: int


def read_header(file: Readable) -> Header:
    """The header of the safetensors ``file``: two reads (the length, then the JSON). Every entry is
    checked to lie inside the data (as far as the file's size is known)."""
    name = file.name
    head = file.read(0, 8)
    if len(head) != 8:
        raise CheckpointError(
            f"{name}: not a safetensors file (shorter than the 8 bytes of its header length)"
        )
    (length,) = struct.unpack("<Q", head)
    if not 2 <= length <= MAX_HEADER:
        raise CheckpointError(
            f"{name}: not a safetensors file (a header length of {length} bytes; the format allows 2 to "
            f"{MAX_HEADER})"
        )
    cut_short = f"{name}: the safetensors header is cut short (the file is shorter than {8 + length} bytes)"
    # where the size is known, checked before the read: a Hub file would be asked for up to 100 MB in vain
    if file.size is not None and file.size < 8 + length:
        raise CheckpointError(cut_short)
    raw = file.read(8, 8 + length)
    if len(raw) != length:
        raise CheckpointError(cut_short)
    try:
        parsed = json.loads(raw)
    except ValueError as exc:  # UnicodeDecodeError included
        raise CheckpointError(f"{name}: a corrupt safetensors header ({exc})") from None
    if not isinstance(parsed, dict):
        raise CheckpointError(f"{name}: a corrupt safetensors header (not a JSON object)")
    metadata = parsed.pop("__metadata__", None)
    if metadata is not None and not isinstance(metadata, dict):
        raise CheckpointError(f"{name}: a corrupt safetensors header (__metadata__ is not an object)")
    data_size = None if file.size is None else file.size - 8 - length
    tensors = {key: _entry(entry, key, name, data_size) for key, entry in parsed.items()}
    return Header(file, tensors, metadata, 8 + length)


def _entry(entry: object, key: str, name: str, data_size: int | None) -> TensorInfo:
    def whole(x: object) -> bool:
        return isinstance(x, int) and not isinstance(x, bool) and x >= 0

    dtype = entry.get("dtype") if isinstance(entry, dict) else None
    shape = entry.get("shape") if isinstance(entry, dict) else None
    offsets = entry.get("data_offsets") if isinstance(entry, dict) else None
    if (
        not isinstance(dtype, str)
        or not isinstance(shape, list)
        or not all(whole(n) for n in shape)
        or not isinstance(offsets, list)
        or len(offsets) != 2
        or not all(whole(n) for n in offsets)
    ):
        raise CheckpointError(f"{name}: the header entry of {key} is malformed ({entry!r:.200})")
    begin, end = offsets
    if begin > end or (data_size is not None and end > data_size):
        held = "" if data_size is None else f" of the {data_size} the file holds"
        raise CheckpointError(
            f"{name}: {key} lies outside the file (its data_offsets are bytes {begin} to {end}{held}); the "
            "file is cut short or corrupt"
        )
    return TensorInfo(dtype, tuple(shape), begin, end)


def read_tensors(header: Header, keys: Iterable[str]) -> dict[str, _F64]:
    """Tensors ``keys`` of the file as float64, reading only their bytes (neighbours closer than
    :data:`_MERGE_GAP` in one range)."""
    name = header.file.name
    wanted = list(dict.fromkeys(keys))
    missing = [k for k in wanted if k not in header.tensors]
    if missing:
        raise CheckpointError(f"{name} has no tensor {', '.join(missing)}")
    ordered = sorted(wanted, key=lambda k: header.tensors[k].begin)
    out: dict[str, _F64] = {}
    group: list[str] = []
    for key in [*ordered, ""]:
        if group and (not key or header.tensors[key].begin - header.tensors[group[-1]].end > _MERGE_GAP):
            lo = header.tensors[group[0]].begin
            hi = max(header.tensors[k].end for k in group)
            data = header.file.read(header.data_start + lo, header.data_start + hi)
            for k in group:
                t = header.tensors[k]
                out[k] = _decode(t, data[t.begin - lo : t.end - lo], k, name)
            group = []
        if key:
            group.append(key)
    return out


def _decode(info: TensorInfo, data: bytes, key: str, name: str) -> _F64:
    """A tensor's bytes (little-endian) as float64. BF16 is the upper 16 bits of a float32, so widening it
    is a shift, exact."""
    dtype = _DTYPES.get(info.dtype)
    if dtype is None:
        raise CheckpointError(f"{name}: {key} is {info.dtype}; docvec reads BF16, F16, F32 and F64 tensors")
    count = math.prod(info.shape)
    if len(data) != count * np.dtype(dtype).itemsize:
        raise CheckpointError(
            f"{name}: {key} holds {len(data)} bytes, not {count} {info.dtype} values ({list(info.shape)})"
        )
    raw = np.frombuffer(data, dtype)
    values = (raw.astype(np.uint32) << 16).view(np.float32) if info.dtype == "BF16" else raw
    return values.astype(np.float64).reshape(info.shape)


def copy_without(
    header: Header, out: Path, drop: set[str], rename: Callable[[str], str] = lambda key: key
) -> bool:
    """Write the file of ``header`` without the tensors ``drop`` to ``out``, each kept one under the name
    ``rename`` gives it, one chunk of at most 64 MiB in memory at a time; False (and no file) when no tensor
    is left."""
    kept = sorted(
        ((k, t) for k, t in header.tensors.items() if k not in drop), key=lambda kt: (kt[1].begin, kt[1].end)
    )
    if not kept:
        return False
    entries: dict[str, Any] = {"__metadata__": header.metadata} if header.metadata else {}
    offset = 0
    for key, t in kept:
        entries[rename(key)] = {
            "dtype": t.dtype,
            "shape": list(t.shape),
            "data_offsets": [offset, offset + t.end - t.begin],
        }
        offset += t.end - t.begin
    raw = json.dumps(entries, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)  # the data starts 8-byte aligned, as the safetensors writer does
    with out.open("wb") as dst:
        dst.write(struct.pack("<Q", len(raw)) + raw)
        for _, t in kept:
            pos, stop = header.data_start + t.begin, header.data_start + t.end
            while pos < stop:
                chunk = header.file.read(pos, min(stop, pos + _COPY_CHUNK))
                if not chunk:
                    raise CheckpointError(f"{header.file.name}: cut short while copying it")
                dst.write(chunk)
                pos += len(chunk)
    return True


def read_weight_map(path: Path, name: str) -> dict[str, str]:
    """The ``weight_map`` of a sharded checkpoint's index (``model.safetensors.index.json``, here at
    ``path``, named ``name`` in messages): tensor name -> shard file."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:  # UnicodeDecodeError included
        raise CheckpointError(f"{name}: not readable JSON ({exc})") from None
    weight_map = data.get("weight_map") if isinstance(data, dict) else None
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise CheckpointError(
            f"{name}: not a safetensors index (no weight_map of tensor names to shard files)"
        )
    return weight_map


# ----------------------------------------------------------------------------------------- the head's tensors

# the head's own weight and bias; ``base_layer`` is where PEFT keeps them in a model saved with its LoRA
_BASE_KEY = re.compile(rf"(?:^|\.){_PROJECTOR}(?:\.base_layer)?\.(weight|bias)$")
# its LoRA factors (prefix, A or B, task scope, weight or bias): ``lora_A.weight``,
# ``lora_A.retrieval.weight``, ``lora_A.default.retrieval.weight``
_LORA_KEY = re.compile(rf"(?:(.*)\.)?({_PROJECTOR})\.lora_([AB])\.(?:(.+)\.)?(weight|bias)")
#: the name PEFT gives an adapter loaded without one: no task
_PEFT_ADAPTER_NAME = "default"
#: what PEFT's PeftModel puts before the model's own module names in an adapter file
_PEFT_PREFIX = "base_model.model."


def is_head_key(key: str) -> bool:
    """Whether tensor ``key`` belongs to the multi-vector head (its weight, bias or LoRA factors)."""
    return any(p in PROJECTORS for p in key.split("."))


@dataclass(frozen=True)
class TensorRef:
    """One tensor of a checkpoint: its file (as the caller names it) and its key."""

    file: str
    key: str

    def __str__(self) -> str:
        return f"{self.key} in {self.file}"


@dataclass(frozen=True)
class Lora:
    """The head's LoRA factors for one task (``task`` None: a single-task adapter's, named without one);
    ``module`` is the head's module name, as ``rank_pattern`` and ``alpha_pattern`` are matched against it."""

    task: str | None
    module: str
    a: TensorRef
    b: TensorRef
    b_bias: TensorRef | None


@dataclass
class HeadRefs:
    """The head's tensors among a checkpoint's: every candidate weight and bias, and the LoRA factors by task
    (``None``: no task name) and slot (``A.weight``, ``B.weight``, ``B.bias``, ``A.bias``); ``other_lora``
    counts the LoRA factors of other modules."""

    weights: list[TensorRef] = field(default_factory=list)
    biases: list[TensorRef] = field(default_factory=list)
    lora: dict[str | None, dict[str, TensorRef]] = field(default_factory=dict)
    other_lora: int = 0

    @property
    def found(self) -> bool:
        """Whether any tensor of the head is there."""
        return bool(self.weights or self.biases or self.lora)

    def base(self, where: str) -> tuple[TensorRef, TensorRef]:
        """The one weight and the one bias of the head (``where``: what the checkpoint is, for messages)."""
        for what, found in (("weight", self.weights), ("bias", self.biases)):
            if not found:
                raise CheckpointError(
                    f"{where}: no tensor is the multi-vector head's {what} ("
                    + " or ".join(f"{p}.{what}" for p in PROJECTORS)
                    + f" under any prefix, or PEFT's NAME.base_layer.{what})"
                )
            if len(found) > 1:
                listed = ", ".join(str(r) for r in found)
                raise CheckpointError(
                    f"{where}: {len(found)} tensors are the multi-vector head's {what}: {listed}"
                )
        return self.weights[0], self.biases[0]

    def lora_for(self, task: str) -> Lora | None:
        """The head's LoRA factors for ``task`` (a single-task adapter's, whatever ``task``); None if none."""
        if not self.lora:
            return None
        refs = [r for group in self.lora.values() for r in group.values()]
        where = ", ".join(sorted({r.file for r in refs}))
        tasks = sorted(str(t) for t in self.lora)
        if None in self.lora and len(self.lora) > 1:
            raise CheckpointError(
                f"{where}: the head's LoRA has factors both with and without a task name "
                f"({', '.join(tasks)}); docvec cannot tell which to merge"
            )
        chosen = None if None in self.lora else task
        group = self.lora.get(chosen)
        if group is None:
            factors = ", ".join(sorted(r.key for r in refs if ".lora_A." in r.key))
            raise TaskNotFoundError(
                f"{where}: the head's LoRA has the tasks {', '.join(tasks)}, not {task!r} ({factors})"
            )
        if "A.bias" in group:  # LoRA's A has no bias: a file with one holds something else
            raise CheckpointError(
                f"{group['A.bias']}: not a LoRA factor docvec can merge (lora_A has no bias)"
            )
        for slot in ("A.weight", "B.weight"):
            if slot not in group:
                raise CheckpointError(f"{next(iter(group.values()))} has no lora_{slot} beside it")
        a = group["A.weight"]
        m = _LORA_KEY.fullmatch(a.key)
        assert m is not None  # it was sorted in by this pattern
        prefix = f"{m.group(1)}." if m.group(1) else ""
        module = f"{prefix}{m.group(2)}".removeprefix(_PEFT_PREFIX)
        return Lora(chosen, module, a, group["B.weight"], group.get("B.bias"))


def find_head_tensors(entries: Iterable[tuple[str, str]]) -> HeadRefs:
    """Sort the head's tensors out of ``entries`` (file, tensor key: every tensor of the checkpoint)."""
    refs = HeadRefs()
    for file, key in entries:
        if not is_head_key(key):
            refs.other_lora += "lora_A" in key.split(".")
            continue
        ref = TensorRef(file, key)
        if m := _BASE_KEY.search(key):
            (refs.weights if m.group(1) == "weight" else refs.biases).append(ref)
        elif m := _LORA_KEY.fullmatch(key):
            _, _, factor, scope, kind = m.groups()
            task = ".".join(p for p in (scope or "").split(".") if p != _PEFT_ADAPTER_NAME) or None
            group = refs.lora.setdefault(task, {})
            slot = f"{factor}.{kind}"
            if slot in group:
                raise CheckpointError(f"{file}: {key} repeats {group[slot]}")
            group[slot] = ref
        else:
            raise CheckpointError(
                f"{file}: {key} is a part of the multi-vector head docvec cannot merge (it knows the linear "
                "layer, PEFT's base_layer of it and its LoRA factors lora_A / lora_B)"
            )
    return refs


# ------------------------------------------------------------------------------------------------ the merge


@dataclass(frozen=True)
class LoraScale:
    """What scales the head's LoRA, from its adapter_config.json: s = alpha / r (alpha / sqrt(r) with
    rsLoRA), as PEFT scales."""

    r: int
    alpha: float
    rslora: bool

    @property
    def scale(self) -> float:
        """s."""
        return self.alpha / math.sqrt(self.r) if self.rslora else self.alpha / self.r

    def __str__(self) -> str:
        rule = "alpha/sqrt(r)" if self.rslora else "alpha/r"
        return f"r={self.r}, alpha={self.alpha:g}, s = {rule} = {self.scale:g}"


def read_lora_scale(path: Path, name: str, module: str) -> LoraScale:
    """The LoRA scale for ``module`` (the head's module name) of the adapter_config.json at ``path`` (named
    ``name`` in messages). As in PEFT, the first ``rank_pattern`` / ``alpha_pattern`` key (a regular
    expression) that matches the module's name, or the end of it after a dot, gives its r / lora_alpha."""
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:  # UnicodeDecodeError included
        raise CheckpointError(f"{name}: not readable JSON ({exc})") from None
    if not isinstance(config, dict):
        raise CheckpointError(f"{name}: not an adapter config (not a JSON object)")
    r = _for_module(config, "rank_pattern", module, config.get("r"), name)
    alpha = _for_module(config, "alpha_pattern", module, config.get("lora_alpha"), name)
    rslora = config.get("use_rslora", False)
    if not isinstance(r, int) or isinstance(r, bool) or r <= 0:
        raise CheckpointError(f"{name}: the LoRA rank r of {module} is not a positive integer: {r!r}")
    if not isinstance(alpha, (int, float)) or isinstance(alpha, bool) or not math.isfinite(alpha):
        raise CheckpointError(f"{name}: lora_alpha of {module} is not a number: {alpha!r}")
    if not isinstance(rslora, bool):
        raise CheckpointError(f"{name}: use_rslora is not true or false: {rslora!r}")
    return LoraScale(r, float(alpha), rslora)


def _for_module(config: dict[str, Any], patterns_key: str, module: str, default: object, name: str) -> object:
    patterns = config.get(patterns_key) or {}
    if not isinstance(patterns, dict):
        raise CheckpointError(f"{name}: {patterns_key} is not a mapping of module patterns to values")
    for pattern, value in patterns.items():
        try:
            # PEFT's get_pattern_key: re.match(rf"(.*\.)?({key})$", module name), first hit wins
            if re.match(rf"(.*\.)?({pattern})$", module):
                return value
        except re.error as exc:
            raise CheckpointError(
                f"{name}: {patterns_key} has a pattern that is no regex: {pattern!r} ({exc})"
            ) from None
    return default


@dataclass(frozen=True)
class MergedHead:
    """The head, LoRA merged in: ``weight`` [dim, width] and ``bias`` [dim], float32, and what they were
    made from (``config``: the name of the adapter_config.json the scale came from)."""

    weight: _F32
    bias: _F32
    base: TensorRef
    lora: Lora | None = None
    scale: LoraScale | None = None
    config: str | None = None

    @property
    def kind(self) -> str | None:
        """The head file's kind: :data:`docvec._model._head.COLPALI` for a ColQwen's (colpali-engine's
        ``custom_text_proj``, ``embedding_proj_layer`` as transformers' ColPali classes and tomoro's
        checkpoints name it), ``None`` for jina-embeddings-v4's ``multi_vector_projector``."""
        return None if "multi_vector_projector" in self.base.key.split(".") else COLPALI

    def describe(self, show: Callable[[str], str] = str) -> str:
        """What it was made from, in a line (``show``: how to name a file in it)."""
        text = f"{self.base.key} ({show(self.base.file)})"
        if self.lora is None or self.config is None:
            return text
        label = "LoRA" if self.lora.task is None else f"task {self.lora.task!r}"
        with_bias = f" and {self.lora.b_bias.key}" if self.lora.b_bias is not None else ""
        return (
            f"{text}; {label} from {show(self.lora.a.file)} merged ({self.lora.a.key}, lora_B{with_bias}; "
            f"W + s·B·A, {self.scale} from {show(self.config)})"
        )


def build_head(
    refs: HeadRefs,
    task: str,
    *,
    where: str,
    header: Callable[[str], Header],
    adapter_config: Callable[[str], tuple[Path, str]],
) -> MergedHead:
    """The head of ``refs``, with its LoRA for ``task`` merged in.

    ``where`` names the checkpoint in messages; ``header`` gives the header of a file ``refs`` names, and
    ``adapter_config`` the adapter_config.json (local path, name for messages) for the LoRA factors in a
    file. Shapes are checked against the headers before any tensor's bytes are read; the sums are in float64.
    """
    w_ref, b_ref = refs.base(where)
    lora = refs.lora_for(task)
    w, b = _info(header, w_ref), _info(header, b_ref)
    if len(w.shape) != 2 or b.shape != (w.shape[0],):
        raise CheckpointError(
            f"{w_ref.file}: {w_ref.key} {list(w.shape)} and {b_ref.key} {list(b.shape)} are not a linear "
            "layer's weight [dim, width] and bias [dim]"
        )
    dim, width = w.shape
    wanted = [w_ref, b_ref]
    scale = config_name = None
    if lora is not None:
        a, bb = _info(header, lora.a), _info(header, lora.b)
        if len(a.shape) != 2 or len(bb.shape) != 2 or a.shape[1] != width or bb.shape != (dim, a.shape[0]):
            raise CheckpointError(
                f"{lora.a.file}: the LoRA factors {lora.a.key} {list(a.shape)} and {lora.b.key} "
                f"{list(bb.shape)} do not fit the head's weight {list(w.shape)} (lora_A [r, width], lora_B "
                "[dim, r])"
            )
        path, config_name = adapter_config(lora.a.file)
        scale = read_lora_scale(path, config_name, lora.module)
        if a.shape[0] != scale.r:
            raise CheckpointError(
                f"{lora.a.file}: {lora.a.key} has rank {a.shape[0]}, but r={scale.r} in {config_name}"
            )
        wanted += [lora.a, lora.b]
        if lora.b_bias is not None:
            bias_b = _info(header, lora.b_bias)
            if bias_b.shape != (dim,):
                raise CheckpointError(f"{lora.b_bias}: {list(bias_b.shape)}, not the head's bias [{dim}]")
            wanted.append(lora.b_bias)
    values: dict[TensorRef, _F64] = {}
    for file in dict.fromkeys(r.file for r in wanted):
        keys = [r.key for r in wanted if r.file == file]
        values.update({TensorRef(file, k): v for k, v in read_tensors(header(file), keys).items()})
    weight, bias = values[w_ref], values[b_ref]
    if lora is not None and scale is not None:
        weight = weight + scale.scale * (values[lora.b] @ values[lora.a])
        if lora.b_bias is not None:
            bias = bias + scale.scale * values[lora.b_bias]
    return MergedHead(weight.astype(np.float32), bias.astype(np.float32), w_ref, lora, scale, config_name)


def _info(header: Callable[[str], Header], ref: TensorRef) -> TensorInfo:
    info = header(ref.file).tensors.get(ref.key)
    if info is None:
        raise CheckpointError(f"{ref.file} has no tensor {ref.key}")
    return info
