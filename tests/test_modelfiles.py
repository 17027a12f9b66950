"""Finding and checking model files: every bad case names the file and the reason."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import gguf
import numpy as np
import pytest

from docvec import Embedder, ModelFiles, ModelNotFoundError
from docvec._errors import ModelFileError, ModelMismatchError
from docvec._model._gguf import read_gguf_info
from docvec._model._head import FILE_NAME as HEAD_FILE
from docvec._model._head import write_head
from docvec._model._resolve import resolve_model


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


def _head(path: Path, width: int = 64) -> Path:
    rng = np.random.default_rng(0)
    return write_head(path, rng.normal(size=(128, width)), rng.normal(size=128), source="test")


def _model_folder(folder: Path, files: ModelFiles) -> Path:
    """A model folder of hard links to the tiny model's two GGUFs (no head)."""
    folder.mkdir(parents=True, exist_ok=True)
    for src in (files.language_model, files.mmproj):
        (folder / src.name).hardlink_to(src)
    return folder


def test_folder_pair_and_metadata(tiny_dir: Path, tiny_files: ModelFiles) -> None:
    with_head = ModelFiles(tiny_files.language_model, tiny_files.mmproj, tiny_dir / HEAD_FILE)
    files, lm, mm = resolve_model(tiny_dir)
    assert files == with_head  # the tiny model's folder has its head
    assert lm.architecture == "qwen2vl" and lm.embedding_length == 64
    assert mm.is_mmproj and mm.projector == "qwen2.5vl_merger" and mm.embedding_length == 64
    assert lm.metadata["tokenizer.ggml.pre"] == "qwen2"
    pair, _, _ = resolve_model(f"{tiny_files.language_model},{tiny_files.mmproj}")
    assert pair == with_head  # a pair: the head in the language model's folder
    head = read_gguf_info(tiny_dir / HEAD_FILE)
    assert head.architecture == "docvec.mvhead" and head.metadata["docvec.mvhead.width"] == 64


def test_the_head_is_optional_and_found_beside_the_language_model(
    tmp_path: Path, tiny_files: ModelFiles
) -> None:
    folder = _model_folder(tmp_path / "m", tiny_files)
    lm, mm = folder / tiny_files.language_model.name, folder / tiny_files.mmproj.name
    assert resolve_model(folder)[0] == ModelFiles(lm, mm)  # no head: single vectors only
    assert resolve_model(f"{lm},{mm}")[0].head is None
    head = _head(folder / HEAD_FILE)
    assert resolve_model(folder)[0] == ModelFiles(lm, mm, head)
    assert resolve_model(f"{lm},{mm}")[0] == ModelFiles(lm, mm, head)
    # the pair's head is the one beside the language model, wherever the mmproj is
    other = tmp_path / "elsewhere"
    other.mkdir()
    (other / mm.name).hardlink_to(mm)
    assert resolve_model(f"{lm},{other / mm.name}")[0].head == head
    # in a folder the head is known by its architecture, not its name
    head.rename(folder / "jina-head.gguf")
    assert resolve_model(folder)[0].head == folder / "jina-head.gguf"


def test_bad_heads_are_named(tmp_path: Path, tiny_files: ModelFiles) -> None:
    folder = _model_folder(tmp_path / "m", tiny_files)
    lm, mm = folder / tiny_files.language_model.name, folder / tiny_files.mmproj.name
    head = _head(folder / HEAD_FILE, width=32)
    for spec in (folder, f"{lm},{mm}"):
        with pytest.raises(
            ModelMismatchError,
            match=re.escape(str(head)) + r" does not belong to .*takes 32-wide .* gives 64",
        ):
            resolve_model(spec)
    head.write_bytes(b"not a gguf at all")
    with pytest.raises(ModelFileError) as info:
        resolve_model(f"{lm},{mm}")
    assert info.value.path == str(head) and "not a GGUF file" in info.value.reason
    head.unlink()
    (folder / HEAD_FILE).hardlink_to(tiny_files.mmproj)  # the right name, the wrong kind of file
    with pytest.raises(ModelFileError, match=rf"{HEAD_FILE}: not a multi-vector head \(architecture 'clip'"):
        resolve_model(f"{lm},{mm}")
    (folder / HEAD_FILE).unlink()
    _head(folder / "a-head.gguf")
    _head(folder / "b-head.gguf")
    with pytest.raises(
        ModelNotFoundError, match=r"at most one multi-vector head \(found a-head.gguf, b-head.gguf\)"
    ):
        resolve_model(folder)
    # a head is never taken for the language model of a pair
    with pytest.raises(
        ModelFileError, match=r"a-head.gguf: this is a multi-vector head, not a language model"
    ):
        resolve_model(f"{folder / 'a-head.gguf'},{mm}")


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


def test_registry_names_need_a_pull(
    tiny_files: ModelFiles, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import docvec._model._resolve as resolve

    def registered(found: ModelFiles | None) -> None:
        monkeypatch.setattr(resolve, "find_registered", lambda name, cache_dir=None: found)

    registered(None)
    with pytest.raises(ModelNotFoundError, match="docvec models pull jina-v4"):
        resolve_model("jina-v4")
    registered(tiny_files)
    files, _, _ = resolve_model("jina-v4")
    # the tiny model's folder has a head beside its language model
    assert files == ModelFiles(
        tiny_files.language_model, tiny_files.mmproj, tiny_files.language_model.parent / HEAD_FILE
    )
    # a head the registry keeps elsewhere is the one it names
    head = _head(tmp_path / "cached-head.gguf")
    named = ModelFiles(tiny_files.language_model, tiny_files.mmproj, head)
    registered(named)
    assert resolve_model("jina-v4")[0] == named
