"""The PyTorch reference for jina-embeddings-v4 single- and multi-vector embeddings: the oracle for parity
tests.

:class:`ReferenceEmbedder` runs a Hugging Face Qwen2.5-VL checkpoint folder with transformers and pools
its last hidden states the way jina-embeddings-v4 does. It deliberately shares no code with docvec's own
prompt building, image preprocessing or pooling, so that comparing the two tests them:

- prompts: ``Query: {text}``, ``Passage: {text}``, and for images
  ``<|im_start|>user\\n<|vision_start|><|image_pad|><|vision_end|>Describe the image.<|im_end|>\\n`` with
  ``<|image_pad|>`` repeated once per image token; no BOS;
- images: transformers' PIL image processor for Qwen2-VL (``smart_resize``, then PIL bicubic), because
  in transformers 5 the default processor resizes with torchvision, which PIL-based pipelines cannot
  match pixel for pixel;
- positions: M-RoPE positions from the model's own ``get_rope_index``;
- pooling: texts average all tokens, images the ``<|vision_start|>`` .. ``<|vision_end|>`` span (both
  included); then L2 normalisation, optionally after Matryoshka truncation;
- multi-vector: jina-embeddings-v4's ``multi_vector_projector`` (read with safetensors straight from the
  checkpoint's weight files, not from docvec's head GGUF) applied in float64 to the last hidden state of
  every token of the input, prompt and template tokens included (jina-v4 keeps every position its attention
  mask covers), then L2-normalised per token; scored by MaxSim (:func:`maxsim`).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image

from docvec import ConfigError, InputError, ModelError
from docvec._model._profiles import JINA_V4

from ._checkpoint import load_checkpoint

__all__ = ["IMAGE_PROMPT", "PASSAGE_PROMPT", "QUERY_PROMPT", "ReferenceEmbedder", "maxsim", "maxsim_scores"]

logger = logging.getLogger("docvec")

QUERY_PROMPT = "Query: {text}"
PASSAGE_PROMPT = "Passage: {text}"
IMAGE_PROMPT = "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>Describe the image.<|im_end|>\n"
_IMAGE_PAD = "<|image_pad|>"
_HEAD_KEYS = ("multi_vector_projector.weight", "multi_vector_projector.bias")


class ReferenceEmbedder:
    """jina-embeddings-v4 single-vector embeddings computed with transformers on a Qwen2.5-VL folder.

    ``dtype`` is the torch dtype the weights are loaded in; ``threads`` sets torch's intra-op thread count
    (a process-wide setting); ``min_pixels`` / ``max_pixels`` bound the resized image area
    (by default jina-embeddings-v4's: 3136..602112, i.e. 4 to 768 image tokens).
    """

    def __init__(
        self,
        hf_dir: Path,
        *,
        dtype: torch.dtype = torch.float32,
        threads: int | None = None,
        min_pixels: int = JINA_V4.min_pixels,
        max_pixels: int = JINA_V4.max_pixels,
    ) -> None:
        from transformers import Qwen2_5_VLForConditionalGeneration
        from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

        hf_dir = Path(hf_dir)
        if not 0 < min_pixels <= max_pixels:
            raise ConfigError(f"need 0 < min_pixels <= max_pixels, got {min_pixels} and {max_pixels}")
        started = time.perf_counter()
        model, self._tokenizer = load_checkpoint(
            Qwen2_5_VLForConditionalGeneration, hf_dir, "Qwen2.5-VL", dtype=dtype, threads=threads
        )
        self._model: Any = model.model  # Qwen2_5_VLModel: last hidden states after the final norm
        config = model.config
        vision = config.vision_config
        self.hidden_size: int = int(config.text_config.hidden_size)
        self._merge = int(vision.spatial_merge_size)
        # Patch sizes come from the model (they must match it), normalisation from the processor config.
        normalisation = {}
        preprocessor = hf_dir / "preprocessor_config.json"
        if preprocessor.is_file():
            saved = json.loads(preprocessor.read_text(encoding="utf-8"))
            normalisation = {k: saved[k] for k in ("image_mean", "image_std") if k in saved}
        self._image_processor: Any = Qwen2VLImageProcessorPil(
            min_pixels=min_pixels,
            max_pixels=max_pixels,
            patch_size=int(vision.patch_size),
            temporal_patch_size=int(vision.temporal_patch_size),
            merge_size=self._merge,
            **normalisation,
        )
        self._image_token_id = int(config.image_token_id)
        self._vision_start_id = int(config.vision_start_token_id)
        self._vision_end_id = int(config.vision_end_token_id)
        # jina-embeddings-v4's head, which Qwen2_5_VLForConditionalGeneration does not load
        self.head: tuple[torch.Tensor, torch.Tensor] | None = _read_head(hf_dir)
        logger.debug("reference model %s loaded in %.1f s", hf_dir, time.perf_counter() - started)

    # ------------------------------------------------------------------------------------------ text

    def token_ids_text(self, text_with_prompt: str) -> list[int]:
        """The token ids of a text, prompt included, without BOS or any other added token."""
        return [int(i) for i in self._tokenizer.encode(text_with_prompt, add_special_tokens=False)]

    def token_states_text(self, text_with_prompt: str) -> np.ndarray:
        """Last hidden states (after the final norm) of a text with its prompt: (n_tokens, hidden) float32."""
        ids = self.token_ids_text(text_with_prompt)
        if not ids:
            raise InputError("the text has no tokens", item=repr(text_with_prompt[:40]))
        input_ids = torch.tensor([ids], dtype=torch.long)
        with torch.inference_mode():
            out = self._model(input_ids=input_ids, use_cache=False)
        return _to_numpy(out.last_hidden_state[0])

    # ------------------------------------------------------------------------------------------ images

    def image_grid(self, image: Image.Image) -> tuple[int, int, int]:
        """The (t, h, w) patch grid the image is cut into after resizing (14-pixel patches)."""
        _, grid = self._pixels(image)
        t, h, w = (int(v) for v in grid[0])
        return t, h, w

    def resized_size(self, image: Image.Image) -> tuple[int, int]:
        """The (width, height) in pixels the image is resized to before it is cut into patches."""
        _, h, w = self.image_grid(image)
        patch = int(self._image_processor.patch_size)
        return w * patch, h * patch

    def token_ids_image(self, image: Image.Image) -> list[int]:
        """The token ids of the image prompt with ``<|image_pad|>`` repeated once per image token."""
        _, grid = self._pixels(image)
        return self._image_ids(grid)

    def token_states_image(self, image: Image.Image) -> tuple[np.ndarray, tuple[int, int]]:
        """Last hidden states of the image prompt, and the inclusive (start, end) indices of the
        ``<|vision_start|>`` .. ``<|vision_end|>`` span in them."""
        pixel_values, grid = self._pixels(image)
        ids = self._image_ids(grid)
        input_ids = torch.tensor([ids], dtype=torch.long)
        mm_token_type_ids = (input_ids == self._image_token_id).to(torch.int)
        with torch.inference_mode():
            position_ids, _ = self._model.get_rope_index(
                input_ids, mm_token_type_ids=mm_token_type_ids, image_grid_thw=grid
            )
            out = self._model(
                input_ids=input_ids,
                pixel_values=pixel_values,
                image_grid_thw=grid,
                position_ids=position_ids,
                use_cache=False,
            )
        start = ids.index(self._vision_start_id)
        end = ids.index(self._vision_end_id)
        return _to_numpy(out.last_hidden_state[0]), (start, end)

    def _pixels(self, image: Image.Image) -> tuple[torch.Tensor, torch.Tensor]:
        if not isinstance(image, Image.Image):
            raise InputError(f"expected a PIL image, got {type(image).__name__}")
        try:
            batch = self._image_processor(images=[image.convert("RGB")], return_tensors="pt")
        except (ValueError, OSError) as exc:  # e.g. an aspect ratio over 200
            raise InputError(
                f"cannot preprocess the image: {exc}", item=f"{image.width}x{image.height}"
            ) from exc
        return batch["pixel_values"], batch["image_grid_thw"]

    def _image_ids(self, grid: torch.Tensor) -> list[int]:
        n_tokens = int(grid[0].prod()) // (self._merge * self._merge)
        ids = self.token_ids_text(IMAGE_PROMPT.replace(_IMAGE_PAD, _IMAGE_PAD * n_tokens))
        if ids.count(self._image_token_id) != n_tokens:
            raise ModelError("the tokenizer does not keep <|image_pad|> as one token")
        return ids

    # ------------------------------------------------------------------------------------------ embeddings

    def embed_queries(self, texts: Sequence[str], dim: int | None = None) -> np.ndarray:
        """Query embeddings (``Query: {text}``, mean over all tokens): (n, dim or hidden), unit norm."""
        return self._embed_texts(QUERY_PROMPT, texts, dim)

    def embed_passages(self, texts: Sequence[str], dim: int | None = None) -> np.ndarray:
        """Passage embeddings (``Passage: {text}``, mean over all tokens): (n, dim or hidden), unit norm."""
        return self._embed_texts(PASSAGE_PROMPT, texts, dim)

    def embed_images(self, images: Sequence[Image.Image], dim: int | None = None) -> np.ndarray:
        """Image embeddings (mean over the vision span, markers included): (n, dim or hidden), unit norm."""
        self._check_dim(dim)
        pooled = np.empty((len(images), self.hidden_size), dtype=np.float32)
        for i, image in enumerate(images):
            try:
                states, (start, end) = self.token_states_image(image)
            except InputError as exc:
                raise InputError(exc.reason, index=i, item=exc.item) from exc
            pooled[i] = states[start : end + 1].mean(axis=0)
        return self._normalise(pooled, dim)

    def _embed_texts(self, template: str, texts: Sequence[str], dim: int | None) -> np.ndarray:
        self._check_dim(dim)
        if isinstance(texts, str):
            raise InputError("expected a sequence of texts, got one str")
        pooled = np.empty((len(texts), self.hidden_size), dtype=np.float32)
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise InputError(f"expected a str, got {type(text).__name__}", index=i)
            pooled[i] = self.token_states_text(template.format(text=text)).mean(axis=0)
        return self._normalise(pooled, dim)

    # ------------------------------------------------------------------------------------------ multi-vector

    def project(self, states: np.ndarray) -> np.ndarray:
        """The head on last hidden states (n_tokens, hidden): (n_tokens, 128) float32 rows of unit norm,
        computed in float64 (``F.linear``, then ``F.normalize`` as jina-embeddings-v4 does)."""
        if self.head is None:
            raise ModelError("the checkpoint has no multi_vector_projector")
        weight, bias = self.head
        out = torch.nn.functional.linear(torch.from_numpy(np.asarray(states)).to(torch.float64), weight, bias)
        return torch.nn.functional.normalize(out, dim=-1).to(torch.float32).numpy()

    def multi_queries(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Token vectors of queries (``Query: {text}``), every token of the prompt and the text."""
        return [self.project(self.token_states_text(QUERY_PROMPT.format(text=t))) for t in texts]

    def multi_passages(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Token vectors of passages (``Passage: {text}``), every token of the prompt and the text."""
        return [self.project(self.token_states_text(PASSAGE_PROMPT.format(text=t))) for t in texts]

    def multi_images(self, images: Sequence[Image.Image]) -> list[np.ndarray]:
        """Token vectors of images: every token of the image prompt, template and image tokens."""
        return [self.project(self.token_states_image(img)[0]) for img in images]

    def _check_dim(self, dim: int | None) -> None:
        if dim is not None and not 0 < dim <= self.hidden_size:
            raise ConfigError(f"dim must be between 1 and {self.hidden_size}, got {dim}")

    @staticmethod
    def _normalise(pooled: np.ndarray, dim: int | None) -> np.ndarray:
        if dim is not None:
            pooled = pooled[:, :dim]
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return np.ascontiguousarray(pooled / np.maximum(norms, np.finfo(np.float32).tiny), dtype=np.float32)


def maxsim(query: np.ndarray, doc: np.ndarray) -> float:
    """Late-interaction score: for each query token its best dot product with any document token, summed."""
    q = torch.from_numpy(np.asarray(query, np.float64))
    d = torch.from_numpy(np.asarray(doc, np.float64))
    return float((q @ d.T).max(dim=1).values.sum())


def maxsim_scores(queries: Sequence[np.ndarray], docs: Sequence[np.ndarray]) -> np.ndarray:
    """:func:`maxsim` of every query against every document: (n_queries, n_docs) float64."""
    return np.array([[maxsim(q, d) for d in docs] for q in queries], dtype=np.float64)


def _read_head(hf_dir: Path) -> tuple[torch.Tensor, torch.Tensor] | None:
    """The checkpoint's multi_vector_projector (weight, bias) in float64, found through the weight index
    when there is one, else in model.safetensors; None when it has none."""
    from safetensors import safe_open

    index = hf_dir / "model.safetensors.index.json"
    if index.is_file():
        weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
        files = {key: hf_dir / weight_map[key] for key in _HEAD_KEYS if key in weight_map}
    else:
        single = hf_dir / "model.safetensors"
        with safe_open(str(single), "pt") as f:
            files = {key: single for key in _HEAD_KEYS if key in f.keys()}  # noqa: SIM118 (not a dict)
    if not files:
        return None
    if len(files) != 2:
        raise ModelError(f"{hf_dir} has only {', '.join(files)} of the multi_vector_projector")
    tensors = []
    for key in _HEAD_KEYS:
        with safe_open(str(files[key]), "pt") as f:
            tensors.append(f.get_tensor(key).to(torch.float64))
    return tensors[0], tensors[1]


def _to_numpy(states: torch.Tensor) -> np.ndarray:
    return states.detach().to(torch.float32).cpu().numpy()
