"""`docvec models pull` of a model published as a checkpoint only (Qwen3-VL-Embedding): downloaded with
huggingface_hub, converted here with the pinned converter, found by name offline afterwards. No network:
the Hugging Face cache is filled with the tiny Qwen3-VL-Embedding checkpoint, saved as the official one is
(``Qwen3VLForEmbedding``, one model.safetensors)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from docvec import Embedder, EmbedSettings, ModelFiles, ModelNotFoundError
from docvec._cli import app
from docvec._errors import ToolError
from docvec._model import _registry as registry
from docvec._tools import _convert
from docvec._tools._pull import pull

from .fakehub import fill_cache

pytestmark = pytest.mark.usefixtures("offline")

NAME = "qwen3-vl-embedding-2b"
MODEL = registry.REGISTRY[NAME]
HF_FILES = ("config.json", "tokenizer.json", "tokenizer_config.json", "preprocessor_config.json")


def test_the_registry_names_both_sizes_with_their_licence() -> None:
    assert set(registry.registry_names()) >= {"jina-v4", NAME, "qwen3-vl-embedding-8b"}
    for name in (NAME, "qwen3-vl-embedding-8b"):
        m = registry.get_model(name)
        assert m.checkpoint_repo == m.lm_repo == f"Qwen/Qwen3-VL-Embedding-{name[-2:].upper()}"
        assert (m.licence_id, m.default_quant) == ("Apache-2.0", "Q8_0")
        assert "Apache-2.0" in registry.licence_notice(name)
        assert set(m.conversions) == set(m.lm_files) and m.mmproj_file is None  # converted here
    assert MODEL.revision == "9f2f7e710d6d81056aa5c0a4f04764fec6bb7bda"  # pinned (the registry says whence)


@pytest.fixture()
def docvec_cache(tmp_path: Path, llama_source: object, cache_dir: Path) -> Path:
    """A docvec cache folder of the test's own, with the pinned llama.cpp source (for the converter) linked
    in from the real one."""
    own = tmp_path / "docvec-cache"
    (own / "llama-cpp-python").mkdir(parents=True)
    for v in (cache_dir / "llama-cpp-python").iterdir():
        (own / "llama-cpp-python" / v.name).symlink_to(v)
    return own


@pytest.fixture()
def hf_cache(tmp_path: Path, qwen3vl_dir: Path) -> Path:
    """The Hugging Face cache holding Qwen/Qwen3-VL-Embedding-2B at the pinned commit: the tiny checkpoint
    saved as the official one (architecture Qwen3VLForEmbedding, one weight file, a README that names the
    reranker)."""
    hf = qwen3vl_dir / "hf"
    files = {f: (hf / f).read_bytes() for f in HF_FILES}
    config = json.loads(files["config.json"])
    files["config.json"] = json.dumps({**config, "architectures": ["Qwen3VLForEmbedding"]}).encode()
    files["model.safetensors"] = (hf / "model.safetensors").read_bytes()
    files["README.md"] = b"# Qwen3-VL-Embedding\n\n# Qwen3-VL-Reranker\n"
    cache = tmp_path / "hf-cache"
    fill_cache(cache, MODEL.lm_repo, files, commit=MODEL.revision)
    return cache


def test_pull_converts_once_and_is_found_by_name(
    hf_cache: Path, docvec_cache: Path, qwen3vl_files: ModelFiles, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = pull(NAME, cache_dir=hf_cache, docvec_cache_dir=docvec_cache, threads=2)
    root = docvec_cache / "models" / NAME / MODEL.revision
    assert files.language_model == root / "Q8_0" / f"{NAME}-Q8_0.gguf"
    assert files.mmproj.parent == root / "Q8_0" and files.head is None
    # offline, by name, afterwards: what DOCVEC_MODEL=qwen3-vl-embedding-2b opens
    assert registry.find_registered(NAME, cache_dir=docvec_cache) == files
    # a second pull converts nothing
    monkeypatch.setattr(_convert, "convert_checkpoint", lambda *a, **k: pytest.fail("converted again"))
    assert pull(NAME, cache_dir=hf_cache, docvec_cache_dir=docvec_cache) == files
    # the same model as the tiny one converted directly (Q8_0 language model: close, not equal)
    settings = EmbedSettings(threads=2)
    with Embedder(files, settings) as ours, Embedder(qwen3vl_files, settings) as direct:
        assert ours.profile.name == "qwen3-vl-embedding"
        q = ("total amount due",)
        assert float(ours.embed_queries(q)[0] @ direct.embed_queries(q)[0]) > 0.99
        page = np.full((320, 320, 3), 200, np.uint8)
        from PIL import Image

        img = [Image.fromarray(page)]
        assert float(ours.embed_images(img)[0] @ direct.embed_images(img)[0]) > 0.99


def test_pull_without_the_checkpoint_names_repo_and_file(tmp_path: Path, docvec_cache: Path) -> None:
    with pytest.raises(ToolError) as info:
        pull(NAME, cache_dir=tmp_path / "empty", docvec_cache_dir=docvec_cache)
    message = str(info.value)
    assert MODEL.lm_repo in message and "config.json" in message
    assert "docvec models convert" in message  # what to do without the Hub
    assert not (docvec_cache / "models" / NAME).exists()  # nothing half-made


def test_cli_pull_of_another_type_shows_the_licence(hf_cache: Path, docvec_cache: Path) -> None:
    r = CliRunner().invoke(
        app,
        ["models", "pull", NAME, "--quant", "F16", "--hf-cache", str(hf_cache)],
        env={"DOCVEC_CACHE_DIR": str(docvec_cache), "COLUMNS": "200"},
    )
    assert r.exit_code == 0, r.output
    assert "Apache-2.0" in r.output
    root = docvec_cache / "models" / NAME / MODEL.revision
    assert (root / f"{NAME}-F16.gguf").is_file() and (root / f"mmproj-{NAME}-F16.gguf").is_file()
    # not what the name opens (Q8_0): the folder made for it is what the user is told to use, and it opens
    assert f"DOCVEC_MODEL={root / 'F16'} " in r.output
    embedded = CliRunner().invoke(
        app,
        ["embed", "--model", str(root / "F16"), "-q", "total", "--json"],
        env={"DOCVEC_CACHE_DIR": str(docvec_cache)},
    )
    assert embedded.exit_code == 0, embedded.output
    # what a user chooses by: licence, sizes, page budget, published scores with their source, here or not
    listed = CliRunner().invoke(
        app, ["models", "list"], env={"DOCVEC_CACHE_DIR": str(docvec_cache), "COLUMNS": "250"}
    )
    assert listed.exit_code == 0, listed.output
    rows = listed.stdout.split(NAME)[1].split("qwen3-vl-embedding-8b")[0]  # the row, with its wrapped lines
    first = rows.splitlines()[0]
    for cell in ("Apache-2.0", "1024 tokens (max 1800)", "ViDoRe v1 (nDCG@5) 84.4", "│ F16"):
        assert cell in first, (cell, first)
    assert "ViDoRe v2 (nDCG@5) 65.3" in rows
    jina = listed.stdout.split("jina-v4")[1].split(NAME)[0]
    assert "CC-BY-NC-4.0" in jina and "84.1" in jina and "768 tokens" in jina
    assert "https://huggingface.co/Qwen/Qwen3-VL-Embedding-2B" in " ".join(listed.stdout.split())


def test_pull_with_a_q8_0_vision_encoder(
    hf_cache: Path, docvec_cache: Path, qwen3vl_files: ModelFiles
) -> None:
    """`pull --mmproj q8_0`: the conversion's vision encoder quantized into a model folder of its own, the
    default conversion left as it was; its page vectors stay close to the F16 mmproj's."""
    from gguf import GGUFReader

    default = pull(NAME, cache_dir=hf_cache, docvec_cache_dir=docvec_cache, threads=2)
    files = pull(NAME, mmproj="q8_0", cache_dir=hf_cache, docvec_cache_dir=docvec_cache, threads=2)
    folder = docvec_cache / "models" / NAME / MODEL.revision / "Q8_0-mmproj-Q8_0"
    assert files.language_model == folder / default.language_model.name
    assert files.language_model.samefile(default.language_model)
    assert files.mmproj.parent == folder and files.mmproj.name.endswith("-Q8_0.gguf")
    assert "Q8_0" in {t.tensor_type.name for t in GGUFReader(files.mmproj).tensors}
    assert registry.find_registered(NAME, cache_dir=docvec_cache) == default  # the name still opens this
    from PIL import Image

    img = [Image.fromarray(np.full((320, 320, 3), 90, np.uint8))]
    settings = EmbedSettings(threads=2)
    with Embedder(files, settings) as q8, Embedder(default, settings) as ref:
        assert float(q8.embed_images(img)[0] @ ref.embed_images(img)[0]) > 0.999
    with pytest.raises(ModelNotFoundError, match="no vision-encoder type 'Q4_K_M': choose Q8_0"):
        pull(NAME, mmproj="Q4_K_M", cache_dir=hf_cache, docvec_cache_dir=docvec_cache)


