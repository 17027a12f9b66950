"""Qwen3-VL-Embedding through llama.cpp against its official embedding rules on transformers.

The reference (docvec_reference.qwen3vl) transcribes the official code: chat prompts with an instruction,
qwen_vl_utils' resize, last-token pooling; it runs on the checkpoint the tiny GGUFs were converted from.
Bar: pooled cosine >= 0.99999 for queries, passages and six page shapes, with the profile's defaults.
"""

from __future__ import annotations

import numpy as np
import pytest

from docvec import Embedder, EmbedSettings, ModelError, ModelFiles
from docvec._model._native import MtmdContext, PromptChunk
from docvec._model._profiles import QWEN3_VL_EMBEDDING
from docvec_reference.qwen3vl import QUERY_INSTRUCTION, Qwen3VLReference

from .helpers import SHAPES, TEXTS, in_one_batch, report, shape_image

BAR = 0.99999
IMAGE_PAD = 151655


def row_cos(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.sum(a * b, axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v)


def test_text_tokens_match_the_official_prompts(
    qwen3vl_embedder: Embedder, qwen3vl_reference: Qwen3VLReference
) -> None:
    emb, ref = qwen3vl_embedder, qwen3vl_reference
    for t in TEXTS:
        query = emb.prompt_states(emb.profile.query_template, t).token_ids.tolist()
        assert query == ref.token_ids(ref.text_prompt(t, QUERY_INSTRUCTION)), t
        passage = emb.prompt_states(emb.profile.passage_template, t).token_ids.tolist()
        assert passage == ref.token_ids(ref.text_prompt(t)), t


def test_text_parity(qwen3vl_embedder: Embedder, qwen3vl_reference: Qwen3VLReference) -> None:
    ours = np.concatenate([qwen3vl_embedder.embed_queries(TEXTS), qwen3vl_embedder.embed_passages(TEXTS)])
    ref = np.concatenate([qwen3vl_reference.embed_queries(TEXTS), qwen3vl_reference.embed_passages(TEXTS)])
    pooled = row_cos(ours, ref)
    report("qwen3-vl text pooled cosine, F16 GGUF vs torch fp32 (min)", float(pooled.min()))
    assert pooled.min() >= BAR, pooled


@pytest.mark.parametrize("name", list(SHAPES))
def test_image_parity(name: str, qwen3vl_embedder: Embedder, qwen3vl_reference: Qwen3VLReference) -> None:
    img = shape_image(name)
    ours = qwen3vl_embedder.image_states(img)
    ref_states, ref_ids, ref_size = qwen3vl_reference.image_states(img)
    # the same resize (qwen_vl_utils' smart_resize at 32 pixels a token), the same prompt and token count
    assert ours.size == ref_size
    assert [IMAGE_PAD if i < 0 else i for i in ours.token_ids.tolist()] == ref_ids
    assert ours.span is None  # last-token pooling: no span
    per_token = row_cos(ours.states, ref_states)
    pooled = float(row_cos(ours.states[-1:], ref_states[-1:])[0])
    n_image = int((ours.token_ids < 0).sum())
    report(f"qwen3-vl image {name} pooled cosine ({n_image} image tokens)", pooled)
    assert pooled >= BAR
    assert per_token.min() >= 0.9999, name
    vector = qwen3vl_embedder.embed_images([img])[0]
    assert float(vector @ qwen3vl_reference.embed_images([img])[0]) >= BAR


def test_pooling_takes_the_prompts_last_token(
    qwen3vl_embedder: Embedder, qwen3vl_reference: Qwen3VLReference
) -> None:
    """The vector is the last token's state (the newline after ``assistant``) and no other's: picking any
    other position would be caught, since no other state is within the bar of it."""
    img = shape_image("square-448")
    vector = qwen3vl_embedder.embed_images([img])[0]
    ref_states, _, _ = qwen3vl_reference.image_states(img)
    sims = row_cos(np.broadcast_to(vector, ref_states.shape), ref_states)
    assert int(np.argmax(sims)) == len(ref_states) - 1
    assert np.sort(sims)[-2] < 0.999, np.sort(sims)[-3:]
    query = qwen3vl_embedder.embed_queries(["what is the total amount due?"])[0]
    text_states, _ = qwen3vl_reference.text_states("what is the total amount due?", QUERY_INSTRUCTION)
    sims = row_cos(np.broadcast_to(query, text_states.shape), text_states)
    assert int(np.argmax(sims)) == len(text_states) - 1
    assert np.sort(sims)[-2] < 0.999


def test_deepstack_features_matter(
    qwen3vl_embedder: Embedder, qwen3vl_reference: Qwen3VLReference, monkeypatch: pytest.MonkeyPatch
) -> None:
    """mtmd hands the language model each image token's main features and its deepstack features (one
    slice per deepstack layer); losing the latter would fail the parity tests."""
    img = shape_image("square-448")
    want = qwen3vl_reference.embed_images([img])[0]
    n_embd = qwen3vl_embedder.hidden_size
    original = MtmdContext._chunk

    def without_deepstack(
        self: MtmdContext, chunk: object, pos0: int, embds: dict[int, np.ndarray]
    ) -> PromptChunk:
        c = original(self, chunk, pos0, embds)
        if c.image_embd is not None:
            assert c.image_embd.shape[1] == n_embd * (1 + 3)  # the main merger, then three deepstack ones
            c.image_embd[:, n_embd:] = 0.0
        return c

    monkeypatch.setattr(MtmdContext, "_chunk", without_deepstack)
    broken = qwen3vl_embedder.embed_images([img])[0]
    report("qwen3-vl image square-448 pooled cosine without deepstack", float(broken @ want))
    assert float(broken @ want) < 0.999


@pytest.mark.parametrize(
    ("flash_attention", "kv_cache"), [(False, "f16"), (True, "f16"), (True, "f32"), (True, "bf16")]
)
def test_attention_precision_measured(
    flash_attention: bool, kv_cache: str, qwen3vl_files: ModelFiles, qwen3vl_reference: Qwen3VLReference
) -> None:
    """Last-token pooling keeps the rounding of one state: flash attention's F16 accumulation shows on
    long prompts. Measured per setting on the longest page; the profile's default (off, F16 cache) is
    the cheap one that meets the bar. A BF16 cache with flash attention takes AMX tiles where the CPU has
    them (llama.cpp patch 0009)."""
    img = shape_image("a4-page-1240x1754")
    want = qwen3vl_reference.embed_images([img])[0]
    settings = EmbedSettings(
        threads=2,
        max_pixels=QWEN3_VL_EMBEDDING.max_pixels,
        flash_attention=flash_attention,
        kv_cache=kv_cache,  # type: ignore[arg-type]
    )
    with Embedder(qwen3vl_files, settings) as emb:
        got = float(emb.embed_images([img])[0] @ want)
    fa = "on" if flash_attention else "off"
    report(f"qwen3-vl A4 page pooled cosine, flash attention {fa}, {kv_cache.upper()} KV cache", got)
    is_default = (flash_attention, kv_cache) == (
        QWEN3_VL_EMBEDDING.flash_attention,
        QWEN3_VL_EMBEDDING.kv_cache,
    )
    assert got >= (BAR if is_default else 0.999)


def test_multivector_is_refused_with_a_clear_error(qwen3vl_embedder: Embedder) -> None:
    assert not qwen3vl_embedder.has_multivector
    with pytest.raises(ModelError, match="qwen3-vl-embedding has no multi-vector head"):
        qwen3vl_embedder.embed_queries_multi(["a query"])


def test_pages_batched_through_the_vision_encoder_equal_one_at_a_time(
    qwen3vl_files: ModelFiles, qwen3vl_embedder: Embedder
) -> None:
    """Three pages of different sizes in one Qwen3-VL encoder pass (``vision_batch``, llama.cpp patch
    0008: each page's own patches, positions, position embeddings and deepstack features) give the
    vectors of one page a pass; their prompts decode as sequences of one language-model batch."""
    settings = EmbedSettings(threads=2, max_pixels=QWEN3_VL_EMBEDDING.max_pixels)
    images, got = in_one_batch(qwen3vl_files, settings, Embedder.embed_images)
    pooled = row_cos(got, qwen3vl_embedder.embed_images(images))
    report("Qwen3-VL pooled cosine, 3 pages in one vision pass vs one at a time (min)", float(pooled.min()))
    assert pooled.min() >= 0.999999, pooled
