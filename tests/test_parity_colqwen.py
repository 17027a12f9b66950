"""ColQwen3 and ColQwen3.5 through llama.cpp against colpali-engine's own ``ColQwen3`` and ``ColQwen3_5``
on the same weights.

Each tiny model (colpali-engine's layout: Qwen3-VL or Qwen3.5, and its ``custom_text_proj``) is converted with
docvec's converter, its head exported to the head file; the reference (docvec_reference.colqwen) runs colpali-
engine's model class with its processor's prompts. docvec's side is the embedder's token vectors in the
family's profile (its prompts, written apart from the reference's): every token a vector. Bar (fp32 reference,
F16 GGUFs, the profile's defaults: no flash attention, F16 KV cache): the same tokens, per-token cosine median
>= 0.99999 and min >= 0.999, MaxSim within tests/helpers.py's tolerance per query token (as for jina-
embeddings-v4's head), for five queries and six page shapes. Measured on the Intel AMX machine (December
2026), per-token cosine min / MaxSim per query token: ColQwen3 0.9999995 / 6.9e-5, ColQwen3.5 0.99934 / 1.4e-4
(0.9980 for ColQwen3.5's image tokens before llama.cpp patch 0007: ggml's CPU GELU read from an F16 table).
MaxSim whole, queries of 11 to 34 tokens: within 1.7e-3 (ColQwen3) and 4.9e-3 (ColQwen3.5); with flash
attention (ColQwen3, F32 GGUFs, 64-token pages) 3.2e-3.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from docvec import Embedder, EmbedSettings
from docvec._model._profiles import COLQWEN3, COLQWEN3_5, ModelProfile
from docvec._model._registry import find_tiny_model
from docvec_reference.colqwen import ColQwenReference, maxsim

from .helpers import MAXSIM_TOLERANCE, SHAPES, TEXTS, in_one_batch, report, shape_image

MEDIAN_BAR = 0.99999
MIN_BAR = 0.999
IMAGE_PAD = 151655
#: the size of both families' token vectors (colpali-engine's ColQwen3.dim; the VultronRetriever configs' dim)
DIM = 320


@dataclass(frozen=True)
class Family:
    """One family's tiny model (its arch, the conftest fixture that builds it) and profile."""

    arch: str
    fixture: str
    profile: ModelProfile
    #: the least per-token cosine allowed (the median's bar is MEDIAN_BAR for both)
    min_bar: float = MIN_BAR
    #: the largest MaxSim difference per query token allowed
    maxsim_tolerance: float = MAXSIM_TOLERANCE


FAMILIES = {
    "colqwen3": Family("colqwen3", "colqwen3_dir", COLQWEN3),
    # The tiny Qwen3.5's A4 page has one token (of 1,761) that the F16 rounding of the language model's
    # activations moves far more than the rest, a property of these random weights, not an error of the
    # engine: with F16 GGUFs its cosine is 0.9993 on Intel AMX and 0.9976 on AMD Zen 3 (AVX2), with F32
    # GGUFs 0.99982, with an F16 language model over an F32 vision encoder 0.9907, while colpali-engine's
    # fp32 and fp64 vectors agree to 1e-7 there; the median stays at 0.999999 and the rest over 0.9995. Its
    # best matches carry the error into MaxSim (4.4e-4 per query token on Zen 3).
    "colqwen3.5": Family(
        "colqwen3.5", "colqwen35_dir", COLQWEN3_5, min_bar=0.995, maxsim_tolerance=2 * MAXSIM_TOLERANCE
    ),
}


@dataclass(frozen=True)
class Pair:
    """One input as docvec and as colpali-engine read it: token ids (an image token is the image pad's id)
    and token vectors."""

    name: str
    ids: list[int]
    want_ids: list[int]
    vectors: np.ndarray
    want: np.ndarray


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def family(request: pytest.FixtureRequest) -> Family:
    return FAMILIES[request.param]


@pytest.fixture(scope="module")
def model_dir(family: Family, request: pytest.FixtureRequest) -> Path:
    """The family's tiny model (conftest's session fixture of it, built when a test first needs it)."""
    return Path(request.getfixturevalue(family.fixture))


@pytest.fixture(scope="module")
def reference(model_dir: Path) -> ColQwenReference:
    """colpali-engine's model class on the checkpoint, fp32, its pixel bounds the checkpoint's."""
    return ColQwenReference(model_dir / "hf", threads=2)


@pytest.fixture(scope="module")
def ours(family: Family, model_dir: Path) -> Iterator[Embedder]:
    """docvec's embedder on the converted files: the head's kind makes it the family's profile."""
    files = find_tiny_model(model_dir, arch=family.arch)
    assert files is not None and files.head is not None  # the conversion exported custom_text_proj
    emb = Embedder(files, EmbedSettings(threads=2, max_pixels=family.profile.max_pixels))
    assert emb.profile is family.profile and emb.head_dim == DIM
    # the parity bar's settings are the profile's defaults
    assert (emb.flash_attention, emb.kv_cache) == (False, "f16")
    yield emb
    emb.close()


