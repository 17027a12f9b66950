"""docvec_reference.jina_v4: the transformers oracle for jina-embeddings-v4, on the tiny checkpoint."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from docvec import ConfigError, InputError, ModelNotFoundError
from docvec_reference.jina_v4 import IMAGE_PROMPT, ReferenceEmbedder

VISION_START, VISION_END, IMAGE_PAD = 151652, 151653, 151655


def picture(width: int, height: int, seed: int = 0) -> Image.Image:
    """A deterministic RGB image with gradients and blocks."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    pixels = np.stack(
        [x * 255 // max(width - 1, 1), y * 255 // max(height - 1, 1), (x + 2 * y) % 256], axis=-1
    )
    pixels = pixels.astype(np.uint8)
    for _ in range(8):
        x0, y0 = int(rng.integers(0, width)), int(rng.integers(0, height))
        pixels[y0 : y0 + height // 6 + 1, x0 : x0 + width // 6 + 1] = rng.integers(0, 256, 3)
    return Image.fromarray(pixels, "RGB")


def unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def test_text_embeddings_are_unit_vectors_that_tell_texts_apart(reference: Any) -> None:
    texts = ["What is the capital of France?", "How do llamas sleep?", "What is the capital of France?"]
    q = reference.embed_queries(texts)
    assert q.shape == (3, 64) and q.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(q, axis=1), 1.0, atol=1e-5)
    assert float(q[0] @ q[1]) < 0.95
    np.testing.assert_array_equal(q[0], q[2])
    p = reference.embed_passages(texts[:1])
    assert float(q[0] @ p[0]) < 0.99  # the prompt matters


def test_text_pooling_is_the_mean_over_all_prompt_tokens(reference: Any) -> None:
    ids = reference.token_ids_text("Query: hello")
    assert ids == [2859, 25, 23811]  # "Query: hello", no BOS
    states = reference.token_states_text("Query: hello")
    assert states.shape == (3, 64) and states.dtype == np.float32
    np.testing.assert_allclose(reference.embed_queries(["hello"])[0], unit(states.mean(axis=0)), atol=1e-6)


def test_matryoshka_truncation_renormalises(reference: Any) -> None:
    full = reference.embed_passages(["a page about trains"])
    short = reference.embed_passages(["a page about trains"], dim=16)
    assert short.shape == (1, 16)
    np.testing.assert_allclose(short[0], unit(full[0, :16]), atol=1e-6)
    with pytest.raises(ConfigError):
        reference.embed_queries(["x"], dim=65)
    with pytest.raises(ConfigError):
        reference.embed_queries(["x"], dim=0)


def test_image_span_covers_the_image_tokens_and_both_markers(reference: Any) -> None:
    image = picture(350, 238)
    assert reference.image_grid(image) == (1, 16, 24)
    ids = reference.token_ids_image(image)
    n_image = 16 * 24 // 4
    assert ids.count(IMAGE_PAD) == n_image
    states, (start, end) = reference.token_states_image(image)
    assert states.shape == (len(ids), 64)
    assert end - start + 1 == n_image + 2
    assert ids[start] == VISION_START and ids[end] == VISION_END
    assert set(ids[start + 1 : end]) == {IMAGE_PAD}
    prompt = IMAGE_PROMPT.replace("<|image_pad|>", "<|image_pad|>" * n_image)
    assert ids == reference.token_ids_text(prompt)
    assert ids[:3] == [151644, 872, 198]  # <|im_start|>user\n, no BOS
    pooled = reference.embed_images([image])[0]
    np.testing.assert_allclose(pooled, unit(states[start : end + 1].mean(axis=0)), atol=1e-5)


def test_resize_rounds_half_to_even_and_grows_small_images(reference: Any) -> None:
    # 238 / 28 = 8.5 -> 8 and 350 / 28 = 12.5 -> 12 (Python's round), not 9 and 13
    assert reference.resized_size(picture(350, 238)) == (336, 224)
    # 60x50 is below min_pixels (3136 = 56x56): scaled up, then rounded up to 28-multiples
    assert reference.resized_size(picture(60, 50)) == (56, 56)
    assert reference.image_grid(picture(60, 50)) == (1, 4, 4)
    # an image already at a 28-multiple size within bounds keeps it
    assert reference.resized_size(picture(224, 224)) == (224, 224)


def test_image_embeddings_tell_images_apart(reference: Any) -> None:
    images = [picture(224, 168, seed=1), picture(224, 168, seed=2), Image.new("L", (200, 200), 128)]
    e = reference.embed_images(images)
    assert e.shape == (3, 64) and e.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(e, axis=1), 1.0, atol=1e-5)
    assert float(e[0] @ e[1]) < 0.99
    assert float(e[0] @ e[2]) < 0.99


def test_bad_inputs_name_the_item(reference: Any, tmp_path: Path) -> None:
    with pytest.raises(InputError) as info:
        reference.embed_images([picture(56, 56), "not an image"])
    assert info.value.index == 1
    with pytest.raises(InputError):
        reference.embed_queries("one string, not a list")
    with pytest.raises(ModelNotFoundError):
        ReferenceEmbedder(tmp_path)
