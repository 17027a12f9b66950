"""The PyTorch references for Qwen3-VL-Embedding and Qwen3-VL-Reranker: the oracles for the second family's
parity tests.

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

:class:`Qwen3VLRerankerReference` scores (text query, page image) pairs as the official reranker does
(same repository, ``src/models/qwen3_vl_reranker.py`` and ``examples/reranker_template.jinja``), on the
same model, resize and positions: one conversation per pair, the last position's hidden state of
``Qwen3VLModel`` dotted with the difference of ``lm_head``'s "yes" and "no" rows, then a sigmoid (its
docstring has the details).
"""

from __future__ import annotations

import math
import time
import unicodedata
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image

from docvec import InputError, ModelError

from ._checkpoint import load_checkpoint

__all__ = [
    "DEFAULT_INSTRUCTION",
    "QUERY_INSTRUCTION",
    "RERANK_INSTRUCTION",
    "RERANK_SYSTEM",
    "Qwen3VLReference",
    "Qwen3VLRerankerReference",
    "chat_prompt",
]

DEFAULT_INSTRUCTION = "Represent the user's input."
#: the instruction the model card's and the repository's retrieval examples give queries
QUERY_INSTRUCTION = "Retrieve images or text relevant to the user's query."
#: the reranker's fixed system message (``format_mm_instruction``)
RERANK_SYSTEM = (
    "Judge whether the Document meets the requirements based on the Query and the Instruct provided. "
    'Note that the answer can only be "yes" or "no".'
)
#: the reranker's ``default_instruction``
RERANK_INSTRUCTION = "Given a search query, retrieve relevant candidates that answer the query."
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