@pytest.fixture(scope="module")
def queries(ours: Embedder, reference: ColQwenReference) -> list[Pair]:
    pairs = []
    for text in TEXTS:
        want, want_ids = reference.query(text)
        ids = ours.prompt_states(ours.profile.query_template, text).token_ids.tolist()
        pairs.append(Pair(text, ids, want_ids, ours.embed_queries_multi([text])[1][0], want))
    return pairs


@pytest.fixture(scope="module")
def pages(ours: Embedder, reference: ColQwenReference) -> list[Pair]:
    pairs = []
    for name in SHAPES:
        img = shape_image(name)
        want, want_ids, size = reference.page(img)
        states = ours.image_states(img)
        assert states.size == size, name  # the processor's resize: 32-pixel multiples within its bounds
        ids = [IMAGE_PAD if i < 0 else i for i in states.token_ids.tolist()]
        pairs.append(Pair(name, ids, want_ids, ours.embed_images_multi([img])[1][0], want))
    return pairs


def _check(family: Family, kind: str, pairs: list[Pair]) -> None:
    for p in pairs:
        assert p.ids == p.want_ids, p.name  # the same prompt, the same tokens
        cos = np.sum(p.vectors * p.want, axis=1) / (
            np.linalg.norm(p.vectors, axis=1) * np.linalg.norm(p.want, axis=1)
        )
        report(f"{family.arch} {kind} {p.name[:24]!r} per-token cosine (min)", float(cos.min()))
        report(f"{family.arch} {kind} {p.name[:24]!r} per-token cosine (median)", float(np.median(cos)))
        assert np.median(cos) >= MEDIAN_BAR and cos.min() >= family.min_bar, (p.name, float(cos.min()))


def test_queries_are_every_token_of_colpali_engines_prompt(family: Family, queries: list[Pair]) -> None:
    # process_queries: the text, then ten <|endoftext|> read as the control token, each a vector
    assert all(p.want_ids[-10:] == [p.want_ids[-1]] * 10 for p in queries)
    _check(family, "query", queries)


def test_pages_are_every_token_of_colpali_engines_prompt(family: Family, pages: list[Pair]) -> None:
    _check(family, "page", pages)


def test_a_second_input_starts_from_a_clean_state(ours: Embedder, queries: list[Pair]) -> None:
    # Qwen3.5's linear-attention layers carry a recurrent state: each input starts from none (a page between
    # two runs of the same query changes nothing), and a page's vectors are the same after any other input
    page = shape_image("square-448")
    first = ours.embed_images_multi([page])[1][0]
    again = ours.embed_queries_multi([queries[0].name])[1][0]
    np.testing.assert_array_equal(again, queries[0].vectors)
    np.testing.assert_array_equal(ours.embed_images_multi([page])[1][0], first)


def test_maxsim(family: Family, queries: list[Pair], pages: list[Pair]) -> None:
    ours = np.array([[maxsim(q.vectors, p.vectors) for p in pages] for q in queries])
    want = np.array([[maxsim(q.want, p.want) for p in pages] for q in queries])
    per_token = np.abs(ours - want) / np.array([[len(q.ids)] for q in queries])
    short = np.abs(ours - want)[[len(q.ids) < 100 for q in queries]]
    report(f"{family.arch} MaxSim, largest difference for queries under 100 tokens", float(short.max()))
    report(f"{family.arch} MaxSim, largest difference from colpali-engine", float(np.abs(ours - want).max()))
    report(f"{family.arch} MaxSim, largest difference per query token", float(per_token.max()))
    assert float(per_token.max()) <= family.maxsim_tolerance, (ours, want)
    # the scores measure something: they differ between pages by far more than the tolerance
    assert float(want.std(axis=1).min()) > 10 * MAXSIM_TOLERANCE


def test_pages_batched_through_the_vision_encoder_equal_one_at_a_time(
    family: Family, model_dir: Path, ours: Embedder
) -> None:
    """Three pages of different sizes in one vision-encoder pass (``vision_batch``, llama.cpp patch 0008;
    ColQwen3's and ColQwen3.5's encoders are Qwen3-VL's graph) give the token vectors of one page a pass;
    their prompts decode as sequences of one language-model batch (Qwen3.5's linear-attention layers keep a
    state per sequence)."""
    files = find_tiny_model(model_dir, arch=family.arch)
    assert files is not None
    settings = EmbedSettings(threads=2, max_pixels=family.profile.max_pixels)
    images, (dense, tokens) = in_one_batch(files, settings, Embedder.embed_images_multi)
    want_dense, want_tokens = ours.embed_images_multi(images)
    assert float(np.min(np.sum(dense * want_dense, axis=1))) >= 0.999999
    for got, want in zip(tokens, want_tokens, strict=True):
        assert got.shape == want.shape
        cos = np.sum(got * want, axis=1)  # unit rows
        report(
            f"{family.arch} per-token cosine, 3 pages in one vision pass vs one at a time", float(cos.min())
        )
        assert cos.min() >= 0.999999
