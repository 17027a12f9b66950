"""The PyTorch reference for Qwen3-VL-Embedding: the oracle for the second family's parity tests.

:class:`Qwen3VLReference` runs a Hugging Face Qwen3-VL checkpoint folder with transformers and embeds as
the official code does (github QwenLM/Qwen3-VL-Embedding, ``src/models/qwen3_vl_embedding.py``,
Apache-2.0), transcribed here and sharing no code with docvec's profile, image preprocessing or pooling:

- the model: ``Qwen3VLForEmbedding`` is ``Qwen3VLModel`` (the language model with its vision encoder and
  deepstack mergers, no head) returning the last hidden state; here the ``model`` of
  ``Qwen3VLForConditionalGeneration``, the same module on the same weights;
- prompts: ``format_model_input`` builds a conversation of a system message (the instruction, a final
  punctuation mark added when it has none; default "Represent the user's input.") and a user turn (the
  image, then the text), which the Qwen3-VL chat template renders with ``add_generation_prompt=True``:
  ``<|im_start|>system\\n{instruction}<|im_end|>\\n<|im_start|>user\\n{content}<|im_end|>\\n<|im_start|>
  assistant\\n``, an image being ``<|vision_start|>`` + one ``<|image_pad|>`` per token + ``<|vision_end|>``;
- images: qwen_vl_utils' ``fetch_image`` (``smart_resize`` with factor 32 = patch 16 x merge 2, Python's
  ``round``, between ``min_pixels`` and ``max_pixels``; then PIL's ``resize``, bicubic), then the processor
  with ``do_resize=False`` (rescale, normalise with mean and std 0.5, cut into patches);
- positions: the model's own ``get_rope_index`` (called by its forward);
- pooling: ``_pooling_last``, the last token's state, then ``F.normalize``; Matryoshka truncation before
  the normalisation.
"""

from __future__ import annotations

import math
import time
import unicodedata
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image

from docvec import InputError, ModelError, ModelNotFoundError

__all__ = ["DEFAULT_INSTRUCTION", "QUERY_INSTRUCTION", "Qwen3VLReference", "chat_prompt"]

DEFAULT_INSTRUCTION = "Represent the user's input."
#: the instruction the model card's and the repository's retrieval examples give queries
QUERY_INSTRUCTION = "Retrieve images or text relevant to the user's query."
# the official code's bounds (IMAGE_FACTOR = 32; MIN_PIXELS = 4 * 32 * 32, MAX_PIXELS = 1800 * 32 * 32)
_FACTOR = 32
MIN_PIXELS = 4 * _FACTOR * _FACTOR
MAX_PIXELS = 1800 * _FACTOR * _FACTOR
_MAX_RATIO = 200
_IMAGE = "<|vision_start|><|image_pad|><|vision_end|>"


def chat_prompt(instruction: str | None, content: str) -> str:
    """The chat-template rendering of the official conversation (system instruction, user content), with
    the generation prompt."""
    if instruction:
        instruction = instruction.strip()
        if instruction and not unicodedata.category(instruction[-1]).startswith("P"):
            instruction += "."
    system = instruction or DEFAULT_INSTRUCTION
    return (
        f"<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n{content or 'NULL'}<|im_end|>\n"
        "<|im_start|>assistant\n"
    )


def smart_resize(height: int, width: int, min_pixels: int, max_pixels: int) -> tuple[int, int]:
    """qwen_vl_utils' ``smart_resize`` with factor 32: the (height, width) an image is resized to."""
    if max(height, width) / min(height, width) > _MAX_RATIO:
        raise InputError(f"aspect ratio over {_MAX_RATIO}", item=f"{width}x{height}")
    h_bar = max(_FACTOR, round(height / _FACTOR) * _FACTOR)
    w_bar = max(_FACTOR, round(width / _FACTOR) * _FACTOR)
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = math.floor(height / beta / _FACTOR) * _FACTOR
        w_bar = math.floor(width / beta / _FACTOR) * _FACTOR
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / _FACTOR) * _FACTOR
        w_bar = math.ceil(width * beta / _FACTOR) * _FACTOR
    return h_bar, w_bar


