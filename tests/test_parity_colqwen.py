"""ColQwen3 through llama.cpp against colpali-engine's own ``ColQwen3`` on the same weights.

The tiny ColQwen3 (colpali-engine's layout: Qwen3-VL and its ``custom_text_proj``) is converted with docvec's
converter, its head exported to the head file; the reference (docvec_reference.colqwen) runs colpali-engine's
model class with its processor's prompts. docvec's side is the model runtime's token states in the same
prompts through the exported head: every token a vector. Bar (fp32 reference, F16 GGUF): the same tokens,
per-token cosine median >= 0.99999 and min >= 0.999, MaxSim within tests/helpers.py's tolerance per query
token (as for jina-embeddings-v4's head), for five queries and six page shapes, without flash attention and
with an F16 KV cache. Measured on the Intel AMX machine (December 2026): per-token cosine >= 0.9999994,
MaxSim within 1.4e-3 for queries of 11 to 34 tokens and 6.6e-2 for one of 1,100 (7.9e-5 a token at most);
with flash attention (F32 GGUFs, 64-token pages) 3.2e-3 for short queries.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from docvec import Embedder, EmbedSettings, ModelFiles
from docvec._model._head import MultiVectorHead, read_head
from docvec._model._profiles import QWEN3_VL_EMBEDDING
from docvec_reference.colqwen import PAGE_PROMPT, QUERY_AUGMENTATION, ColQwen3Reference, maxsim

from .helpers import MAXSIM_TOLERANCE, SHAPES, TEXTS, report, shape_image

MEDIAN_BAR = 0.99999
MIN_BAR = 0.999
IMAGE_PAD = 151655
QUERY = "{text}" + QUERY_AUGMENTATION
PAGE = PAGE_PROMPT.replace("<|vision_start|><|image_pad|><|vision_end|>", "{marker}")


@dataclass(frozen=True)
class Pair:
    """One input as docvec and as colpali-engine read it: token ids (an image token is the image pad's id)
    and token vectors."""

    name: str
    ids: list[int]
    want_ids: list[int]
    vectors: np.ndarray
    want: np.ndarray


@pytest.fixture(scope="module")
def reference(colqwen3_dir: Path) -> ColQwen3Reference:
    """colpali-engine's ColQwen3 on the checkpoint, fp32, its pixel bounds the checkpoint's."""
    return ColQwen3Reference(colqwen3_dir / "hf", threads=2)


@pytest.fixture(scope="module")
def ours(colqwen3_dir: Path) -> Iterator[tuple[Embedder, MultiVectorHead]]:
    """docvec's model runtime on the converted files, and the exported head."""
    files = ModelFiles(
        next(colqwen3_dir.glob("tiny-colqwen3-*.gguf")),
        next(colqwen3_dir.glob("mmproj-*.gguf")),
        colqwen3_dir / "multivector-head.gguf",
    )
    assert files.head is not None and files.head.is_file()  # the conversion exported custom_text_proj
    settings = EmbedSettings(
        threads=2, max_pixels=QWEN3_VL_EMBEDDING.max_pixels, flash_attention=False, kv_cache="f16"
    )
    emb = Embedder(files, settings)
    yield emb, read_head(files.head, width=emb.hidden_size)
    emb.close()


@pytest.fixture(scope="module")
def queries(ours: tuple[Embedder, MultiVectorHead], reference: ColQwen3Reference) -> list[Pair]:
    emb, head = ours
    pairs = []
    for text in TEXTS:
        want, want_ids = reference.query(text)
        states = emb.prompt_states(QUERY, text)
        pairs.append(Pair(text, states.token_ids.tolist(), want_ids, head(states.states), want))
    return pairs


@pytest.fixture(scope="module")
def pages(ours: tuple[Embedder, MultiVectorHead], reference: ColQwen3Reference) -> list[Pair]:
    emb, head = ours
    pairs = []
    for name in SHAPES:
        img = shape_image(name)
        want, want_ids, size = reference.page(img)
        states = emb.image_states(img, template=PAGE)
        assert states.size == size, name  # the processor's resize: 32-pixel multiples within its bounds
        ids = [IMAGE_PAD if i < 0 else i for i in states.token_ids.tolist()]
        pairs.append(Pair(name, ids, want_ids, head(states.states), want))
    return pairs


def _check(kind: str, pairs: list[Pair]) -> None:
    for p in pairs:
        assert p.ids == p.want_ids, p.name  # the same prompt, the same tokens
        cos = np.sum(p.vectors * p.want, axis=1) / (
            np.linalg.norm(p.vectors, axis=1) * np.linalg.norm(p.want, axis=1)
        )
        report(f"colqwen3 {kind} {p.name[:24]!r} per-token cosine (min)", float(cos.min()))
        assert np.median(cos) >= MEDIAN_BAR and cos.min() >= MIN_BAR, (p.name, float(cos.min()))


def test_queries_are_every_token_of_colpali_engines_prompt(queries: list[Pair]) -> None:
    # process_queries: the text, then ten <|endoftext|> read as the control token, each a vector
    assert all(p.want_ids[-10:] == [p.want_ids[-1]] * 10 for p in queries)
    _check("query", queries)


def test_pages_are_every_token_of_colpali_engines_prompt(pages: list[Pair]) -> None:
    _check("page", pages)


def test_maxsim(queries: list[Pair], pages: list[Pair]) -> None:
    ours = np.array([[maxsim(q.vectors, p.vectors) for p in pages] for q in queries])
    want = np.array([[maxsim(q.want, p.want) for p in pages] for q in queries])
    per_token = np.abs(ours - want) / np.array([[len(q.ids)] for q in queries])
    report("colqwen3 MaxSim, largest difference from colpali-engine", float(np.abs(ours - want).max()))
    report("colqwen3 MaxSim, largest difference per query token", float(per_token.max()))
    assert float(per_token.max()) <= MAXSIM_TOLERANCE, (ours, want)
    # the scores measure something: they differ between pages by far more than the tolerance
    assert float(want.std(axis=1).min()) > 10 * MAXSIM_TOLERANCE
