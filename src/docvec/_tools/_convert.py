"""Hugging Face checkpoint -> GGUF language model + GGUF mmproj, with the tools users run on real models.

Conversion runs llama.cpp's own ``convert_hf_to_gguf.py`` from the pinned source; quantization calls
llama.cpp's ``llama_model_quantize``. Each output folder is a complete model (one language model, its
mmproj and, when the checkpoint has one, the multi-vector head), so it can be passed to ``--model`` as it
is::

    OUT/jina-v4-BF16.gguf  OUT/mmproj-jina-v4-BF16.gguf      # --outtype
    OUT/multivector-head.gguf                               # the checkpoint's multi_vector_projector
    OUT/Q8_0/jina-v4-Q8_0.gguf  OUT/Q8_0/mmproj-...gguf      # --quantize Q8_0 (mmproj and head hard-linked)

The multi-vector head (jina-embeddings-v4's ``multi_vector_projector``, a linear layer on the last hidden
state) is no part of the Qwen2.5-VL graph: llama.cpp's converter cannot map its tensors and stops on them.
So docvec finds them itself, in every safetensors file of the checkpoint folder (the files the index lists
and any others, one folder level down included: jina-embeddings-v4 keeps its LoRA adapters in
``adapters/``), writes them to :data:`docvec._model._head.FILE_NAME` in float32, and runs the converter on a
view of the folder whose weight files leave them out.

LoRA on the head (keys ``...multi_vector_projector.lora_A[.TASK].weight`` and ``lora_B``, as PEFT and
jina-embeddings-v4's per-task adapters save them) is merged into the exported weight: W + s·B·A, with s =
lora_alpha / r (lora_alpha / sqrt(r) with ``use_rslora``) read from the ``adapter_config.json`` beside the
LoRA file or in the checkpoint folder; without one the conversion is refused, since a guessed scale would
give wrong vectors silently. The bias is kept (plus s·lora_B's bias, when the adapter has one). When the
adapter holds several tasks, ``head_task`` picks one (``retrieval`` by default: the task docvec embeds for,
and the adapter the published text-retrieval GGUFs merged into their language model).
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from .._errors import DocvecError, ToolError
from .._model._files import ModelFiles
from .._model._gguf import GGUFInfo, read_gguf_info
from .._model._head import FILE_NAME as HEAD_FILE
from .._model._head import write_head
from ._toolchain import LlamaCppSource

__all__ = [
    "DEFAULT_HEAD_TASK",
    "OUTTYPES",
    "QUANTS",
    "ConvertedModel",
    "HeadTensors",
    "convert_checkpoint",
    "cpu_has_bf16",
    "default_outtype",
    "export_head",
    "find_head",
]

log = logging.getLogger("docvec")

OutType = Literal["f16", "bf16", "f32"]
OUTTYPES: tuple[str, ...] = ("f16", "bf16", "f32")
#: llama_ftype values of the quantizations docvec offers (llama.h).
QUANTS: dict[str, int] = {"Q8_0": 7, "Q6_K": 18, "Q5_K_M": 17, "Q4_K_M": 15}
#: the LoRA task merged into the head when the adapter holds several (jina-embeddings-v4: retrieval,
#: text-matching, code)
DEFAULT_HEAD_TASK = "retrieval"


@dataclass(frozen=True)
class ConvertedModel:
    """The model folders a conversion produced: the main one, and one per quantization (each with the
    multi-vector head, ``ModelFiles.head``, when the checkpoint had one)."""

    main: ModelFiles
    quantized: dict[str, ModelFiles] = field(default_factory=dict)


def cpu_has_bf16() -> bool:
    """Whether this CPU computes in bf16 natively (x86 AVX512-BF16/AMX, or Arm's BF16 extension)."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return any(f in flags.split() for f in ("avx512_bf16", "amx_bf16", "bf16"))


def default_outtype() -> OutType:
    """BF16 where the CPU has bf16 arithmetic (measured ~1.5x faster than F16 there), else F16."""
    return "bf16" if cpu_has_bf16() else "f16"


def convert_checkpoint(
    hf_dir: Path,
    out_dir: Path,
    *,
    source: LlamaCppSource,
    name: str | None = None,
    outtype: OutType = "f16",
    mmproj_outtype: OutType | None = None,
    quantize: tuple[str, ...] = (),
    threads: int | None = None,
    head_task: str = DEFAULT_HEAD_TASK,
) -> ConvertedModel:
    """Convert a Qwen2.5-VL checkpoint folder into a GGUF language model and mmproj under ``out_dir``, and
    its multi-vector head, when it has one, into ``out_dir/multivector-head.gguf`` (``head_task``: the LoRA
    task merged into the head when its adapter holds several; see the module's docstring).

    A checkpoint without a head converts as before: ``main.head`` is None, and a head file left in
    ``out_dir`` by an earlier conversion is removed (it would belong to other weights).
    """
    if not (hf_dir / "config.json").is_file():
        raise ToolError(f"{hf_dir}: not a Hugging Face checkpoint folder (no config.json)")
    if outtype not in OUTTYPES:
        raise ToolError(f"--outtype must be one of {', '.join(OUTTYPES)}, not {outtype}")
    bad = [q for q in quantize if q not in QUANTS]
    if bad:
        raise ToolError(f"unknown quantization {', '.join(bad)}; choose from {', '.join(QUANTS)}")
    name = name or hf_dir.resolve().name
    mm_type = mmproj_outtype or outtype
    # the head first: a LoRA that cannot be merged stops the run before minutes of conversion
    head = find_head(hf_dir, task=head_task)
    out_dir.mkdir(parents=True, exist_ok=True)
    lm = out_dir / f"{name}-{outtype.upper()}.gguf"
    mm = out_dir / f"mmproj-{name}-{mm_type.upper()}.gguf"
    with _converter_view(hf_dir, out_dir) as view:
        lm_info = _run_converter(source, view, lm, outtype, mmproj=False)
        _run_converter(source, view, mm, mm_type, mmproj=True)
    head_path: Path | None = None
    if head is None:
        (out_dir / HEAD_FILE).unlink(missing_ok=True)
    else:
        head_path = out_dir / HEAD_FILE
        _write_checked_head(head, head_path, lm_info)
    main = ModelFiles(lm, mm, head_path)
    quantized = {}
    for q in quantize:
        qdir = out_dir / q
        qdir.mkdir(exist_ok=True)
        qlm = qdir / f"{name}-{q}.gguf"
        _quantize(lm, qlm, q, threads or os.cpu_count() or 1)
        qhead = None
        if head_path is None:
            (qdir / HEAD_FILE).unlink(missing_ok=True)
        else:
            qhead = _link(head_path, qdir / HEAD_FILE)
        quantized[q] = ModelFiles(qlm, _link(mm, qdir / mm.name), qhead)
    return ConvertedModel(main, quantized)


def _write_checked_head(head: HeadTensors, path: Path, lm: GGUFInfo) -> None:
    width = lm.embedding_length
    if width is not None and head.width != width:
        raise ToolError(
            f"the multi-vector head ({head.source}) takes {head.width}-wide hidden states, but the converted "
            f"language model {lm.path.name} gives {width}: it belongs to another model"
        )
    try:
        write_head(path, head.weight, head.bias, source=head.source)
    except DocvecError as e:  # bad shapes, NaN weights: say which checkpoint they came from
        raise ToolError(f"exporting the multi-vector head ({head.source}) failed: {e}") from None


def _run_converter(
    source: LlamaCppSource, hf_dir: Path, out: Path, outtype: str, *, mmproj: bool
) -> GGUFInfo:
    tmp = out.with_name(out.name + ".part")
    cmd = [sys.executable, str(source.converter), str(hf_dir), "--outfile", str(tmp), "--outtype", outtype]
    if mmproj:
        cmd.append("--mmproj")
    log.info("converting %s -> %s", hf_dir, out)
    # NO_LOCAL_GGUF unset: the converter uses the gguf-py it ships with, matching its own code.
    env = {k: v for k, v in os.environ.items() if k != "NO_LOCAL_GGUF"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0 or not tmp.is_file():
        tmp.unlink(missing_ok=True)
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:])
        what = "mmproj" if mmproj else "language model"
        raise ToolError(f"converting {hf_dir} ({what}) failed (exit {proc.returncode}):\n{tail}")
    tmp.replace(out)
    return read_gguf_info(out)  # the converter's output must itself pass docvec's checks


