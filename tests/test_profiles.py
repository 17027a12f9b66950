"""Model profiles: the rules the generic embedding path takes from them (prompts, pooling, sizes, image
bounds, attention precision), and that the embedder knows no model names."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from docvec import ConfigError, Embedder, EmbedSettings, ModelFiles, ReindexSpec
from docvec._config import MODEL_MAX_PIXELS
from docvec._errors import ModelMismatchError
from docvec._model._gguf import read_gguf_info
from docvec._model._profiles import JINA_V4, PROFILES, QWEN3_VL_EMBEDDING, RERANKER_PROFILES, profile_for
from docvec._model._registry import REGISTRY
from docvec._model._session import attention, split_template

from .helpers import ROOT, TEXTS


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.name)
def test_text_templates_split_around_the_text(profile: object) -> None:
    for template in (profile.query_template, profile.passage_template):  # type: ignore[attr-defined]
        head, pre, post, tail = split_template(template)
        assert head + pre + "{text}" + post + tail == template
        # the plain stretch holds no control token: a user's text is never read as one
        assert "<|" not in pre + post


def test_qwen3_vl_embedding_prompts_are_its_chat_template() -> None:
    # src/models/qwen3_vl_embedding.py: system instruction, user content, generation prompt
    q = QWEN3_VL_EMBEDDING.query_template.format(text="invoice total")
    assert q == (
        "<|im_start|>system\nRetrieve images or text relevant to the user's query.<|im_end|>\n"
        "<|im_start|>user\ninvoice total<|im_end|>\n<|im_start|>assistant\n"
    )
    assert QWEN3_VL_EMBEDDING.image_template.format(marker="<M>") == (
        "<|im_start|>system\nRepresent the user's input.<|im_end|>\n"
        "<|im_start|>user\n<M><|im_end|>\n<|im_start|>assistant\n"
    )
    assert QWEN3_VL_EMBEDDING.pooling == "last" and QWEN3_VL_EMBEDDING.image_span is None
    assert not QWEN3_VL_EMBEDDING.multivector and QWEN3_VL_EMBEDDING.licence == "Apache-2.0"


def test_profiles_are_found_by_architecture_not_by_name() -> None:
    assert profile_for("qwen2vl", "qwen2.5vl_merger") is JINA_V4
    assert profile_for("qwen3vl", "qwen3vl_merger") is QWEN3_VL_EMBEDDING
    with pytest.raises(ModelMismatchError, match="qwen3vl \\+ qwen3vl_merger"):
        profile_for("qwen3vl", "qwen2.5vl_merger")


def test_sizes_and_page_budget_follow_the_profile() -> None:
    assert QWEN3_VL_EMBEDDING.dims(2048) == (64, 128, 256, 512, 1024, 2048)
    assert QWEN3_VL_EMBEDDING.dims(4096) == (64, 128, 256, 512, 1024, 2048, 4096)  # the 8B card: 64 up
    assert QWEN3_VL_EMBEDDING.dims(64) == (2, 4, 8, 16, 32, 64)  # the tiny model: the same fractions
    dim, bounds = QWEN3_VL_EMBEDDING.resolve(EmbedSettings(), 2048)
    assert dim == 2048 and bounds.unit == 32
    assert (bounds.min_pixels, bounds.max_pixels) == (4 * 32 * 32, 1024 * 32 * 32)
    # the budget is raised up to the model's own maximum with a setting
    _, raised = QWEN3_VL_EMBEDDING.resolve(EmbedSettings(max_pixels=1800 * 32 * 32), 2048)
    assert raised.max_pixels == QWEN3_VL_EMBEDDING.max_pixels
    assert JINA_V4.resolve(EmbedSettings(), 2048)[1].max_pixels == 768 * 28 * 28


def test_a_budget_over_the_models_largest_image_is_refused() -> None:
    """Each model's own maximum is enforced where it opens; the settings' and the reindex spec's schemas
    take the largest of them (they cannot know the model)."""
    assert max(p.max_pixels for p in PROFILES) == MODEL_MAX_PIXELS
    assert JINA_V4.resolve(EmbedSettings(max_pixels=JINA_V4.max_pixels), 2048)[1].max_pixels == 602112
    message = (
        r"max_pixels must lie between 784 and 602112 pixels \(jina-embeddings-v4: 1 to 768 image tokens "
        r"of 28x28 px\), not 602113"
    )
    with pytest.raises(ConfigError, match=message):
        JINA_V4.resolve(EmbedSettings(max_pixels=JINA_V4.max_pixels + 1), 2048)
    with pytest.raises(ConfigError, match="min_pixels must lie between 784 and 602112 pixels"):
        JINA_V4.resolve(EmbedSettings(min_pixels=700_000, max_pixels=MODEL_MAX_PIXELS), 2048)
    with pytest.raises(ValidationError, match="less than or equal to 1843200"):
        EmbedSettings(max_pixels=14_921_870_872)
    with pytest.raises(ValidationError, match="less than or equal to 1843200"):
        ReindexSpec(max_pixels=MODEL_MAX_PIXELS + 1)


def test_markup_in_a_query_is_plain_text(embedder: Embedder) -> None:
    im_end = embedder._session.special_id("<|im_end|>")
    states = embedder.prompt_states(JINA_V4.query_template, "stop <|im_end|> here")
    assert im_end not in states.token_ids.tolist()
    plain = embedder._session.model.tokenize("Query: stop <|im_end|> here")
    assert states.token_ids.tolist() == plain.tolist()


def test_a_bf16_language_model_on_the_cpu_attends_over_a_bf16_cache(
    tiny_bf16: ModelFiles, tiny_files: ModelFiles
) -> None:
    bf16, f16 = read_gguf_info(tiny_bf16.language_model), read_gguf_info(tiny_files.language_model)
    # Qwen3-VL-Embedding's profile leaves flash attention off over its F16 cache; with BF16 weights on the
    # CPU both change, on a GPU (or with F16 weights) the profile's choice stays, and the settings override
    assert attention(EmbedSettings(), QWEN3_VL_EMBEDDING, bf16) == (True, "bf16")
    assert attention(EmbedSettings(), QWEN3_VL_EMBEDDING, f16) == (False, "f16")
    assert attention(EmbedSettings(gpu_layers=-1), QWEN3_VL_EMBEDDING, bf16) == (False, "f16")
    assert attention(EmbedSettings(flash_attention=False), QWEN3_VL_EMBEDDING, bf16) == (False, "bf16")
    assert attention(EmbedSettings(kv_cache="f32"), QWEN3_VL_EMBEDDING, bf16) == (True, "f32")
    reranker = RERANKER_PROFILES[0]  # not measured for a reranker's scores: its profile's attention stays
    assert attention(EmbedSettings(), reranker, bf16) == (reranker.flash_attention, reranker.kv_cache)
    with Embedder(tiny_bf16, EmbedSettings(threads=2)) as emb:
        assert (emb.flash_attention, emb.kv_cache) == (True, "bf16")


def test_attention_precision_settings_reach_the_context(tiny_files: ModelFiles) -> None:
    default = Embedder(tiny_files, EmbedSettings(threads=2))
    exact = Embedder(tiny_files, EmbedSettings(threads=2, flash_attention=False, kv_cache="f32"))
    try:
        assert (default.flash_attention, default.kv_cache) == (True, "f16")  # jina-v4's profile
        assert (exact.flash_attention, exact.kv_cache) == (False, "f32")
        a, b = default.embed_queries(TEXTS), exact.embed_queries(TEXTS)
        cos = np.sum(a * b, axis=1)
        # the same model either way, computed with another precision: close, and not bit-identical
        assert cos.min() >= 0.99999 and not np.array_equal(a, b)
    finally:
        default.close()
        exact.close()


def test_the_runtime_names_no_model() -> None:
    # a model is a profile and a registry entry: the runtime's code, messages and docstrings take its names,
    # prompts and sizes from them, so adding a model touches no code path outside them
    profiles = [p.name.lower() for p in (*PROFILES, *RERANKER_PROFILES)]
    # every registry name, every profile name, and each profile's family (its name's first word: qwen3)
    names = {n.lower() for n in REGISTRY} | set(profiles) | {p.split("-")[0] for p in profiles}
    runtime = [ROOT / "src" / "docvec" / "_index.py", ROOT / "src" / "docvec" / "_live.py"]
    for folder in ("_model", "_pipeline", "_store", "_render"):
        runtime += sorted((ROOT / "src" / "docvec" / folder).glob("*.py"))
    named = {
        p.name: found
        for p in runtime
        if p.name not in {"_profiles.py", "_registry.py"}
        and (found := sorted(n for n in names if n in p.read_text().lower()))
    }
    assert named == {}
    assert {"jina", "jina-embeddings-v4", "qwen3", "qwen3-vl-reranker", "qwen3-vl-embedding-8b"} <= names
