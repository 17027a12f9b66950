"""llama.cpp embeddings against the PyTorch reference on the same weights.

The reference is transformers' Qwen2.5-VL with the PIL image processor and jina-v4's prompts and pooling
(docvec_reference.jina_v4), on the checkpoint the GGUFs were converted from. Bar: pooled cosine >= 0.99999.
"""

from __future__ import annotations

import numpy as np
import pytest

from docvec import Embedder, EmbedSettings, ModelFiles
from docvec._model._native import MtmdContext, PromptChunk
from docvec_reference.jina_v4 import ReferenceEmbedder

from .helpers import SHAPES, TEXTS, in_one_batch, report, shape_image

BAR = 0.99999


def cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def row_cos(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.sum(a * b, axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def test_text_tokens_match_the_reference_tokenizer(embedder: Embedder, reference: ReferenceEmbedder) -> None:
    for t in TEXTS:
        for prompt in (f"Query: {t}", f"Passage: {t}"):
            assert embedder._session.model.tokenize(prompt).tolist() == reference.token_ids_text(prompt)


def test_text_parity_pooled_and_per_token(embedder: Embedder, reference: ReferenceEmbedder) -> None:
    ours = np.concatenate([embedder.embed_queries(TEXTS), embedder.embed_passages(TEXTS)])
    ref = np.concatenate([reference.embed_queries(TEXTS), reference.embed_passages(TEXTS)])
    pooled = row_cos(ours, ref)
    report("text pooled cosine, F16 GGUF vs torch fp32 (min)", float(pooled.min()))
    assert pooled.min() >= BAR, pooled
    for t in TEXTS:
        a = embedder.text_states(f"Query: {t}").states
        b = reference.token_states_text(f"Query: {t}")
        assert a.shape == b.shape
        assert row_cos(a, b).min() >= 0.9999, t


@pytest.mark.parametrize("name", list(SHAPES))
def test_image_parity(name: str, embedder: Embedder, reference: ReferenceEmbedder) -> None:
    img = shape_image(name)
    ours = embedder.image_states(img)
    ref_states, ref_span = reference.token_states_image(img)
    # same resize (the reference's smart_resize: stretch, round half to even), same tokens, same span
    assert ours.size == reference.resized_size(img)
    assert ours.span == ref_span and ours.states.shape == ref_states.shape
    per_token = row_cos(ours.states, ref_states)
    a, b = ours.span
    pooled = cos(ours.states[a : b + 1].mean(0), ref_states[a : b + 1].mean(0))
    report(f"image {name} pooled cosine ({b - a - 1} image tokens)", pooled)
    assert pooled >= BAR
    # every token close, most of them to 1e-5; the worst are the text tokens after 700+ image tokens,
    # which attend through the F16 KV cache
    assert per_token.min() >= 0.9995 and float(np.median(per_token)) >= BAR
    np.testing.assert_allclose(
        embedder.embed_images([img])[0], reference.embed_images([img])[0], rtol=0, atol=5e-3
    )


def test_matryoshka_truncation_matches_the_reference(
    tiny_files: ModelFiles, reference: ReferenceEmbedder
) -> None:
    # the tiny model is 64 wide, so truncation is exercised through the shared normalisation at 32 dims
    from docvec._model._embedder import normalize

    full_ours = Embedder(tiny_files, EmbedSettings(threads=2)).embed_queries(TEXTS[:3])
    full_ref = reference.embed_queries(TEXTS[:3])
    assert row_cos(normalize(full_ours, 32), normalize(full_ref, 32)).min() >= BAR


def test_bidirectional_image_attention_breaks_parity(
    embedder: Embedder, reference: ReferenceEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If image tokens attended both ways (the bug the jina fork fixed), the parity tests would fail."""
    img = shape_image("square-448")
    ref_states, (a, b) = reference.token_states_image(img)
    ref = ref_states[a : b + 1].mean(0)
    original = MtmdContext._chunk

    def non_causal(self: MtmdContext, chunk: object, pos0: int, embds: dict[int, np.ndarray]) -> PromptChunk:
        c = original(self, chunk, pos0, embds)
        if c.image_embd is not None:
            c.causal = False
        return c

    monkeypatch.setattr(MtmdContext, "_chunk", non_causal)
    broken = embedder.image_states(img)
    pooled = cos(broken.states[a : b + 1].mean(0), ref)
    report("image square-448 pooled cosine with bidirectional image attention", pooled)
    assert pooled < 0.999


@pytest.fixture(scope="module")
def other_types(tiny_bf16: ModelFiles, tiny_quantized: dict[str, ModelFiles]) -> dict[str, ModelFiles]:
    return {"BF16 LM + BF16 mmproj": tiny_bf16, "Q8_0 LM + F16 mmproj": tiny_quantized["Q8_0"]}


@pytest.mark.parametrize(
    ("kind", "text_bar", "image_bar"),
    [
        ("BF16 LM + BF16 mmproj", 0.999, 0.999),
        # random weights lose more to quantization than trained ones (full size: 0.998, the same as
        # fake-quantizing the torch model)
        ("Q8_0 LM + F16 mmproj", 0.99, 0.99),
    ],
)
def test_other_types_measured(
    kind: str,
    text_bar: float,
    image_bar: float,
    other_types: dict[str, ModelFiles],
    reference: ReferenceEmbedder,
) -> None:
    with Embedder(other_types[kind], EmbedSettings(threads=2)) as emb:
        t = row_cos(emb.embed_queries(TEXTS), reference.embed_queries(TEXTS)).min()
        imgs = [shape_image(n) for n in ("square-448", "a4-page-1240x1754")]
        i = row_cos(emb.embed_images(imgs), reference.embed_images(imgs)).min()
    report(f"{kind}: text pooled cosine (min)", float(t))
    report(f"{kind}: image pooled cosine (min)", float(i))
    assert t >= text_bar and i >= image_bar


def test_pages_batched_through_the_vision_encoder_equal_one_at_a_time(
    tiny_files: ModelFiles, embedder: Embedder
) -> None:
    """Three pages of different sizes in one Qwen2.5-VL encoder pass (``vision_batch``, llama.cpp patch
    0008: each page attends to its own patches, in its own windows, at its own positions) give the vectors
    of one page a pass; their prompts decode as sequences of one language-model batch."""
    images, got = in_one_batch(tiny_files, EmbedSettings(threads=2), Embedder.embed_images)
    pooled = row_cos(got, embedder.embed_images(images))
    report("image pooled cosine, 3 pages in one vision pass vs one at a time (min)", float(pooled.min()))
    assert pooled.min() >= 0.999999, pooled