def _quantize(src: Path, dst: Path, quant: str, threads: int) -> None:
    from .._model._native import quantize

    tmp = dst.with_name(dst.name + ".part")
    log.info("quantizing %s -> %s", src, dst)
    try:
        quantize(src, tmp, QUANTS[quant], threads=threads)
    except Exception as e:
        tmp.unlink(missing_ok=True)
        raise ToolError(f"quantizing {src} to {quant} failed: {e}") from e
    tmp.replace(dst)


def _link(src: Path, dst: Path) -> Path:
    dst.unlink(missing_ok=True)
    try:
        os.link(src, dst)
    except OSError:  # another file system: copy instead
        import shutil

        shutil.copyfile(src, dst)
    return dst


# ------------------------------------------------------------------------------------ the multi-vector head

_INDEX = "model.safetensors.index.json"
_PROJECTOR = "multi_vector_projector"
# the head's own weight and bias; ``base_layer`` is where PEFT keeps them in a model saved with its LoRA
_HEAD_KEY = re.compile(rf"(?:^|\.){_PROJECTOR}(?:\.base_layer)?\.(weight|bias)$")
# its LoRA factors: ``lora_A.weight`` (PEFT), ``lora_A.retrieval.weight`` (jina-embeddings-v4's per-task
# adapters), ``lora_A.default.retrieval.weight`` (the same with PEFT's adapter name left in)
_LORA_KEY = re.compile(rf"(?:^|\.){_PROJECTOR}\.lora_([AB])\.(?:(.+)\.)?(weight|bias)$")