class Qwen3VLReference:
    """Qwen3-VL-Embedding's vectors computed with transformers on a Qwen3-VL checkpoint folder.

    ``dtype`` is the torch dtype the weights are loaded in; ``threads`` sets torch's intra-op thread count
    (a process-wide setting); ``min_pixels`` / ``max_pixels`` bound the resized image area (by default the
    official code's: 4 to 1,800 tokens of 32x32 pixels).
    """

    def __init__(
        self,
        hf_dir: Path,
        *,
        dtype: torch.dtype = torch.float32,
        threads: int | None = None,
        min_pixels: int = MIN_PIXELS,
        max_pixels: int = MAX_PIXELS,
    ) -> None:
        from transformers import AutoTokenizer, Qwen3VLForConditionalGeneration
        from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

        hf_dir = Path(hf_dir)
        if not (hf_dir / "config.json").is_file():
            raise ModelNotFoundError(f"{hf_dir} is not a Hugging Face checkpoint folder (no config.json)")
        if threads is not None:
            torch.set_num_threads(threads)
        started = time.perf_counter()
        try:
            model, info = Qwen3VLForConditionalGeneration.from_pretrained(
                hf_dir, dtype=dtype, output_loading_info=True
            )
            self._tokenizer: Any = AutoTokenizer.from_pretrained(hf_dir)
        except (OSError, ValueError) as exc:
            raise ModelError(f"cannot load the Qwen3-VL checkpoint in {hf_dir}: {exc}") from exc
        missing = sorted(set(info.get("missing_keys", ())) | set(info.get("mismatched_keys", ())))
        if missing:  # a weight left randomly initialised: no oracle then
            raise ModelError(f"{hf_dir} lacks weights the model needs: {', '.join(missing[:5])}")
        model.eval()
        self._model: Any = model.model  # Qwen3VLModel: Qwen3VLForEmbedding's ``model``
        config = model.config
        vision = config.vision_config
        self.hidden_size: int = int(config.text_config.hidden_size)
        self.min_pixels, self.max_pixels = min_pixels, max_pixels
        self._merge = int(vision.spatial_merge_size)
        if int(vision.patch_size) * self._merge != _FACTOR:
            raise ModelError(f"{hf_dir}: patch {vision.patch_size} x merge {self._merge} is not 32 pixels")
        self._processor: Any = Qwen2VLImageProcessorPil(
            patch_size=int(vision.patch_size),
            temporal_patch_size=int(vision.temporal_patch_size),
            merge_size=self._merge,
            image_mean=[0.5, 0.5, 0.5],
            image_std=[0.5, 0.5, 0.5],
            do_resize=False,
        )
        self._image_token_id = int(config.image_token_id)
        self.load_seconds = time.perf_counter() - started

    # ------------------------------------------------------------------------------------------ tokens

    def token_ids(self, prompt: str) -> list[int]:
        """The token ids of a whole prompt (no BOS: Qwen's tokenizer adds none)."""
        return [int(i) for i in self._tokenizer.encode(prompt, add_special_tokens=False)]

    def text_prompt(self, text: str, instruction: str | None = None) -> str:
        """The prompt of a text input with ``instruction`` (None: the default one)."""
        return chat_prompt(instruction, text)

    def resize(self, image: Image.Image) -> Image.Image:
        """``fetch_image``: the RGB image resized by ``smart_resize`` (PIL bicubic)."""
        if image.mode == "RGBA":  # qwen_vl_utils' to_rgb: alpha over white
            white = Image.new("RGB", image.size, (255, 255, 255))
            white.paste(image, mask=image.split()[3])
            image = white
        else:
            image = image.convert("RGB")
        h, w = smart_resize(image.height, image.width, self.min_pixels, self.max_pixels)
        return image.resize((w, h), resample=Image.Resampling.BICUBIC)

    def image_tokens(self, image: Image.Image) -> int:
        """How many image tokens the image becomes."""
        resized = self.resize(image)
        return (resized.width // _FACTOR) * (resized.height // _FACTOR)

    def pixels(self, image: Image.Image) -> tuple[torch.Tensor, torch.Tensor, tuple[int, int]]:
        """The processor's pixel values and (t, h, w) patch grid of the resized image, and its size."""
        resized = self.resize(image)
        batch = self._processor(images=[resized], return_tensors="pt")
        return batch["pixel_values"], batch["image_grid_thw"], resized.size

    # ------------------------------------------------------------------------------------------ states

    def text_states(self, text: str, instruction: str | None = None) -> tuple[np.ndarray, list[int]]:
        """Last hidden states of a text input's whole prompt, (n_tokens, hidden) float32, and its ids."""
        ids = self.token_ids(self.text_prompt(text, instruction))
        with torch.inference_mode():
            out = self._model(input_ids=torch.tensor([ids]), attention_mask=torch.ones(1, len(ids)))
        return _to_numpy(out.last_hidden_state[0]), ids

    def image_states(
        self, image: Image.Image, instruction: str | None = None
    ) -> tuple[np.ndarray, list[int], tuple[int, int]]:
        """Last hidden states of an image input's whole prompt, its ids (``<|image_pad|>`` once per image
        token) and the (width, height) the image was resized to."""
        pixel_values, grid, size = self.pixels(image)
        n_tokens = int(grid[0].prod()) // (self._merge * self._merge)
        prompt = chat_prompt(instruction, _IMAGE.replace("<|image_pad|>", "<|image_pad|>" * n_tokens))
        ids = self.token_ids(prompt)
        if ids.count(self._image_token_id) != n_tokens:
            raise ModelError("the tokenizer does not keep <|image_pad|> as one token")
        input_ids = torch.tensor([ids])
        with torch.inference_mode():
            out = self._model(
                input_ids=input_ids,
                attention_mask=torch.ones(1, len(ids)),
                pixel_values=pixel_values,
                image_grid_thw=grid,
                # what the processor returns beside input_ids: 1 marks an image token (for M-RoPE)
                mm_token_type_ids=(input_ids == self._image_token_id).to(torch.int),
            )
        return _to_numpy(out.last_hidden_state[0]), ids, size

    # ------------------------------------------------------------------------------------------ embeddings

    def embed_queries(self, texts: Sequence[str], dim: int | None = None) -> np.ndarray:
        """Query vectors (the retrieval instruction, last token): (n, dim or hidden), unit norm."""
        return _normalise(np.stack([self.text_states(t, QUERY_INSTRUCTION)[0][-1] for t in texts]), dim)

    def embed_passages(self, texts: Sequence[str], dim: int | None = None) -> np.ndarray:
        """Passage vectors (the default instruction, last token): (n, dim or hidden), unit norm."""
        return _normalise(np.stack([self.text_states(t)[0][-1] for t in texts]), dim)

    def embed_images(self, images: Sequence[Image.Image], dim: int | None = None) -> np.ndarray:
        """Image vectors (the default instruction, last token): (n, dim or hidden), unit norm."""
        return _normalise(np.stack([self.image_states(img)[0][-1] for img in images]), dim)


def _normalise(pooled: np.ndarray, dim: int | None) -> np.ndarray:
    v = torch.from_numpy(np.asarray(pooled[:, :dim] if dim else pooled, np.float32))
    return torch.nn.functional.normalize(v, p=2, dim=-1).numpy()


def _to_numpy(states: torch.Tensor) -> np.ndarray:
    return states.detach().to(torch.float32).cpu().numpy()
