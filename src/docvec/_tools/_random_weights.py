"""Random weights for test checkpoints: deterministic, scale-preserving, written as safetensors shards.

Weights are random with scale-preserving widths (linear weights N(0, 1/fan_in), embeddings N(0, 1), biases
N(0, 0.1), norm weights N(1, 0.1)): the attention, MLP, bias and norm-weight paths all change the output,
so a parity test between two implementations notices when one of them gets any of these wrong. Each tensor
is generated from the seed and its name alone, so the same arguments give byte-identical files and memory
stays bounded by one shard.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._fileio import write_json_atomic

__all__ = ["SHARD_BYTES", "TensorSpec", "random_tensor", "tensor_specs", "write_weights"]

#: the largest shard written (the size transformers' save_pretrained uses by default is smaller; this keeps
#: the tiny model in one file and a real geometry in a handful)
SHARD_BYTES = 2 * 1024**3


@dataclass(frozen=True)
class TensorSpec:
    """One tensor to write: its stored name, shape and kind of initialisation."""

    name: str  # as stored in the checkpoint
    shape: tuple[int, ...]
    kind: str  # "embedding", "norm", "bias" or "weight"


def tensor_specs(model: Any, stored_name: Callable[[str], str] = str) -> Iterator[TensorSpec]:
    """Every parameter of ``model`` (built on the meta device), under the name ``stored_name`` gives it in
    the checkpoint, with the kind of initialisation it gets; a tied parameter once."""
    import torch

    seen: set[int] = set()
    for module_name, module in model.named_modules():
        is_norm = "Norm" in type(module).__name__
        is_embedding = isinstance(module, torch.nn.Embedding)
        for param_name, param in module.named_parameters(recurse=False):
            if id(param) in seen:  # a tied lm_head
                continue
            seen.add(id(param))
            name = stored_name(f"{module_name}.{param_name}")
            if is_embedding:
                kind = "embedding"
            elif param_name == "bias":  # a LayerNorm's bias too: a bias, not a scale
                kind = "bias"
            elif is_norm:
                kind = "norm"
            else:
                kind = "weight"
            yield TensorSpec(name, tuple(param.shape), kind)


def random_tensor(spec: TensorSpec, seed: int, dtype: Any) -> Any:
    """The tensor ``spec`` describes, drawn from ``seed`` and its name, in torch ``dtype``."""
    import torch

    key = hashlib.sha256(f"docvec-tiny/{seed}/{spec.name}".encode()).digest()
    generator = torch.Generator().manual_seed(int.from_bytes(key[:8], "little") & (2**63 - 1))
    tensor = torch.empty(spec.shape, dtype=torch.float32)
    if spec.kind == "embedding":
        tensor.normal_(0.0, 1.0, generator=generator)
    elif spec.kind == "norm":
        tensor.normal_(1.0, 0.1, generator=generator)
    elif spec.kind == "bias":
        tensor.normal_(0.0, 0.1, generator=generator)
    else:
        fan_in = 1
        for n in spec.shape[1:]:
            fan_in *= n
        tensor.normal_(0.0, fan_in**-0.5, generator=generator)
    return tensor.to(dtype)


def write_weights(out_dir: Path, specs: list[TensorSpec], seed: int, dtype: Any) -> None:
    """Write the tensors of ``specs`` to ``out_dir`` as ``model.safetensors``, or as shards of at most
    :data:`SHARD_BYTES` with their index, replacing weight files already there."""
    import torch
    from safetensors.torch import save_file

    for stale in [*out_dir.glob("model*.safetensors"), out_dir / "model.safetensors.index.json"]:
        stale.unlink(missing_ok=True)
    itemsize = torch.empty((), dtype=dtype).element_size()
    shards: list[list[TensorSpec]] = [[]]
    shard_bytes = 0
    total = 0
    for spec in specs:
        nbytes = itemsize
        for n in spec.shape:
            nbytes *= n
        if shards[-1] and shard_bytes + nbytes > SHARD_BYTES:
            shards.append([])
            shard_bytes = 0
        shards[-1].append(spec)
        shard_bytes += nbytes
        total += nbytes
    if len(shards) == 1:
        names = ["model.safetensors"]
    else:
        names = [f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors" for i in range(len(shards))]
    weight_map: dict[str, str] = {}
    for file_name, shard in zip(names, shards, strict=True):
        tensors = {spec.name: random_tensor(spec, seed, dtype) for spec in shard}
        save_file(tensors, str(out_dir / file_name), metadata={"format": "pt"})
        del tensors
        weight_map.update({spec.name: file_name for spec in shard})
    if len(shards) > 1:
        write_json_atomic(
            out_dir / "model.safetensors.index.json",
            {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))},
        )