@dataclass(frozen=True)
class HeadTensors:
    """A multi-vector head found in a checkpoint, LoRA merged in: ``weight`` [dim, width], ``bias`` [dim],
    float32, and ``source``, what it was made from (recorded in the head file)."""

    weight: npt.NDArray[np.float32]
    bias: npt.NDArray[np.float32]
    source: str

    @property
    def width(self) -> int:
        """The hidden size it takes."""
        return int(self.weight.shape[1])


def export_head(hf_dir: Path, out: Path, *, task: str = DEFAULT_HEAD_TASK) -> Path | None:
    """Write the multi-vector head of the checkpoint in ``hf_dir`` to ``out`` (a head GGUF, see
    :mod:`docvec._model._head`); returns ``out``, or None when the checkpoint has no head."""
    head = find_head(hf_dir, task=task)
    if head is None:
        return None
    return write_head(out, head.weight, head.bias, source=head.source)


def find_head(hf_dir: Path, *, task: str = DEFAULT_HEAD_TASK) -> HeadTensors | None:
    """The multi-vector head of the checkpoint in ``hf_dir``, with its LoRA for ``task`` merged in; None
    when no safetensors file of the folder holds one. Anything that cannot be read or merged unambiguously
    is a :class:`ToolError` that names the file."""
    files = [_Safetensors.open(p) for p in _checkpoint_files(hf_dir)]
    weights: list[tuple[_Safetensors, str]] = []
    biases: list[tuple[_Safetensors, str]] = []
    lora: dict[str | None, dict[str, tuple[_Safetensors, str]]] = {}
    other_lora = 0
    for f in files:
        for key in f.tensors:
            if _PROJECTOR not in key:
                other_lora += int("lora_A" in key)
                continue
            if m := _HEAD_KEY.search(key):
                (weights if m.group(1) == "weight" else biases).append((f, key))
            elif m := _LORA_KEY.search(key):
                factor, scope, kind = m.groups()
                task_name = ".".join(p for p in (scope or "").split(".") if p != "default") or None
                slot = f"{factor}.{kind}"
                group = lora.setdefault(task_name, {})
                if slot in group:
                    raise ToolError(f"{f.path}: {key} repeats {group[slot][1]} in {group[slot][0].path}")
                group[slot] = (f, key)
            else:
                raise ToolError(
                    f"{f.path}: {key} is a part of the multi-vector head docvec cannot merge (it knows the "
                    "linear layer and its LoRA factors lora_A / lora_B)"
                )
    if not weights and not biases and not lora:
        return None
    for what, found in (("weight", weights), ("bias", biases)):
        if len(found) != 1:
            where = ", ".join(f"{k} in {f.path}" for f, k in found) or "none"
            raise ToolError(f"{hf_dir}: expected one {_PROJECTOR} {what}, found {where}")
    (wf, wkey), (bf, bkey) = weights[0], biases[0]
    weight = wf.read(wkey).astype(np.float64)
    bias = bf.read(bkey).astype(np.float64)
    if weight.ndim != 2 or bias.shape != (weight.shape[0],):
        raise ToolError(
            f"{wf.path}: {wkey} {list(weight.shape)} and {bkey} {list(bias.shape)} are not a linear layer's "
            "weight [dim, width] and bias [dim]"
        )
    source = f"{hf_dir.resolve().name}: {wkey} ({wf.path.name})"
    if lora:
        weight, bias, merged = _merge_lora(hf_dir, weight, bias, lora, task)
        source += f"; {merged}"
    if other_lora:
        # the head would then not match the language model the converter writes from the base weights
        log.warning(
            "%s holds LoRA tensors for other modules; the converter does not merge them into the language "
            "model, only the head's LoRA is merged",
            hf_dir,
        )
    return HeadTensors(np.asarray(weight, np.float32), np.asarray(bias, np.float32), source)


