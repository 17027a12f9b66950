"""The offline test models end to end: a random-weight checkpoint and the GGUFs converted from it (with
the multi-vector head, ``multivector-head.gguf``, beside them for the architecture that has one).

One per family docvec supports (:data:`docvec._model._registry.TINY_ARCHES`): ``qwen2.5-vl``, the default,
stands in for jina-embeddings-v4; ``qwen3-vl`` for Qwen3-VL-Embedding; ``qwen3-vl-reranker`` for
Qwen3-VL-Reranker (the same random Qwen3-VL, converted as a reranker: its head's ``yes`` and ``no`` rows
become the GGUF's classifier); ``colqwen3`` for the ColQwen3 retrievers (Qwen3-VL and colpali-engine's
``custom_text_proj``, exported to the head file); ``colqwen3.5`` for the VultronRetriever models (Qwen3.5,
its linear-attention layers included, and the same head)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from .._errors import ToolError
from .._model._files import ModelFiles
from .._model._registry import TINY_ARCH, TINY_STAMP, find_tiny_model, tiny_arch, tiny_stamp
from ._convert import OutType, convert_checkpoint
from ._toolchain import LlamaCppSource

__all__ = ["build_tiny_model", "temper_answers"]

log = logging.getLogger("docvec")


def build_tiny_model(
    out_dir: Path, *, cache_dir: Path, seed: int = 0, outtype: OutType = "f16", arch: str = TINY_ARCH
) -> ModelFiles:
    """Build (or reuse) the tiny random-weight model of ``arch`` under ``out_dir``: ``hf/`` plus two GGUFs,
    and for ``qwen2.5-vl`` and the ColQwens the multi-vector head (``multivector-head.gguf``, exported from
    the checkpoint by the conversion).

    Reused when ``out_dir`` already holds a build with the same seed, type and architecture, so the demo
    and the tests pay for it once. An unknown ``arch`` is a :class:`~docvec.ModelNotFoundError`.
    """
    arch = arch.lower()
    base, has_head = tiny_arch(arch)
    try:
        from ._tiny_checkpoint import CheckpointGeometry, build_checkpoint
        from ._tiny_qwen3vl import ColQwen3Geometry, Qwen3VLGeometry
        from ._tiny_qwen25vl import Qwen25VLGeometry
        from ._tiny_qwen35 import ColQwen35Geometry
    except ImportError as e:
        raise ToolError(
            f"building the test model needs PyTorch and transformers ({e.name} is missing): "
            "pip install 'docvec[tools]'"
        ) from None
    built = find_tiny_model(out_dir, seed=seed, outtype=outtype, arch=arch)
    if built is not None:
        return built
    stamp = out_dir / TINY_STAMP
    source = LlamaCppSource.in_cache(cache_dir)
    for old in out_dir.glob("*.gguf"):
        old.unlink()
    stamp.unlink(missing_ok=True)
    log.info("building the tiny test model in %s", out_dir)
    geometries: dict[str, CheckpointGeometry] = {
        "qwen2.5-vl": Qwen25VLGeometry.tiny(),
        "qwen3-vl": Qwen3VLGeometry.tiny(),
        "qwen3-vl-reranker": Qwen3VLGeometry.tiny(),
        "colqwen3": ColQwen3Geometry.tiny(),
        "colqwen3.5": ColQwen35Geometry.tiny(),
    }
    hf = out_dir / "hf"
    build_checkpoint(hf, source.qwen2_vocab, geometries[arch], seed=seed, cache_dir=cache_dir / "tokenizers")
    reranker = "reranker" in arch
    if reranker:
        temper_answers(hf)
    # a reranker is converted with its classifier rows, as a reranker checkpoint is
    files = convert_checkpoint(hf, out_dir, source=source, name=base, outtype=outtype, reranker=reranker).main
    if has_head and files.head is None:  # the checkpoint was written with one: it must not go missing
        raise ToolError(f"converting the tiny model in {out_dir} gave no multi-vector head")
    stamp.write_text(json.dumps(tiny_stamp(seed, outtype, arch)))
    return files


#: how much closer the tiny reranker's "no" row is moved to its "yes" row (see :func:`temper_answers`)
_ANSWER_TEMPER = 16


def temper_answers(hf: Path) -> None:
    """Move the checkpoint's "no" head row towards its "yes" row, ``_ANSWER_TEMPER`` times closer.

    With random weights the two rows are far apart: every (query, page) margin lies near -18, and every
    score near 1e-8, where a bar of 1e-3 on scores could not fail. Tempered, the margins lie near -1 and
    the scores near 0.25, differing from page to page by 1e-3 to 5e-2: parity on scores and on their order
    means something. The head is tied to the token embeddings, so the row changes there (the one tensor).
    """
    import torch
    from safetensors.torch import load_file, save_file

    vocab = json.loads((hf / "tokenizer.json").read_text(encoding="utf-8"))["model"]["vocab"]
    yes, no = vocab["yes"], vocab["no"]
    index = hf / "model.safetensors.index.json"
    shards = (
        sorted(set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values()))
        if index.is_file()
        else ["model.safetensors"]
    )
    for shard in shards:  # the one holding the head (a larger geometry's checkpoint has several)
        tensors = load_file(hf / shard)
        heads = [n for n in tensors if n.endswith(("embed_tokens.weight", "lm_head.weight"))]
        for name in heads:
            rows = tensors[name].to(torch.float32)
            rows[no] = rows[yes] - (rows[yes] - rows[no]) / _ANSWER_TEMPER
            tensors[name] = rows.to(tensors[name].dtype)
        if heads:
            save_file(tensors, hf / shard, metadata={"format": "pt"})