def test_a_late_interaction_checkpoint_pulls_with_its_head(
    tmp_path: Path, docvec_cache: Path, colqwen35_dir: Path
) -> None:
    # VultronRetriever Flash as colpali-engine saves a ColQwen3_5 (language_model.*, visual.* and
    # custom_text_proj at the top, config ColQwen3_5 with its dim): converted here, its head exported, the
    # whole found by name and opened as ColQwen3.5
    name = "vultron-flash-0.8b"
    model = registry.REGISTRY[name]
    assert (model.checkpoint_repo, model.licence_id) == (
        "vultr/VultronRetrieverFlash-Qwen3.5-0.8B",
        "Apache-2.0",
    )
    hf = colqwen35_dir / "hf"
    files = {f: (hf / f).read_bytes() for f in (*HF_FILES, "model.safetensors")}
    assert json.loads(files["config.json"])["architectures"] == ["ColQwen3_5"]
    cache = tmp_path / "hf-cache"
    fill_cache(cache, model.lm_repo, files, commit="c" * 40)
    pulled = pull(name, cache_dir=cache, docvec_cache_dir=docvec_cache, threads=2)
    assert pulled.head is not None and pulled.head.parent == pulled.language_model.parent
    assert registry.find_registered(name, cache_dir=docvec_cache) == pulled
    with Embedder(pulled, EmbedSettings(threads=2)) as emb:
        assert (emb.profile.name, emb.dim, emb.head_dim) == ("colqwen3.5", 320, 320)
        single, tokens = emb.embed_queries_multi(["total"])
        assert tokens[0].shape == (11, 320)  # the text and ten augmentation tokens, each a vector
        mean = tokens[0].astype(np.float64).mean(axis=0)
        np.testing.assert_allclose(single[0], mean / np.linalg.norm(mean), atol=1e-6)
    # what a user chooses by, in one look
    listed = CliRunner().invoke(
        app, ["models", "list"], env={"DOCVEC_CACHE_DIR": str(docvec_cache), "COLUMNS": "250"}
    )
    row = listed.stdout.split(name)[1].split("vultron-prime-8b")[0]
    for cell in (
        "Apache-2.0",
        "│ 320 ",
        "1024 tokens (max 1792)",
        "ViDoRe v3 (nDCG@10, 8 public tasks) 56.49",
        "Q8_0",
    ):
        assert cell in row, (cell, row)


def test_a_tomoro_checkpoint_pulls_in_its_own_layout(
    tmp_path: Path, docvec_cache: Path, colqwen3_dir: Path
) -> None:
    # tomoro-colqwen3-embed as its repository holds it (the model under vlm., the head as
    # embedding_proj_layer, model_type colqwen3 with remote code): converted without running that code
    from .helpers import tomoro_layout

    name = "tomoro-colqwen3-4b"
    model = registry.REGISTRY[name]
    hf = tomoro_layout(colqwen3_dir, tmp_path / "checkout")
    files = {f: (hf / f).read_bytes() for f in (*HF_FILES, "model.safetensors")}
    cache = tmp_path / "hf-cache"
    fill_cache(cache, model.lm_repo, files, commit="d" * 40)
    pulled = pull(name, quant="F16", cache_dir=cache, docvec_cache_dir=docvec_cache, threads=2)
    assert pulled.head is not None
    with Embedder(pulled, EmbedSettings(threads=2, max_pixels=64 * 32 * 32)) as emb:
        assert (emb.profile.name, emb.dim) == ("colqwen3", 320)
        assert emb.embed_queries_multi(["total"])[1][0].shape == (11, 320)