def _merge_lora(
    hf_dir: Path,
    weight: npt.NDArray[np.float64],
    bias: npt.NDArray[np.float64],
    lora: dict[str | None, dict[str, tuple[_Safetensors, str]]],
    task: str,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], str]:
    """W + s·B·A (and bias + s·b_B), s from the adapter_config.json; returns them and what was merged."""
    tasks = sorted(lora, key=str)
    if None in lora and len(lora) > 1:
        raise ToolError(f"{hf_dir}: the head has LoRA factors both with and without a task name ({tasks})")
    chosen = None if None in lora else task
    if chosen not in lora:
        names = ", ".join(str(t) for t in tasks)
        raise ToolError(
            f"{hf_dir}: the head's LoRA has the tasks {names}, not '{task}'; choose one with --head-task"
        )
    group = lora[chosen]
    for slot in ("A.weight", "B.weight"):
        if slot not in group:
            f, key = next(iter(group.values()))
            raise ToolError(f"{f.path}: {key} has no lora_{slot} beside it")
    if "A.bias" in group:  # LoRA's A has no bias; a file with one is something else
        f, key = group["A.bias"]
        raise ToolError(f"{f.path}: {key} is not a LoRA factor docvec knows how to merge")
    (af, akey), (bf, bkey) = group["A.weight"], group["B.weight"]
    a = af.read(akey).astype(np.float64)
    b = bf.read(bkey).astype(np.float64)
    rank = a.shape[0] if a.ndim == 2 else -1
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != weight.shape[1] or b.shape != (weight.shape[0], rank):
        raise ToolError(
            f"{af.path}: the LoRA factors {akey} {list(a.shape)} and {bkey} {list(b.shape)} do not fit the "
            f"head's weight {list(weight.shape)} (A [r, width], B [dim, r])"
        )
    config_path, r, alpha, rslora = _adapter_config(hf_dir, af.path)
    if r != rank:
        raise ToolError(f"{config_path}: r is {r}, but {akey} in {af.path} has rank {rank}")
    scale = alpha / math.sqrt(r) if rslora else alpha / r
    weight = weight + scale * (b @ a)
    if "B.bias" in group:
        bbf, bbkey = group["B.bias"]
        bias = bias + scale * bbf.read(bbkey).astype(np.float64)
    label = f"task '{chosen}'" if chosen is not None else "LoRA"
    what = f"alpha/sqrt(r) = {alpha}/sqrt({r})" if rslora else f"alpha/r = {alpha}/{r}"
    try:
        shown = af.path.relative_to(hf_dir)
    except ValueError:
        shown = af.path
    return weight, bias, f"{label} from {shown} merged (W + s·B·A, s = {what})"