class _Qwen3VLBase:
    """What both references share: the checkpoint loaded once, the tokenizer, qwen_vl_utils' image resize
    and the processor's patches, and an image prompt's model inputs.

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
        from transformers import Qwen3VLForConditionalGeneration
        from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

        hf_dir = Path(hf_dir)
        started = time.perf_counter()
        model, self._tokenizer = load_checkpoint(
            Qwen3VLForConditionalGeneration, hf_dir, "Qwen3-VL", dtype=dtype, threads=threads
        )
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
        self._loaded(model, hf_dir)
        self.load_seconds = time.perf_counter() - started

    def _loaded(self, model: Any, hf_dir: Path) -> None:
        """What a subclass keeps of the whole ``Qwen3VLForConditionalGeneration`` (the embedding keeps
        only its ``model``)."""

    # ------------------------------------------------------------------------------------------ tokens

    def token_ids(self, prompt: str) -> list[int]:
        """The token ids of a whole prompt (no BOS: Qwen's tokenizer adds none)."""
        return [int(i) for i in self._tokenizer.encode(prompt, add_special_tokens=False)]

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

    def _image_inputs(
        self, image: Image.Image, prompt: Callable[[int], str]
    ) -> tuple[dict[str, torch.Tensor], list[int], tuple[int, int]]:
        """The forward's keyword arguments for one image and the prompt ``prompt(n_image_tokens)`` (its
        image already expanded to one ``<|image_pad|>`` per token), the prompt's ids and the (width,
        height) the image was resized to."""
        pixel_values, grid, size = self.pixels(image)
        n_tokens = int(grid[0].prod()) // (self._merge * self._merge)
        ids = self.token_ids(prompt(n_tokens))
        if ids.count(self._image_token_id) != n_tokens:
            raise ModelError("the tokenizer does not keep <|image_pad|> as one token")
        input_ids = torch.tensor([ids])
        inputs = {
            "input_ids": input_ids,
            "attention_mask": torch.ones(1, len(ids)),
            "pixel_values": pixel_values,
            "image_grid_thw": grid,
            # what the processor returns beside input_ids: 1 marks an image token (for M-RoPE)
            "mm_token_type_ids": (input_ids == self._image_token_id).to(torch.int),
        }
        return inputs, ids, size


def _expanded_image(n_tokens: int) -> str:
    return _IMAGE.replace("<|image_pad|>", "<|image_pad|>" * n_tokens)


class Qwen3VLReference(_Qwen3VLBase):
    """Qwen3-VL-Embedding's vectors computed with transformers on a Qwen3-VL checkpoint folder.

    ``dtype`` is the torch dtype the weights are loaded in; ``threads`` sets torch's intra-op thread count
    (a process-wide setting); ``min_pixels`` / ``max_pixels`` bound the resized image area (by default the
    official code's: 4 to 1,800 tokens of 32x32 pixels).
    """

    # ------------------------------------------------------------------------------------------ tokens

    def text_prompt(self, text: str, instruction: str | None = None) -> str:
        """The prompt of a text input with ``instruction`` (None: the default one)."""
        return chat_prompt(instruction, text)

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
        inputs, ids, size = self._image_inputs(image, lambda n: chat_prompt(instruction, _expanded_image(n)))
        with torch.inference_mode():
            out = self._model(**inputs)
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


class Qwen3VLRerankerReference(_Qwen3VLBase):
    """Qwen3-VL-Reranker's scores of (text query, document image) pairs, computed with transformers on a
    Qwen3-VL checkpoint folder as the official ``Qwen3VLReranker`` does:

    - the model: ``Qwen3VLForConditionalGeneration`` loaded once; the scores run its ``model``
      (``Qwen3VLModel``, no head), :meth:`logit_score` the whole of it;
    - prompts (``format_mm_instruction``): one conversation per pair, a system message
      (:data:`RERANK_SYSTEM`) and a user turn whose content items are the texts ``"<Instruct>: " +
      instruction`` (the caller's, else the reranker's default, :data:`RERANK_INSTRUCTION`), ``"<Query>:"``
      and the query, then ``"\\n<Document>:"`` and the document image (``format_mm_content`` puts a side's
      images before its texts), rendered by the Qwen3-VL chat template with ``add_generation_prompt=True``
      (as ``examples/reranker_template.jinja`` spells it): ``<|im_start|>system\\n{system}<|im_end|>\\n
      <|im_start|>user\\n<Instruct>: {instruction}<Query>:{query}\\n<Document>:<|vision_start|>
      {<|image_pad|> x n}<|vision_end|><|im_end|>\\n<|im_start|>assistant\\n``; no instruction punctuation
      rule here, unlike the embedding's; the official truncation to 10,240 tokens (special tokens kept) is
      not transcribed: the prompts here are shorter;
    - images: as the embedding's (``fetch_image`` with this object's ``min_pixels`` / ``max_pixels``, then
      the processor with ``do_resize=False``); positions: the model's ``get_rope_index``;
    - the score (``compute_scores``): ``sigmoid(w . h)``, ``h`` the last position's ``last_hidden_state``
      (after the final norm), ``w = lm_head.weight[yes] - lm_head.weight[no]`` with ``yes`` / ``no`` the
      ids of ``tokenizer.get_vocab()["yes"]`` and ``["no"]``.

    Precision: the official code computes ``w`` from the weights as loaded and then runs the linear in the
    model's dtype (bf16 when loaded so, a bf16 score); here ``w`` is the float32 difference of the loaded
    rows cast to float32 (correctly rounded, so exact whenever the two weights are within a factor 2**15
    of each other, which bf16 weights of one row pair nearly always are) and the dot product is float32,
    ``h`` cast to float32 first. With ``dtype=torch.float32`` that is the official computation.

    Its arguments are :class:`Qwen3VLReference`'s; a pair's ``instruction`` (an empty one falls back to
    the default, as ``instruct or self.default_instruction`` does) is given where it is scored.
    """

    #: the official ``default_instruction``
    instruction = RERANK_INSTRUCTION

    def _loaded(self, model: Any, hf_dir: Path) -> None:
        self._lm: Any = model  # Qwen3VLForConditionalGeneration: logit_score runs it whole
        vocab = self._tokenizer.get_vocab()
        if "yes" not in vocab or "no" not in vocab:
            raise ModelError(f"{hf_dir}: the vocabulary has no single token 'yes' or 'no'")
        self.yes_id, self.no_id = int(vocab["yes"]), int(vocab["no"])
        head = model.lm_head.weight.detach()
        self._diff: torch.Tensor = head[self.yes_id].to(torch.float32) - head[self.no_id].to(torch.float32)

    @property
    def diff_vector(self) -> np.ndarray:
        """``lm_head.weight[yes] - lm_head.weight[no]``, (hidden,) float32."""
        return self._diff.cpu().numpy().copy()

    # ------------------------------------------------------------------------------------------ tokens

    def prompt(self, query: str, n_image_tokens: int, instruction: str | None = None) -> str:
        """The whole prompt of a (query, image of ``n_image_tokens`` tokens) pair with ``instruction``
        (None or empty: the reranker's)."""
        instruct = instruction or self.instruction
        return (
            f"<|im_start|>system\n{RERANK_SYSTEM}<|im_end|>\n<|im_start|>user\n"
            f"<Instruct>: {instruct}<Query>:{query}\n<Document>:{_expanded_image(n_image_tokens)}<|im_end|>\n"
            "<|im_start|>assistant\n"
        )

    # ------------------------------------------------------------------------------------------ scores

    def _inputs(
        self, query: str, image: Image.Image, instruction: str | None
    ) -> tuple[dict[str, torch.Tensor], list[int], tuple[int, int]]:
        return self._image_inputs(image, lambda n: self.prompt(query, n, instruction))

    def _last(
        self, query: str, image: Image.Image, instruction: str | None
    ) -> tuple[torch.Tensor, list[int], tuple[int, int]]:
        inputs, ids, size = self._inputs(query, image, instruction)
        with torch.inference_mode():
            out = self._model(**inputs)
        return out.last_hidden_state[0, -1].detach().to(torch.float32).cpu(), ids, size

    def last_state(
        self, query: str, image: Image.Image, instruction: str | None = None
    ) -> tuple[np.ndarray, list[int], tuple[int, int]]:
        """The pair's last hidden state, (hidden,) float32, its prompt's ids (``<|image_pad|>`` once per
        image token) and the (width, height) the image was resized to."""
        h, ids, size = self._last(query, image, instruction)
        return h.numpy(), ids, size

    def score(self, query: str, images: Sequence[Image.Image], instruction: str | None = None) -> np.ndarray:
        """The query's score against each image, one pair at a time: (n,) float32 in (0, 1)."""
        scores = [torch.sigmoid(self._last(query, img, instruction)[0] @ self._diff) for img in images]
        return torch.stack(scores).numpy().astype(np.float32) if scores else np.zeros(0, np.float32)

    def logit_score(self, query: str, image: Image.Image, instruction: str | None = None) -> float:
        """The same score the slow way: the whole model's last-position logits (``lm_head`` on the same
        state, every vocabulary entry), ``sigmoid(logits[yes] - logits[no])`` in float32. The logits are in
        the model's dtype, so with bf16 weights they are rounded before the difference."""
        return float(torch.sigmoid(torch.tensor(self.logit_margin(query, image, instruction))))

    def logit_margin(self, query: str, image: Image.Image, instruction: str | None = None) -> float:
        """:meth:`logit_score` before the sigmoid: ``logits[yes] - logits[no]`` in float32, to compare with
        ``last_state(...)[0] @ diff_vector`` where the sigmoid saturates (as on random weights)."""
        inputs, _, _ = self._inputs(query, image, instruction)
        with torch.inference_mode():
            logits = self._lm(**inputs, logits_to_keep=1).logits[0, -1].to(torch.float32)
        return float(logits[self.yes_id] - logits[self.no_id])


def _normalise(pooled: np.ndarray, dim: int | None) -> np.ndarray:
    v = torch.from_numpy(np.asarray(pooled[:, :dim] if dim else pooled, np.float32))
    return torch.nn.functional.normalize(v, p=2, dim=-1).numpy()


def _to_numpy(states: torch.Tensor) -> np.ndarray:
    return states.detach().to(torch.float32).cpu().numpy()
