"""The multi-vector head: exported from the checkpoint, loaded beside the GGUFs, and its token vectors
through llama.cpp against the PyTorch reference with the same head (read from the checkpoint itself).

Bars: per-token cosine median >= 0.99999 and min >= 0.999; the same number of tokens as the reference;
MaxSim (summed over query tokens, as ColPali and jina-embeddings-v4 score) of 3 queries x 6 images within
1e-3 of the reference's. The tiny checkpoint is bfloat16, as jina-v4 is published, so the F16 GGUFs hold its
weights unrounded and what differs is llama.cpp's arithmetic (F16 in its matmuls and attention): 9.5e-4 at
worst, on 9-token queries whose per-token errors add up in the sum. From a float32 checkpoint, whose
weights the F16 GGUFs round, it was 1.2e-3; an F32 KV cache changes nothing. A fault of the multi-vector
path is far off: keeping only the image span's tokens moves the first score by 2.7e-2.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import gguf
import numpy as np
import pytest
from PIL import Image
from typer.testing import CliRunner

from docvec import Embedder, EmbedSettings, ModelError, ModelFiles
from docvec._cli import app
from docvec._errors import ModelFileError, ModelMismatchError, ToolError
from docvec._model._head import FILE_NAME as HEAD_FILE
from docvec._model._head import KEYS, MultiVectorHead, read_head, write_head
from docvec._model._resolve import resolve_model
from docvec._tools._convert import _converter_view, find_head
from docvec_reference.jina_v4 import ReferenceEmbedder, maxsim_scores

from .helpers import MAXSIM_TOLERANCE, SHAPES, TEXTS, embed_json, page_image, report, shape_image

MEDIAN_BAR = 0.99999
MIN_BAR = 0.999

QUERIES = ["what is the total amount due?", "revenue by quarter, EMEA region", "a table of six rows"]

runner = CliRunner()


def unit_row_cos(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.sum(a.astype(np.float64) * b, axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


@pytest.fixture(scope="module")
def head_files(tiny_dir: Path) -> ModelFiles:
    files, _, _ = resolve_model(tiny_dir)
    assert files.head == tiny_dir / HEAD_FILE
    return files


@pytest.fixture(scope="module")
def mv_embedder(head_files: ModelFiles) -> Iterator[Embedder]:
    with Embedder(head_files, EmbedSettings(threads=2)) as emb:
        yield emb


@pytest.fixture(scope="module")
def images() -> dict[str, Image.Image]:
    return {name: shape_image(name) for name in SHAPES}


@pytest.fixture(scope="module")
def ours_images(mv_embedder: Embedder, images: dict[str, Image.Image]) -> tuple[np.ndarray, list[np.ndarray]]:
    return mv_embedder.embed_images_multi(list(images.values()))


@pytest.fixture(scope="module")
def reference_images(reference: ReferenceEmbedder, images: dict[str, Image.Image]) -> list[np.ndarray]:
    return reference.multi_images(list(images.values()))


# ------------------------------------------------------------------------------------------ the head file


def test_the_head_file_is_the_checkpoints_head(head_files: ModelFiles, tiny_hf: Path) -> None:
    import torch
    from safetensors.torch import load_file

    assert head_files.head is not None
    head = read_head(head_files.head, width=64)
    saved = load_file(str(tiny_hf / "model.safetensors"))
    assert saved[KEYS[0]].dtype == saved[KEYS[1]].dtype == torch.bfloat16
    np.testing.assert_array_equal(head.weight, saved[KEYS[0]].float().numpy())  # bf16 widened: exact
    np.testing.assert_array_equal(head.bias, saved[KEYS[1]].float().numpy())
    assert (head.dim, head.width) == (128, 64)
    info = resolve_model(head_files.head.parent)[0]
    assert info.head == head_files.head


# ------------------------------------------------------------------------------------------ parity


@pytest.mark.parametrize("index", range(len(SHAPES)), ids=list(SHAPES))
def test_image_token_vectors_match_the_reference(
    index: int,
    ours_images: tuple[np.ndarray, list[np.ndarray]],
    reference_images: list[np.ndarray],
    reference: ReferenceEmbedder,
    images: dict[str, Image.Image],
) -> None:
    name = list(SHAPES)[index]
    ours, ref = ours_images[1][index], reference_images[index]
    # every token of the image prompt: template, vision markers, image tokens
    assert ours.shape == ref.shape == (len(reference.token_ids_image(images[name])), 128)
    assert ours.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1, atol=1e-5)
    cos = unit_row_cos(ours, ref)
    report(f"multi-vector image {name} ({len(cos)} tokens): per-token cosine median", float(np.median(cos)))
    report(f"multi-vector image {name}: per-token cosine min", float(cos.min()))
    assert float(np.median(cos)) >= MEDIAN_BAR and float(cos.min()) >= MIN_BAR


def test_the_single_vectors_are_embed_images(
    mv_embedder: Embedder, ours_images: tuple[np.ndarray, list[np.ndarray]], images: dict[str, Image.Image]
) -> None:
    dense, tokens = ours_images
    assert dense.shape == (len(images), mv_embedder.dim) and len(tokens) == len(images)
    np.testing.assert_array_equal(dense, mv_embedder.embed_images(list(images.values())))


@pytest.mark.parametrize("kind", ["queries", "passages"])
def test_text_token_vectors_match_the_reference(
    kind: str, mv_embedder: Embedder, reference: ReferenceEmbedder
) -> None:
    if kind == "queries":
        dense, ours = mv_embedder.embed_queries_multi(TEXTS)
        ref, prompt = reference.multi_queries(TEXTS), "Query: {text}"
        np.testing.assert_array_equal(dense, mv_embedder.embed_queries(TEXTS))
    else:
        dense, ours = mv_embedder.embed_passages_multi(TEXTS)
        ref, prompt = reference.multi_passages(TEXTS), "Passage: {text}"
        np.testing.assert_array_equal(dense, mv_embedder.embed_passages(TEXTS))
    for text, a, b in zip(TEXTS, ours, ref, strict=True):
        # every token of the prompt and the text
        assert a.shape == b.shape == (len(reference.token_ids_text(prompt.format(text=text))), 128), text
    cos = np.concatenate([unit_row_cos(a, b) for a, b in zip(ours, ref, strict=True)])
    report(f"multi-vector text {kind} ({len(cos)} tokens): per-token cosine median", float(np.median(cos)))
    report(f"multi-vector text {kind}: per-token cosine min", float(cos.min()))
    assert float(np.median(cos)) >= MEDIAN_BAR and float(cos.min()) >= MIN_BAR


def test_maxsim_scores_match_the_reference(
    mv_embedder: Embedder,
    reference: ReferenceEmbedder,
    ours_images: tuple[np.ndarray, list[np.ndarray]],
    reference_images: list[np.ndarray],
) -> None:
    ours = maxsim_scores(mv_embedder.embed_queries_multi(QUERIES)[1], ours_images[1])
    ref = maxsim_scores(reference.multi_queries(QUERIES), reference_images)
    assert ours.shape == ref.shape == (3, 6)
    diff = float(np.abs(ours - ref).max())
    n_tokens = np.array([[len(q)] for q in reference.multi_queries(QUERIES)])
    report("MaxSim 3 queries x 6 images: largest difference from the reference", diff)
    report(
        "MaxSim 3 queries x 6 images: largest difference per query token",
        float((np.abs(ours - ref) / n_tokens).max()),
    )
    assert float((np.abs(ours - ref) / n_tokens).max()) <= MAXSIM_TOLERANCE, (ours, ref)
    # the scores measure something: they differ between images by far more than the tolerance
    assert float(ref.std(axis=1).min()) > 10 * MAXSIM_TOLERANCE


def test_one_forward_pass_gives_both(mv_embedder: Embedder, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    def counting(name: str) -> Callable[..., Any]:
        real = getattr(mv_embedder, name)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            calls.append(name)
            return real(*args, **kwargs)

        return wrapper

    monkeypatch.setattr(mv_embedder, "_image_states", counting("_image_states"))
    monkeypatch.setattr(mv_embedder, "prompt_states", counting("prompt_states"))
    mv_embedder.embed_images_multi([page_image(100, 80), page_image(80, 100)])
    mv_embedder.embed_queries_multi(["one", "two", "three"])
    assert calls == ["_image_states"] * 2 + ["prompt_states"] * 3


def test_dim_applies_to_the_single_vectors_only(mv_embedder: Embedder) -> None:
    dense, tokens = mv_embedder.embed_queries_multi(["invoice"], dim=32)
    assert dense.shape == (1, 32)  # as for embed_queries
    assert tokens[0].shape[1] == 128 and mv_embedder.head_dim == 128 and mv_embedder.has_multivector


def test_a_model_without_a_head_refuses_multi_vectors(embedder: Embedder, tiny_files: ModelFiles) -> None:
    assert tiny_files.head is None and not embedder.has_multivector and embedder.head_dim is None
    folder = re.escape(str(tiny_files.language_model.parent))
    calls: list[Callable[[], object]] = [
        lambda: embedder.embed_queries_multi(["x"]),
        lambda: embedder.embed_passages_multi(["x"]),
        lambda: embedder.embed_images_multi(["/no/such/image.png"]),  # refused before the input is read
    ]
    for call in calls:
        with pytest.raises(ModelError, match=rf"model in {folder} has no multi-vector head") as info:
            call()
        assert "docvec models convert" in str(info.value) and "docvec models pull jina-v4" in str(info.value)
    assert embedder.embed_queries(["x"]).shape == (1, 64)  # single vectors as before


# ------------------------------------------------------------------------------------------ loading


def _write_raw_head(path: Path, tensors: dict[str, np.ndarray], arch: str = "docvec.mvhead") -> Path:
    """A GGUF written without docvec's checks (write_head refuses what these tests need)."""
    w = gguf.GGUFWriter(str(path), arch)
    for name, t in tensors.items():
        w.add_tensor(name, np.ascontiguousarray(t, np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_bad_heads_fail_the_open_naming_the_file(tmp_path: Path, tiny_files: ModelFiles) -> None:
    lm, mm = tiny_files.language_model, tiny_files.mmproj
    rng = np.random.default_rng(1)
    narrow = write_head(
        tmp_path / "narrow.gguf", rng.normal(size=(128, 32)), rng.normal(size=128), source="t"
    )
    with pytest.raises(
        ModelMismatchError, match=re.escape(str(narrow)) + r" does not belong .* 32-wide .* 64"
    ):
        Embedder(ModelFiles(lm, mm, narrow))
    cases: dict[str, tuple[Path, str]] = {
        "bad shapes": (
            _write_raw_head(
                tmp_path / "shapes.gguf", {KEYS[0]: rng.normal(size=(128, 64)), KEYS[1]: np.ones(64)}
            ),
            r"bad shapes: weight \(128, 64\), bias \(64,\)",
        ),
        "NaN": (
            _write_raw_head(
                tmp_path / "nan.gguf", {KEYS[0]: np.full((128, 64), np.nan), KEYS[1]: np.ones(128)}
            ),
            "NaN or infinite",
        ),
        "no bias": (
            _write_raw_head(tmp_path / "half.gguf", {KEYS[0]: np.ones((128, 64))}),
            "lacks the tensor",
        ),
        "not a head": (mm, "not a multi-vector head"),
        "not a GGUF": (tmp_path / "text.gguf", "not a readable GGUF file"),
        "missing": (tmp_path / "gone.gguf", "no such file"),
    }
    (tmp_path / "text.gguf").write_text("hello")
    for what, (path, reason) in cases.items():
        with pytest.raises(ModelFileError, match=reason) as info:
            Embedder(ModelFiles(lm, mm, path))
        assert info.value.path == str(path), what


# ------------------------------------------------------------------------------------------ the command line


def test_embed_multivector_json_matches_the_library(
    tiny_dir: Path, mv_embedder: Embedder, tmp_path: Path
) -> None:
    img = tmp_path / "page.png"
    page_image(300, 420).save(img)
    rows = embed_json(tiny_dir, img, "--multivector")
    expected = [
        mv_embedder.embed_queries_multi(["invoice total"]),
        mv_embedder.embed_passages_multi(["a passage"]),
        mv_embedder.embed_images_multi([img]),
    ]
    for row, (dense, tokens) in zip(rows, expected, strict=True):
        assert row.tokens is not None
        np.testing.assert_allclose(row.vector, dense[0], atol=1e-6)
        np.testing.assert_allclose(np.array(row.tokens), tokens[0], atol=1e-6)
    # without --multivector: the same vectors, no tokens
    plain = embed_json(tiny_dir, img)
    assert all(p.tokens is None and p.vector == m.vector for p, m in zip(plain, rows, strict=True))
    args = ["embed", "--model", str(tiny_dir), "-q", "invoice total", "-p", "a passage", "-i", str(img)]
    assert "tokens" not in json.loads(runner.invoke(app, [*args, "--json"]).stdout)[0]

    table = runner.invoke(app, [*args[:5], "--multivector"])
    assert table.exit_code == 0 and f"{len(expected[0][1][0])} x 128" in table.stdout


def test_embed_multivector_without_a_head_says_how_to_get_one(tmp_path: Path, tiny_files: ModelFiles) -> None:
    folder = tmp_path / "m"
    folder.mkdir()
    for src in (tiny_files.language_model, tiny_files.mmproj):
        (folder / src.name).hardlink_to(src)
    r = runner.invoke(app, ["embed", "--model", str(folder), "-q", "x", "--multivector"])
    assert r.exit_code == 2
    assert "has no multi-vector head" in r.output and "docvec models pull jina-v4" in r.output


@pytest.mark.slow
def test_convert_exports_the_head_to_every_model_folder(tiny_dir: Path, tmp_path: Path) -> None:
    r = runner.invoke(
        app,
        ["models", "convert", str(tiny_dir / "hf"), str(tmp_path), "--outtype", "f16", "--quantize", "Q8_0"],
    )
    assert r.exit_code == 0, r.output
    assert f"head{tmp_path / HEAD_FILE}" in "".join(r.stdout.split())  # rich wraps long paths
    # the same head as the tiny model's build, and the quantized folder links it
    assert (tmp_path / HEAD_FILE).read_bytes() == (tiny_dir / HEAD_FILE).read_bytes()
    assert (tmp_path / "Q8_0" / HEAD_FILE).samefile(tmp_path / HEAD_FILE)
    assert resolve_model(tmp_path / "Q8_0")[0].head == tmp_path / "Q8_0" / HEAD_FILE
    assert not list(tmp_path.glob(".convert-*"))  # the converter's view of the checkpoint is gone


@pytest.mark.slow
def test_a_checkpoint_without_a_head_converts_as_before(tiny_dir: Path, tmp_path: Path) -> None:
    from safetensors.torch import load_file

    hf = tmp_path / "hf"
    shutil.copytree(tiny_dir / "hf", hf)
    tensors = load_file(str(hf / "model.safetensors"))
    _save(hf / "model.safetensors", {k: v for k, v in tensors.items() if k not in KEYS})
    out = tmp_path / "out"
    stale = write_head(out / HEAD_FILE, np.ones((128, 64)), np.ones(128), source="an earlier conversion")
    r = runner.invoke(app, ["models", "convert", str(hf), str(out), "--outtype", "f16", "--name", "m"])
    assert r.exit_code == 0, r.output
    assert "head none: the checkpoint has no multi_vector_projector" in " ".join(r.stdout.split())
    assert not stale.exists()  # it belonged to other weights
    assert sorted(p.name for p in out.glob("*.gguf")) == ["m-F16.gguf", "mmproj-m-F16.gguf"]
    files = resolve_model(out)[0]
    assert files.head is None
    with Embedder(files, EmbedSettings(threads=1)) as emb:
        assert emb.embed_queries(["ok"]).shape == (1, 64) and not emb.has_multivector


# ------------------------------------------------------------------------------------------ finding the head


def _save(path: Path, tensors: dict[str, Any]) -> Path:
    from safetensors.torch import save_file

    path.parent.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(path), metadata={"format": "pt"})
    return path


def _lora_checkpoint(
    folder: Path, *, r: int = 4, alpha: float = 8.0, config: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A checkpoint laid out like jina-embeddings-v4's: the head beside the backbone's weights, per-task LoRA
    factors (and LoRA of other modules) in adapters/. Returns the tensors."""
    import torch

    g = torch.Generator().manual_seed(7)
    t = {
        "weight": torch.randn(128, 48, generator=g),
        "bias": torch.randn(128, generator=g),
        **{f"A.{task}": torch.randn(r, 48, generator=g) for task in ("retrieval", "text-matching", "code")},
        **{f"B.{task}": torch.randn(128, r, generator=g) for task in ("retrieval", "text-matching", "code")},
    }
    (folder / "config.json").parent.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text("{}")
    _save(
        folder / "model.safetensors",
        {"model.norm.weight": torch.ones(48), KEYS[0]: t["weight"], KEYS[1]: t["bias"]},
    )
    lora = {"base_model.model.model.layers.0.self_attn.q_proj.lora_A.retrieval.weight": torch.ones(r, 48)}
    for task in ("retrieval", "text-matching", "code"):
        lora[f"base_model.model.multi_vector_projector.lora_A.{task}.weight"] = t[f"A.{task}"]
        lora[f"base_model.model.multi_vector_projector.lora_B.{task}.weight"] = t[f"B.{task}"]
    _save(folder / "adapters" / "adapter_model.safetensors", lora)
    cfg = {
        "r": r,
        "lora_alpha": alpha,
        "task_names": ["retrieval", "text-matching", "code"],
        **(config or {}),
    }
    (folder / "adapters" / "adapter_config.json").write_text(json.dumps(cfg))
    return t


def _expected(t: dict[str, Any], task: str, scale: float) -> np.ndarray:
    return (t["weight"].double() + scale * t[f"B.{task}"].double() @ t[f"A.{task}"].double()).float().numpy()


def test_the_heads_lora_is_merged_with_its_adapters_scale(tmp_path: Path) -> None:
    t = _lora_checkpoint(tmp_path / "ckpt", r=4, alpha=8.0)
    head = find_head(tmp_path / "ckpt")
    assert head is not None
    np.testing.assert_allclose(head.weight, _expected(t, "retrieval", 8.0 / 4), rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(head.bias, t["bias"].numpy())  # LoRA leaves the bias alone
    assert "task 'retrieval'" in head.source and "r=4, alpha=8, s = alpha/r = 2" in head.source
    # without the LoRA the weight would differ: the merge is not a no-op
    assert not np.allclose(head.weight, t["weight"].numpy(), atol=1e-3)

    code = find_head(tmp_path / "ckpt", task="code")
    assert code is not None
    np.testing.assert_allclose(code.weight, _expected(t, "code", 2.0), rtol=1e-6, atol=1e-6)
    with pytest.raises(ToolError, match=r"LoRA has the tasks code, retrieval, text-matching, not 'nope'"):
        find_head(tmp_path / "ckpt", task="nope")

    t = _lora_checkpoint(tmp_path / "rs", r=4, alpha=8.0, config={"use_rslora": True})
    rs = find_head(tmp_path / "rs")
    assert rs is not None
    np.testing.assert_allclose(rs.weight, _expected(t, "retrieval", 8.0 / 2), rtol=1e-6, atol=1e-6)


def test_a_lora_without_its_config_is_refused(tmp_path: Path) -> None:
    _lora_checkpoint(tmp_path, r=4)
    (tmp_path / "adapters" / "adapter_config.json").unlink()
    with pytest.raises(
        ToolError, match=r"adapter_model.safetensors holds LoRA factors .* no adapter_config.json"
    ):
        find_head(tmp_path)
    (tmp_path / "adapters" / "adapter_config.json").write_text(json.dumps({"r": 8, "lora_alpha": 8}))
    with pytest.raises(
        ToolError, match=r"lora_A.retrieval.weight has rank 4, but r=8 in .*adapter_config.json"
    ):
        find_head(tmp_path)


def test_a_sharded_bf16_checkpoint_and_the_converters_view_of_it(tmp_path: Path) -> None:
    import torch
    from safetensors import safe_open

    g = torch.Generator().manual_seed(3)
    shards = {
        "model-00001-of-00002.safetensors": {"model.embed_tokens.weight": torch.randn(10, 48, generator=g)},
        "model-00002-of-00002.safetensors": {
            "model.norm.weight": torch.randn(48, generator=g),
            KEYS[0]: torch.randn(128, 48, generator=g).to(torch.bfloat16),
            KEYS[1]: torch.randn(128, generator=g).to(torch.bfloat16),
        },
    }
    weight_map = {}
    for name, tensors in shards.items():
        _save(tmp_path / name, tensors)
        weight_map.update(dict.fromkeys(tensors, name))
    (tmp_path / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {}, "weight_map": weight_map})
    )
    (tmp_path / "config.json").write_text("{}")
    head = find_head(tmp_path)
    assert head is not None
    second = shards["model-00002-of-00002.safetensors"]
    np.testing.assert_array_equal(head.weight, second[KEYS[0]].float().numpy())  # bf16 widened exactly
    np.testing.assert_array_equal(head.bias, second[KEYS[1]].float().numpy())

    out = tmp_path / "out"
    out.mkdir()
    with _converter_view(tmp_path, out) as view:
        assert view != tmp_path and view.name == tmp_path.name
        index = json.loads((view / "model.safetensors.index.json").read_text())["weight_map"]
        assert index == {
            "model.embed_tokens.weight": "model-00001-of-00002.safetensors",
            "model.norm.weight": "model-00002-of-00002.safetensors",
        }
        assert (view / "model-00001-of-00002.safetensors").is_symlink()  # left as it is
        with safe_open(str(view / "model-00002-of-00002.safetensors"), "pt") as f:
            assert list(f.keys()) == ["model.norm.weight"]
            assert torch.equal(f.get_tensor("model.norm.weight"), second["model.norm.weight"])
        assert find_head(view) is None
    assert not view.exists() and not list(out.iterdir())


def test_a_checkpoint_without_a_head_has_none(tiny_hf: Path, tmp_path: Path) -> None:
    import torch

    (tmp_path / "config.json").write_text("{}")
    _save(tmp_path / "model.safetensors", {"model.norm.weight": torch.ones(4)})
    assert find_head(tmp_path) is None
    # and the converter reads it as it is, not a copy
    with _converter_view(tmp_path, tmp_path) as view:
        assert view == tmp_path
    head = find_head(tiny_hf)
    assert head is not None and head.width == 64 and KEYS[0] in head.source


def test_the_head_keeps_numpy_blas_to_one_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """numpy's BLAS works on one thread during the head's product, as many as before after it: its worker
    threads, left spinning after a product, took the cores from llama.cpp's next call (a VultronRetriever
    Flash query 0.21 s with them, 0.11 s without; docvec._model._blas)."""
    from threadpoolctl import threadpool_info

    import docvec._model._head as head_module

    def blas_threads() -> list[int]:
        return [int(i["num_threads"]) for i in threadpool_info() if i["user_api"] == "blas"]

    inside: list[list[int]] = []
    real = head_module.one_blas_thread

    @contextlib.contextmanager
    def watched() -> Iterator[None]:
        with real():
            inside.append(blas_threads())
            yield

    monkeypatch.setattr(head_module, "one_blas_thread", watched)
    before = blas_threads()
    rng = np.random.default_rng(0)
    head = MultiVectorHead(rng.standard_normal((8, 16)).astype(np.float32), np.zeros(8, np.float32))
    out = head(rng.standard_normal((300, 16)).astype(np.float32))
    assert out.shape == (300, 8) and np.allclose(np.linalg.norm(out, axis=1), 1.0)
    assert before and inside == [[1] * len(before)]
    assert blas_threads() == before
