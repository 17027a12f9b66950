"""colpali-engine's late-interaction retrievers on a checkpoint: the oracle for the ColQwen families.

:class:`ColQwenReference` runs colpali-engine's own ``ColQwen3`` or ``ColQwen3_5`` (``colpali_engine/models/
qwen3/colqwen3/modeling_colqwen3.py``, ``qwen3_5/colqwen3_5/modeling_colqwen3_5.py``, MIT) on a checkpoint
folder, and builds its inputs as their processors (``processing_colqwen3.py``, ``processing_colqwen3_5.py``:
the same prompts and image processing) do, transcribed here and sharing no code with docvec's profiles or
image preprocessing:

- a page: ``visual_prompt_prefix``, ``<|im_start|>user\\n<|vision_start|><|image_pad|><|vision_end|>Describe
  the image.<|im_end|><|endoftext|>``, its ``<|image_pad|>`` expanded to one per image token (as
  ``Qwen3VLProcessor`` expands it); the image ``convert("RGB")``-ed, then resized and cut into patches by
  transformers' Qwen2-VL image processor with the checkpoint's pixel bounds (its ``smart_resize``: multiples
  of patch x merge = 32 pixels, PIL bicubic);
- a query: ``process_queries``, ``query_prefix`` (empty for ColQwen3) + text + 10 x ``<|endoftext|>`` (the
  query augmentation tokens), tokenized with its control tokens read as such;
- the vectors: the model's forward: every token's last hidden state through ``custom_text_proj``,
  L2-normalised, times the attention mask (all ones here: one input at a time, no padding);
- the score: ``score_multi_vector``, MaxSim: the sum over the query's tokens of each one's best dot product
  with a page's.

The model class is colpali-engine's, loaded from its installed file by path (:func:`colpali_model`): the
package's ``__init__`` imports its processors, which import torchvision, and ``make setup`` installs
colpali-engine without torchvision (the Makefile says why). Loading that file registers colpali-engine's key
renaming for ``qwen3_vl`` checkpoints in transformers (its last lines); ``Qwen3VLForConditionalGeneration``
still loads Qwen3-VL-Embedding's checkpoints whole after it (checked: no missing key).
"""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image

from docvec import ModelError

from ._checkpoint import load_checkpoint

__all__ = [
    "PAGE_PROMPT",
    "QUERY_AUGMENTATION",
    "ColQwenReference",
    "colpali_model",
    "colpali_pooler",
    "maxsim",
]

#: ``ColQwen3Processor.visual_prompt_prefix``
PAGE_PROMPT = (
    "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>Describe the image.<|im_end|><|endoftext|>"
)
#: ``process_queries``' suffix: ``query_augmentation_token * 10``
QUERY_AUGMENTATION = "<|endoftext|>" * 10
#: where colpali-engine keeps each model class, in its package
_MODEL_FILES = {
    "ColQwen3": "models/qwen3/colqwen3/modeling_colqwen3.py",
    "ColQwen3_5": "models/qwen3_5/colqwen3_5/modeling_colqwen3_5.py",
}


def colpali_model(name: str) -> Any:
    """colpali-engine's model class ``name`` (``ColQwen3``, ``ColQwen3_5``), from its installed file."""
    path = _package_root() / _MODEL_FILES[name]
    module_spec = importlib.util.spec_from_file_location(f"_colpali_{path.stem}", path)
    if module_spec is None or module_spec.loader is None:
        raise ModelError(f"cannot load {path}")
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return getattr(module, name)


def colpali_pooler() -> Any:
    """colpali-engine's ``HierarchicalTokenPooler``, from its installed files (its module imports its base
    class through the package, whose ``__init__`` needs torchvision: the package and its subpackages are
    registered empty first, then both files run as they are)."""
    import sys
    import types

    root = _package_root()
    package = "colpali_engine.compression.token_pooling"
    for name in ("colpali_engine", "colpali_engine.compression", package):
        if name not in sys.modules:
            module = types.ModuleType(name)
            module.__path__ = [str(root.joinpath(*name.split(".")[1:]))]
            sys.modules[name] = module
    loaded = None
    for stem in ("base_token_pooling", "hierarchical_token_pooling"):
        path = root / "compression" / "token_pooling" / f"{stem}.py"
        module_spec = importlib.util.spec_from_file_location(f"{package}.{stem}", path)
        if module_spec is None or module_spec.loader is None:
            raise ModelError(f"cannot load {path}")
        loaded = importlib.util.module_from_spec(module_spec)
        sys.modules[module_spec.name] = loaded
        module_spec.loader.exec_module(loaded)
    assert loaded is not None
    return loaded.HierarchicalTokenPooler()


def _package_root() -> Path:
    """colpali-engine's installed folder, found on sys.path without running its ``__init__`` (and past the
    empty package :func:`colpali_pooler` registers, which has no spec)."""
    import importlib.machinery

    spec = importlib.machinery.PathFinder.find_spec("colpali_engine")
    if spec is None or not spec.submodule_search_locations:
        raise ModelError("colpali-engine is not installed (`make setup` installs it)")
    return Path(next(iter(spec.submodule_search_locations)))


def maxsim(query: np.ndarray, page: np.ndarray) -> float:
    """``score_multi_vector`` for one pair: the sum over ``query``'s token vectors of each one's largest
    dot product with ``page``'s (float64)."""
    q, p = np.asarray(query, np.float64), np.asarray(page, np.float64)
    return float((q @ p.T).max(axis=1).sum())


