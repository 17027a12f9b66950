"""Finding and checking model files: every bad case names the file and the reason."""

from __future__ import annotations

import shutil
from pathlib import Path

import gguf
import numpy as np
import pytest

from docvec import Embedder, ModelFileError, ModelFiles, ModelMismatchError, ModelNotFoundError
from docvec._modelfiles import read_gguf_info, resolve_model


def _fake_mmproj(path: Path, projection_dim: int) -> Path:
    w = gguf.GGUFWriter(str(path), "clip")
    w.add_bool("clip.has_vision_encoder", True)
    w.add_uint32("clip.vision.projection_dim", projection_dim)
    w.add_string("clip.projector_type", "qwen2.5vl_merger")
    w.add_tensor("v.patch_embd.weight", np.zeros((4, 4), np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_folder_pair_and_metadata(tiny_dir: Path, tiny_files: ModelFiles) -> None:
    files, lm, mm = resolve_model(tiny_dir)
    assert files == tiny_files
    assert lm.architecture == "qwen2vl" and lm.embedding_length == 64
    assert mm.is_mmproj and mm.projector == "qwen2.5vl_merger" and mm.embedding_length == 64
    assert lm.metadata["tokenizer.ggml.pre"] == "qwen2"
    pair, _, _ = resolve_model(f"{tiny_files.language_model},{tiny_files.mmproj}")
    assert pair == tiny_files


def test_header_reader_finds_the_exact_end_of_tensor_data(tiny_files: ModelFiles, tmp_path: Path) -> None:
    for src in (tiny_files.language_model, tiny_files.mmproj):
        cut = tmp_path / src.name
        cut.write_bytes(src.read_bytes()[:-1])
        with pytest.raises(ModelFileError, match=rf"{cut.name}: truncated: tensor data ends at byte"):
            read_gguf_info(cut)


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (None, "no such file"),
        (b"hello", "not a GGUF file"),
        (b"", "empty file"),
        ("first 300 bytes", "corrupt or truncated GGUF header"),
    ],
)
def test_bad_files_are_named(
    tmp_path: Path, tiny_files: ModelFiles, content: bytes | str | None, reason: str
) -> None:
    path = tmp_path / "bad.gguf"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:  # a real model's header, cut short
        path.write_bytes(tiny_files.language_model.read_bytes()[:300])
    with pytest.raises(ModelFileError) as info:
        read_gguf_info(path)
    assert str(info.value).startswith(f"{path}: {reason}") and info.value.path == str(path)


def test_swapped_and_mismatched_pairs(tmp_path: Path, tiny_files: ModelFiles) -> None:
    lm, mm = tiny_files.language_model, tiny_files.mmproj
    with pytest.raises(ModelFileError, match=r"vision encoder .mmproj., not a language model"):
        resolve_model(f"{mm},{lm}")
    other = _fake_mmproj(tmp_path / "mmproj-other.gguf", projection_dim=2048)
    with pytest.raises(ModelMismatchError, match=r"mmproj-other\.gguf does not belong to .*2048.* takes 64"):
        resolve_model(f"{lm},{other}")
    with pytest.raises(ModelMismatchError):
        Embedder(ModelFiles(lm, other))


def test_folder_rules(tmp_path: Path, tiny_files: ModelFiles) -> None:
    with pytest.raises(ModelNotFoundError, match=r"no \.gguf files"):
        resolve_model(tmp_path)
    shutil.copy(tiny_files.language_model, tmp_path / "a.gguf")
    with pytest.raises(
        ModelNotFoundError, match=r"exactly one language model GGUF and one mmproj GGUF \(found a\.gguf\)"
    ):
        resolve_model(tmp_path)
    with pytest.raises(ModelNotFoundError, match="single file lacks the vision encoder"):
        resolve_model(tmp_path / "a.gguf")
    with pytest.raises(ModelNotFoundError, match="no such file or folder"):
        resolve_model(tmp_path / "gone")


def test_registry_names_need_a_pull(tiny_files: ModelFiles) -> None:
    with pytest.raises(ModelNotFoundError, match="docvec models pull jina-v4"):
        resolve_model("jina-v4", find_registered=lambda name: None)
    files, _, _ = resolve_model("jina-v4", find_registered=lambda name: tiny_files)
    assert files == tiny_files
