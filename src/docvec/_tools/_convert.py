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
jina-embeddings-v4's per-task adapters save them) is merged into the exported weight: W + s·B·A, with s
as PEFT computes it from the ``adapter_config.json`` beside the LoRA file or in the checkpoint folder;
without one the conversion is refused, since a guessed scale would give wrong vectors silently. The bias is
kept (plus s·lora_B's bias, when the adapter has one). When the adapter holds several tasks, ``head_task``
picks one (``retrieval`` by default: the task docvec embeds for, and the adapter the published
text-retrieval GGUFs merged into their language model). Finding, reading and merging are done in
:mod:`docvec._tools._safetensors`, which ``docvec models pull`` (:mod:`docvec._tools._pull`) shares: a
checkpoint gives the same head either way.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
import numpy.typing as npt

from .._errors import CheckpointError, DocvecError, TaskNotFoundError, ToolError
from .._model._files import ModelFiles
from .._model._gguf import GGUFInfo, read_gguf_info
from .._model._head import FILE_NAME as HEAD_FILE
from .._model._head import write_head
from ._safetensors import (
    Header,
    LocalFile,
    build_head,
    copy_without,
    find_head_tensors,
    is_head_key,
    read_header,
    read_weight_map,
)
from ._toolchain import LlamaCppSource

__all__ = [
    "DEFAULT_HEAD_TASK",
    "MMPROJ_OUTTYPES",
    "OUTTYPES",
    "QUANTS",
    "ConvertedModel",
    "HeadTensors",
    "convert_checkpoint",
    "cpu_has_bf16",
    "default_outtype",
    "export_head",
    "find_head",
    "is_reranker_checkpoint",
]

log = logging.getLogger("docvec")

OutType = Literal["f16", "bf16", "f32"]
OUTTYPES: tuple[str, ...] = ("f16", "bf16", "f32")
#: the vision encoder may also be written as Q8_0 (the converter's own q8_0 type, which mtmd loads):
#: pooled cosine 0.99983-0.99986 against the F16 mmproj on the tiny models of both families
MmprojType = Literal["f16", "bf16", "f32", "q8_0"]
MMPROJ_OUTTYPES: tuple[str, ...] = (*OUTTYPES, "q8_0")
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
    mmproj_outtype: MmprojType | None = None,
    quantize: tuple[str, ...] = (),
    threads: int | None = None,
    head_task: str = DEFAULT_HEAD_TASK,
    reranker: bool | None = None,
) -> ConvertedModel:
    """Convert a Qwen2.5-VL checkpoint folder into a GGUF language model and mmproj under ``out_dir``, and
    its multi-vector head, when it has one, into ``out_dir/multivector-head.gguf`` (``head_task``: the LoRA
    task merged into the head when its adapter holds several; see the module's docstring).

    A checkpoint without a head converts as before: ``main.head`` is None, and a head file left in
    ``out_dir`` by an earlier conversion is removed (it would belong to other weights).

    ``reranker`` True converts a reranker (Qwen3-VL-Reranker): the converter writes the language model
    rank-pooled, with the head's ``yes`` and ``no`` rows as its classifier (``cls.output.weight``), which
    is what :class:`~docvec.Reranker` scores with; ``None`` takes a checkpoint whose folder name or README
    title names a reranker for one (:func:`is_reranker_checkpoint`).
    """
    if not (hf_dir / "config.json").is_file():
        raise ToolError(f"{hf_dir}: not a Hugging Face checkpoint folder (no config.json)")
    if outtype not in OUTTYPES:
        raise ToolError(f"--outtype must be one of {', '.join(OUTTYPES)}, not {outtype}")
    if mmproj_outtype is not None and mmproj_outtype not in MMPROJ_OUTTYPES:
        raise ToolError(f"--mmproj-outtype must be one of {', '.join(MMPROJ_OUTTYPES)}, not {mmproj_outtype}")
    bad = [q for q in quantize if q not in QUANTS]
    if bad:
        raise ToolError(f"unknown quantization {', '.join(bad)}; choose from {', '.join(QUANTS)}")
    name = name or hf_dir.resolve().name
    mm_type = mmproj_outtype or outtype
    # the head first: a LoRA that cannot be merged stops the run before minutes of conversion
    head = find_head(hf_dir, task=head_task)
    if reranker is None:
        reranker = is_reranker_checkpoint(hf_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    lm = out_dir / f"{name}-{outtype.upper()}.gguf"
    mm = out_dir / f"mmproj-{name}-{mm_type.upper()}.gguf"
    with _converter_view(hf_dir, out_dir, reranker=reranker) as view:
        lm_info = _run_converter(source, view, lm, outtype, mmproj=False, flags=_language_model_flags(view))
        _run_converter(source, view, mm, mm_type, mmproj=True)
    if reranker and not lm_info.is_reranker:
        raise ToolError(
            f"converting {hf_dir} as a reranker gave no classifier: its config.json is not a Qwen3 or "
            "Qwen3-VL checkpoint the converter makes rerankers of"
        )
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
        write_head(path, head.weight, head.bias, source=head.source, kind=head.kind)
    except DocvecError as e:  # bad shapes, NaN weights: say which checkpoint they came from
        raise ToolError(f"exporting the multi-vector head ({head.source}) failed: {e}") from None


def _run_converter(
    source: LlamaCppSource,
    hf_dir: Path,
    out: Path,
    outtype: str,
    *,
    mmproj: bool,
    flags: tuple[str, ...] = (),
) -> GGUFInfo:
    tmp = out.with_name(out.name + ".part")
    cmd = [
        sys.executable,
        str(source.converter),
        str(hf_dir),
        "--outfile",
        str(tmp),
        "--outtype",
        outtype,
        *flags,
    ]
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


@dataclass(frozen=True)
class HeadTensors:
    """A multi-vector head found in a checkpoint, LoRA merged in: ``weight`` [dim, width], ``bias`` [dim],
    float32, and ``source``, what it was made from (recorded in the head file)."""

    weight: npt.NDArray[np.float32]
    bias: npt.NDArray[np.float32]
    source: str
    kind: str | None = None  # the head file's kind (see docvec._model._head)

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
    return write_head(out, head.weight, head.bias, source=head.source, kind=head.kind)


def find_head(hf_dir: Path, *, task: str = DEFAULT_HEAD_TASK) -> HeadTensors | None:
    """The multi-vector head of the checkpoint in ``hf_dir``, with its LoRA for ``task`` merged in; None
    when no safetensors file of the folder holds one (see :mod:`docvec._tools._safetensors`). Anything that
    cannot be read or merged unambiguously is a :class:`ToolError` that names the file."""
    with _checkpoint_errors():
        headers = {str(p): read_header(LocalFile(p)) for p in _checkpoint_files(hf_dir)}
        refs = find_head_tensors((name, key) for name, h in headers.items() for key in h.tensors)
        if not refs.found:
            return None
        head = build_head(
            refs,
            task,
            where=str(hf_dir),
            header=headers.__getitem__,
            adapter_config=lambda lora_file: _adapter_config(hf_dir, Path(lora_file)),
        )
    if refs.other_lora:
        # the head would then not match the language model the converter writes from the base weights
        log.warning(
            "%s holds LoRA tensors for other modules; the converter does not merge them into the language "
            "model, only the head's LoRA is merged",
            hf_dir,
        )

    def show(name: str) -> str:
        path = Path(name)
        return str(path.relative_to(hf_dir)) if path.is_relative_to(hf_dir) else name

    return HeadTensors(head.weight, head.bias, f"{hf_dir.resolve().name}: {head.describe(show)}", head.kind)


@contextlib.contextmanager
def _checkpoint_errors() -> Iterator[None]:
    """A checkpoint file that is not as docvec expects, as a :class:`ToolError` that says what to do."""
    try:
        yield
    except TaskNotFoundError as exc:
        raise ToolError(f"{exc}; choose one with --head-task") from None
    except CheckpointError as exc:
        raise ToolError(f"{exc}. Repair or replace that file, then convert again") from None


def _adapter_config(hf_dir: Path, lora_file: Path) -> tuple[Path, str]:
    """The adapter_config.json of the LoRA factors in ``lora_file``: beside it, else in ``hf_dir``."""
    for path in dict.fromkeys((lora_file.parent / "adapter_config.json", hf_dir / "adapter_config.json")):
        if path.is_file():
            return path, str(path)
    raise ToolError(
        f"{lora_file} holds LoRA factors for the multi-vector head, but there is no adapter_config.json "
        f"beside it or in {hf_dir}: its lora_alpha and r are needed to merge it (W + alpha/r·B·A); "
        "put the adapter's config there and convert again"
    )


def _checkpoint_files(hf_dir: Path) -> list[Path]:
    """Every safetensors file of the checkpoint: those its index lists, then the others in the folder and
    one level down (not in hidden folders), each once."""
    files: dict[Path, None] = {}
    index = hf_dir / _INDEX
    if index.is_file():
        for name in read_weight_map(index, str(index)).values():
            path = hf_dir / name
            if not path.is_file():
                raise ToolError(f"{index} lists {name}, which is not in {hf_dir}")
            files[path] = None
    for path in sorted(hf_dir.glob("*.safetensors")) + sorted(hf_dir.glob("*/*.safetensors")):
        if not any(part.startswith(".") for part in path.relative_to(hf_dir).parts):
            files[path] = None
    return list(files)


def is_reranker_checkpoint(hf_dir: Path) -> bool:
    """Whether a checkpoint folder is a reranker's: by its README's title (the model card's first heading,
    ``# Qwen3-VL-Reranker-2B``) when it has one, else by the folder's name. The embedding model's card
    mentions the reranker too, in later headings, so only the title counts; and a card outweighs a name."""
    try:
        lines = (hf_dir / "README.md").read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        lines = []
    title = next((line for line in lines if line.startswith("# ")), None)
    if title is not None:
        return "reranker" in title.lower()
    return "reranker" in hf_dir.resolve().name.lower()


@contextlib.contextmanager
def _converter_view(hf_dir: Path, out_dir: Path, *, reranker: bool = False) -> Iterator[Path]:
    """``hf_dir`` as llama.cpp's converter may read it: the folder itself when it takes it as it is; else a
    temporary folder of the same name under ``out_dir`` with links to everything else and, rewritten:

    - weight files (``model*.safetensors`` or the index's) that hold head tensors, without them, or tensors
      under names the converter does not read (:func:`_converter_names`), renamed (streamed: one tensor's
      bytes at a time), and the index to match;
    - a config.json whose architecture the converter refuses though it converts the same weights under
      another name (:data:`_CONVERTER_ARCHITECTURES`);
    - nothing that makes the converter take an embedding model for a reranker (a README with a
      ``# Qwen3-VL-Reranker`` heading, such a name in the config): it would write a RANK-pooled GGUF;
    - for a ``reranker``, a folder name that makes it take the checkpoint for one (the converter reads
      the folder's name, conversion/qwen.py's ``_is_qwen3_reranker``).
    """
    index = hf_dir / _INDEX
    with _checkpoint_errors():
        weight_map = read_weight_map(index, str(index)) if index.is_file() else {}
        parts = (
            [hf_dir / n for n in dict.fromkeys(weight_map.values())]
            if weight_map
            else sorted(p for p in hf_dir.glob("model*.safetensors"))
        )
        dirty: dict[str, tuple[Header, set[str]]] = {}
        headers = {path.name: read_header(LocalFile(path)) for path in parts}
        stored = _converter_names(k for h in headers.values() for k in h.tensors)
        for name, header in headers.items():
            drop = {k for k in header.tensors if is_head_key(k)}
            if drop or any(stored(k) != k for k in header.tensors):
                dirty[name] = (header, drop)
    config = _converter_config(hf_dir)
    readme = hf_dir / "README.md"
    drop_readme = readme.is_file() and _names_reranker(readme.read_text(encoding="utf-8", errors="replace"))
    name = hf_dir.resolve().name
    if not dirty and config is None and not drop_readme and _names_reranker(name) == reranker:
        yield hf_dir
        return
    tmp = Path(tempfile.mkdtemp(prefix=".convert-", dir=out_dir))
    try:
        # the same folder name (the converter names the model after it), unless it says the wrong kind
        if _names_reranker(name) != reranker:
            name = "Qwen3-VL-Reranker" if reranker else "checkpoint"
        view = tmp / name
        view.mkdir()
        rewritten = {*dirty, _INDEX, *(["config.json"] if config is not None else [])}
        for entry in hf_dir.iterdir():
            if entry.name not in rewritten and not (drop_readme and entry.name == "README.md"):
                (view / entry.name).symlink_to(entry.resolve())
        if config is not None:
            (view / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
        kept_files = set()
        with _checkpoint_errors():
            for name, (header, drop) in dirty.items():
                if copy_without(header, view / name, drop, stored):
                    kept_files.add(name)
        if weight_map:
            kept = {
                stored(k): v
                for k, v in weight_map.items()
                if not is_head_key(k) and (v not in dirty or v in kept_files)
            }
            raw = json.loads(index.read_text(encoding="utf-8"))
            raw["weight_map"] = kept
            (view / _INDEX).write_text(json.dumps(raw, indent=2), encoding="utf-8")
        elif index.is_file():
            (view / _INDEX).symlink_to(index.resolve())
        log.info("the converter reads %s: the checkpoint as the converter takes it", view)
        yield view
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


#: checkpoint architectures the pinned converter refuses, and the name under which it converts the same
#: weights: Qwen3-VL-Embedding's ``Qwen3VLForEmbedding`` is ``Qwen3VLModel`` saved as ``model`` (its
#: official code), which is how ``Qwen3VLForConditionalGeneration`` stores it too (shared notes, qwen3-vl.md);
#: colpali-engine's ``ColQwen3`` is ``Qwen3VLModel`` with its head, which the conversion exports apart
_CONVERTER_ARCHITECTURES = {
    "Qwen3VLForEmbedding": "Qwen3VLForConditionalGeneration",
    "ColQwen3": "Qwen3VLForConditionalGeneration",
    "ColQwen3_5": "Qwen3_5ForConditionalGeneration",
}
#: configs of models whose ``model_type`` is their own but whose fields are another's (vLLM's ColQwen3Config:
#: a Qwen3VLConfig with the head's size, for tomoro-colqwen3-embed's ``colqwen3``), and the type they are
_CONVERTER_MODEL_TYPES = {"colqwen3": "qwen3_vl"}


def _converter_names(keys: Iterable[str]) -> Callable[[str], str]:
    """How the converter must find a checkpoint's tensors named, where it reads a
    ``*ForConditionalGeneration``'s names (``model.language_model.*``, ``model.visual.*``, ``lm_head``):

    - colpali-engine saves its ColQwens as the bare ``Qwen3VLModel`` / ``Qwen3_5Model``: ``language_model.*``
      and ``visual.*`` at the top;
    - transformers' ColPali-style retrieval classes, and tomoro-colqwen3's code, keep the whole model as
      ``vlm``: ``vlm.model.*`` and ``vlm.lm_head`` (vLLM's ColQwen3 loader reads those names);

    any other checkpoint's names stay as they are."""
    keys = list(keys)
    wrapped = any(k.startswith("vlm.") for k in keys)
    bare = any(k.removeprefix("vlm.").startswith("language_model.") for k in keys)
    if not (wrapped or bare):
        return lambda key: key

    def name(key: str) -> str:
        key = key.removeprefix("vlm.") if wrapped else key
        return "model." + key if bare and key.startswith(("language_model.", "visual.")) else key

    return name


#: the converter's options for a language model of these architectures: Qwen3.5's multi-token-prediction
#: layers serve speculative decoding, never an embedding, and the converter asserts on a checkpoint without
#: them (a ColQwen3.5's) unless told to leave them out
_CONVERTER_FLAGS = {"Qwen3_5ForConditionalGeneration": ("--no-mtp",)}


def _language_model_flags(view: Path) -> tuple[str, ...]:
    """The converter's options for the language model of the checkpoint (as the converter reads it)."""
    config = json.loads((view / "config.json").read_text(encoding="utf-8"))
    return tuple(f for a in config.get("architectures") or [] for f in _CONVERTER_FLAGS.get(a, ()))


def _converter_config(hf_dir: Path) -> dict[str, object] | None:
    """The checkpoint's config.json as the converter should read it, or None when it reads it as it is."""
    try:
        config = json.loads((hf_dir / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ToolError(f"{hf_dir / 'config.json'}: cannot read it: {e}") from None
    archs = list(config.get("architectures") or [])
    fixed = [_CONVERTER_ARCHITECTURES.get(a, a) for a in archs]
    model_type = config.get("model_type")
    name = str(config.get("_name_or_path", ""))
    if fixed == archs and model_type not in _CONVERTER_MODEL_TYPES and not _names_reranker(name):
        return None
    config["architectures"] = fixed
    if model_type in _CONVERTER_MODEL_TYPES:
        config["model_type"] = _CONVERTER_MODEL_TYPES[model_type]
        config.pop("auto_map", None)  # remote code the converter neither needs nor may run
    if _names_reranker(name):
        config.pop("_name_or_path")
    return dict(config)


def _names_reranker(text: str) -> bool:
    # what the pinned converter's Qwen3 classes read as "this is a reranker" (conversion/qwen.py)
    low = text.lower()
    return "# qwen3-reranker" in low or "# qwen3-vl-reranker" in low or "qwen3-vl-reranker" in low