class ColQwenReference:
    """colpali-engine's ``ColQwen3`` or ``ColQwen3_5`` (the one the checkpoint's config names) on a
    checkpoint folder, with its processor's inputs (``ColQwen3Processor``'s and ``ColQwen3_5Processor``'s
    are the same).

    ``dtype`` is the torch dtype the weights are loaded in; ``threads`` sets torch's intra-op thread count
    (a process-wide setting); ``min_pixels`` / ``max_pixels`` bound the resized image area (by default the
    checkpoint's preprocessor_config.json ``size``, as the processor reads it).
    """

    def __init__(
        self,
        hf_dir: Path,
        *,
        dtype: torch.dtype = torch.float32,
        threads: int | None = None,
        min_pixels: int | None = None,
        max_pixels: int | None = None,
    ) -> None:
        import json

        from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

        hf_dir = Path(hf_dir)
        started = time.perf_counter()
        try:
            config = json.loads((hf_dir / "config.json").read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ModelError(f"{hf_dir}: cannot read config.json: {exc}") from exc
        names = [a for a in config.get("architectures") or [] if a in _MODEL_FILES]
        if not names:
            raise ModelError(
                f"{hf_dir}: its config names no colpali-engine model ({', '.join(_MODEL_FILES)})"
            )
        #: the colpali-engine class it runs
        self.family: str = names[0]
        model, self._tokenizer = load_checkpoint(
            colpali_model(self.family), hf_dir, self.family, dtype=dtype, threads=threads
        )
        try:
            preprocessor = json.loads((hf_dir / "preprocessor_config.json").read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ModelError(f"{hf_dir}: cannot read preprocessor_config.json: {exc}") from exc
        self._model: Any = model
        self.dim: int = int(model.dim)
        vision = model.config.vision_config
        size = preprocessor.get("size", {})
        self.min_pixels = int(min_pixels if min_pixels is not None else size["shortest_edge"])
        self.max_pixels = int(max_pixels if max_pixels is not None else size["longest_edge"])
        self._merge = int(vision.spatial_merge_size)
        self._processor: Any = Qwen2VLImageProcessorPil(
            patch_size=int(vision.patch_size),
            temporal_patch_size=int(vision.temporal_patch_size),
            merge_size=self._merge,
            image_mean=preprocessor["image_mean"],
            image_std=preprocessor["image_std"],
            size={"shortest_edge": self.min_pixels, "longest_edge": self.max_pixels},
        )
        self._image_token_id = int(model.config.image_token_id)
        self.load_seconds = time.perf_counter() - started

    def token_ids(self, prompt: str) -> list[int]:
        """The token ids of a whole prompt, its control tokens read as such (no BOS: Qwen's tokenizer adds
        none)."""
        return [int(i) for i in self._tokenizer.encode(prompt, add_special_tokens=False)]

    def query(self, text: str) -> tuple[np.ndarray, list[int]]:
        """A query's token vectors, (tokens, dim) float32 unit rows, and its ids."""
        ids = self.token_ids(text + QUERY_AUGMENTATION)
        with torch.inference_mode():
            out = self._model(input_ids=torch.tensor([ids]), attention_mask=torch.ones(1, len(ids)))
        return _to_numpy(out[0]), ids

    def page(self, image: Image.Image) -> tuple[np.ndarray, list[int], tuple[int, int]]:
        """A page's token vectors, (tokens, dim) float32 unit rows, its ids (``<|image_pad|>`` once per image
        token) and the (width, height) the image was resized to."""
        batch = self._processor(images=[image.convert("RGB")], return_tensors="pt")
        grid = batch["image_grid_thw"]
        n_tokens = int(grid[0].prod()) // (self._merge * self._merge)
        ids = self.token_ids(PAGE_PROMPT.replace("<|image_pad|>", "<|image_pad|>" * n_tokens))
        if ids.count(self._image_token_id) != n_tokens:
            raise ModelError("the tokenizer does not keep <|image_pad|> as one token")
        input_ids = torch.tensor([ids])
        patch = int(self._model.patch_size) * self._merge
        size = (int(grid[0][2]) // self._merge * patch, int(grid[0][1]) // self._merge * patch)
        with torch.inference_mode():
            out = self._model(
                input_ids=input_ids,
                attention_mask=torch.ones(1, len(ids)),
                # the processor's batch form: one image's patches, padded to the batch's longest (itself)
                pixel_values=batch["pixel_values"].unsqueeze(0),
                image_grid_thw=grid,
                # what the processor returns beside input_ids: 1 marks an image token (for M-RoPE)
                mm_token_type_ids=(input_ids == self._image_token_id).to(torch.int),
            )
        return _to_numpy(out[0]), ids, size

    def vision_features(self, image: Image.Image) -> np.ndarray:
        """What the vision tower hands the language model for ``image``: one (merged) feature a token,
        (tokens, hidden) float32."""
        batch = self._processor(images=[image.convert("RGB")], return_tensors="pt")
        with torch.inference_mode():
            out = self._model.get_image_features(batch["pixel_values"], batch["image_grid_thw"])
        features = out.pooler_output if hasattr(out, "pooler_output") else out
        if isinstance(features, list | tuple):
            features = torch.cat(list(features))
        return _to_numpy(features)


def _to_numpy(states: torch.Tensor) -> np.ndarray:
    return states.detach().to(torch.float32).cpu().numpy()
