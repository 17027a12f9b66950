"""The PyTorch reference for jina-embeddings-v4 single-vector embeddings: the oracle for parity tests.

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
  included); then L2 normalisation, optionally after Matryoshka truncation.
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

from docvec import ConfigError, InputError, ModelError, ModelNotFoundError
from docvec._profiles import JINA_V4

__all__ = ["IMAGE_PROMPT", "PASSAGE_PROMPT", "QUERY_PROMPT", "ReferenceEmbedder"]

logger = logging.getLogger("docvec")

QUERY_PROMPT = "Query: {text}"
PASSAGE_PROMPT = "Passage: {text}"
IMAGE_PROMPT = "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>Describe the image.<|im_end|>\n"
_IMAGE_PAD = "<|image_pad|>"


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
        from transformers import AutoTokenizer, Qwen2_5_VLForConditionalGeneration
        from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

        hf_dir = Path(hf_dir)
        if not (hf_dir / "config.json").is_file():
            raise ModelNotFoundError(f"{hf_dir} is not a Hugging Face checkpoint folder (no config.json)")
        if not 0 < min_pixels <= max_pixels:
            raise ConfigError(f"need 0 < min_pixels <= max_pixels, got {min_pixels} and {max_pixels}")
        if threads is not None:
            torch.set_num_threads(threads)
        started = time.perf_counter()
        try:
            loaded: Any = Qwen2_5_VLForConditionalGeneration.from_pretrained(
                hf_dir, dtype=dtype, output_loading_info=True
            )
            model, info = loaded
            self._tokenizer: Any = AutoTokenizer.from_pretrained(hf_dir)
        except (OSError, ValueError) as exc:
            raise ModelError(f"cannot load the Qwen2.5-VL checkpoint in {hf_dir}: {exc}") from exc
        # A weight the checkpoint lacks would be left randomly initialised: no oracle then.
        missing = sorted(set(info.get("missing_keys", ())) | set(info.get("mismatched_keys", ())))
        if missing:
            raise ModelError(f"{hf_dir} lacks weights the model needs: {', '.join(missing[:5])}")
        model.eval()
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

    def _check_dim(self, dim: int | None) -> None:
        if dim is not None and not 0 < dim <= self.hidden_size:
            raise ConfigError(f"dim must be between 1 and {self.hidden_size}, got {dim}")

    @staticmethod
    def _normalise(pooled: np.ndarray, dim: int | None) -> np.ndarray:
        if dim is not None:
            pooled = pooled[:, :dim]
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return np.ascontiguousarray(pooled / np.maximum(norms, np.finfo(np.float32).tiny), dtype=np.float32)


def _to_numpy(states: torch.Tensor) -> np.ndarray:
    return states.detach().to(torch.float32).cpu().numpy()