def _adapter_config(hf_dir: Path, lora_file: Path) -> tuple[Path, int, float, bool]:
    """The LoRA scale's inputs for the head: (file, r, lora_alpha, use_rslora), from the adapter_config.json
    beside ``lora_file``, else in ``hf_dir``; per-module ``rank_pattern`` / ``alpha_pattern`` entries that
    name the head win, as in PEFT."""
    for path in dict.fromkeys((lora_file.parent / "adapter_config.json", hf_dir / "adapter_config.json")):
        if path.is_file():
            break
    else:
        raise ToolError(
            f"{lora_file} holds LoRA factors for the multi-vector head, but there is no adapter_config.json "
            f"beside it or in {hf_dir}: its lora_alpha and r are needed to merge it (W + alpha/r·B·A); "
            "put the adapter's config there and convert again"
        )
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
        r, alpha = config["r"], config["lora_alpha"]
        for key, value in (config.get("rank_pattern") or {}).items():
            if _names_head(key):
                r = value
        for key, value in (config.get("alpha_pattern") or {}).items():
            if _names_head(key):
                alpha = value
        r, alpha, rslora = int(r), float(alpha), bool(config.get("use_rslora", False))
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ToolError(f"{path}: not an adapter config with r and lora_alpha ({e!r})") from None
    if r <= 0:
        raise ToolError(f"{path}: r must be positive, not {r}")
    return path, r, alpha, rslora


def _names_head(pattern: str) -> bool:
    try:
        return re.fullmatch(rf"(?:.*\.)?{pattern}", _PROJECTOR) is not None
    except re.error:
        return False


def _checkpoint_files(hf_dir: Path) -> list[Path]:
    """Every safetensors file of the checkpoint: those its index lists, then the others in the folder and
    one level down (not in hidden folders), each once."""
    files: dict[Path, None] = {}
    index = hf_dir / _INDEX
    if index.is_file():
        for name in _weight_map(index).values():
            path = hf_dir / name
            if not path.is_file():
                raise ToolError(f"{index} lists {name}, which is not in {hf_dir}")
            files[path] = None
    for path in sorted(hf_dir.glob("*.safetensors")) + sorted(hf_dir.glob("*/*.safetensors")):
        if not any(part.startswith(".") for part in path.relative_to(hf_dir).parts):
            files[path] = None
    return list(files)


def _weight_map(index: Path) -> dict[str, str]:
    try:
        weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
        if not isinstance(weight_map, dict):
            raise TypeError("weight_map is not a mapping")
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ToolError(f"{index}: not a safetensors index ({e!r})") from None
    return {str(k): str(v) for k, v in weight_map.items()}


@contextlib.contextmanager
def _converter_view(hf_dir: Path, out_dir: Path) -> Iterator[Path]:
    """``hf_dir`` as llama.cpp's converter may read it: the folder itself when none of the weight files the
    converter reads (``model*.safetensors`` or the index's) holds head tensors; else a temporary folder of
    the same name under ``out_dir`` with links to everything else, those files rewritten without them
    (streamed: one tensor's bytes at a time) and the index to match."""
    index = hf_dir / _INDEX
    weight_map = _weight_map(index) if index.is_file() else {}
    parts = (
        [hf_dir / n for n in dict.fromkeys(weight_map.values())]
        if weight_map
        else sorted(p for p in hf_dir.glob("model*.safetensors"))
    )
    dirty = {}
    for path in parts:
        f = _Safetensors.open(path)
        drop = {k for k in f.tensors if _PROJECTOR in k}
        if drop:
            dirty[path.name] = (f, drop)
    if not dirty:
        yield hf_dir
        return
    tmp = Path(tempfile.mkdtemp(prefix=".convert-", dir=out_dir))
    try:
        # the same folder name: the converter names the model after it
        view = tmp / hf_dir.resolve().name
        view.mkdir()
        for entry in hf_dir.iterdir():
            if entry.name not in dirty and entry.name != _INDEX:
                (view / entry.name).symlink_to(entry.resolve())
        kept_files = set()
        for name, (f, drop) in dirty.items():
            if f.copy_without(view / name, drop):
                kept_files.add(name)
        if weight_map:
            kept = {
                k: v
                for k, v in weight_map.items()
                if _PROJECTOR not in k and (v not in dirty or v in kept_files)
            }
            raw = json.loads(index.read_text(encoding="utf-8"))
            raw["weight_map"] = kept
            (view / _INDEX).write_text(json.dumps(raw, indent=2), encoding="utf-8")
        log.info("the converter reads %s: the checkpoint without its multi-vector head", view)
        yield view
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# safetensors: an 8-byte little-endian header length, a JSON header {name: {dtype, shape, data_offsets}},
# then the data. Read here rather than with the safetensors package so that BF16 (which numpy lacks) needs
# no PyTorch, and so that a file can be rewritten without some tensors one tensor at a time.
_ST_DTYPES: dict[str, str] = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "<u2"}
_MAX_HEADER = 100 << 20


@dataclass(frozen=True)
class _Safetensors:
    path: Path
    tensors: dict[str, dict[str, Any]]
    metadata: dict[str, str] | None
    data_start: int

    @classmethod
    def open(cls, path: Path) -> _Safetensors:
        try:
            with path.open("rb") as f:
                head = f.read(8)
                if len(head) != 8:
                    raise ValueError("shorter than a header")
                (n,) = struct.unpack("<Q", head)
                if n > _MAX_HEADER:
                    raise ValueError(f"a header of {n} bytes")
                raw = f.read(n)
                if len(raw) != n:
                    raise ValueError("the header is cut short")
            header = json.loads(raw)
            if not isinstance(header, dict):
                raise ValueError("the header is not a JSON object")
            metadata = header.pop("__metadata__", None)
            size = path.stat().st_size
            for name, info in header.items():
                begin, end = info["data_offsets"]
                if not 0 <= begin <= end <= size - 8 - n:
                    raise ValueError(f"{name} lies outside the file")
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise ToolError(f"{path}: not a readable safetensors file ({e})") from None
        return cls(path, header, metadata, 8 + n)

    def read(self, key: str) -> npt.NDArray[np.float32]:
        """One tensor, as float32."""
        info = self.tensors[key]
        dtype = _ST_DTYPES.get(info["dtype"])
        if dtype is None:
            raise ToolError(f"{self.path}: {key} is {info['dtype']}; the head must be F32, F16, BF16 or F64")
        begin, end = info["data_offsets"]
        with self.path.open("rb") as f:
            f.seek(self.data_start + begin)
            data = np.frombuffer(f.read(end - begin), dtype)
        shape = tuple(int(d) for d in info["shape"])
        if data.size != math.prod(shape):
            raise ToolError(f"{self.path}: {key} holds {data.size} numbers, not {shape}")
        if info["dtype"] == "BF16":  # the upper half of a float32
            return (data.astype(np.uint32) << 16).view(np.float32).reshape(shape)
        return data.astype(np.float32).reshape(shape)

    def copy_without(self, out: Path, drop: set[str]) -> bool:
        """Write this file without the tensors ``drop`` to ``out``; False (and no file) when none is left."""
        kept = sorted(
            ((k, v) for k, v in self.tensors.items() if k not in drop), key=lambda kv: kv[1]["data_offsets"]
        )
        if not kept:
            return False
        header: dict[str, Any] = {"__metadata__": self.metadata} if self.metadata else {}
        offset = 0
        for name, info in kept:
            begin, end = info["data_offsets"]
            header[name] = {**info, "data_offsets": [offset, offset + end - begin]}
            offset += end - begin
        raw = json.dumps(header, separators=(",", ":")).encode()
        raw += b" " * (-len(raw) % 8)  # the data starts 8-byte aligned, as the safetensors writer does
        with self.path.open("rb") as src, out.open("wb") as dst:
            dst.write(struct.pack("<Q", len(raw)) + raw)
            for _, info in kept:
                begin, end = info["data_offsets"]
                src.seek(self.data_start + begin)
                left = end - begin
                while left:
                    chunk = src.read(min(left, 64 << 20))
                    if not chunk:
                        raise ToolError(f"{self.path}: cut short while copying it")
                    dst.write(chunk)
                    left -= len(chunk)
        return True
