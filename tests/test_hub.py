"""docvec.hub without a network: huggingface_hub resolves files from a Hugging Face cache built in tmp_path.

Every test runs with offline mode on (HF_HUB_OFFLINE and huggingface_hub's constant, which it reads at
import) and with sockets disabled, so a test that would reach the Hub fails at once instead of hanging.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2
import pytest
from huggingface_hub import constants as hf_constants
from huggingface_hub.errors import (
    GatedRepoError,
    HfHubHTTPError,
    LocalEntryNotFoundError,
    RemoteEntryNotFoundError,
    RepositoryNotFoundError,
)

from docvec import DocvecError, ModelNotFoundError, ToolError
from docvec import _hub as hub

MODEL = hub.REGISTRY["jina-v4"]
COMMIT = "0123456789abcdef0123456789abcdef01234567"


# --- fixtures -----------------------------------------------------------------------------------------


class NetworkUsedError(BaseException):  # not an Exception: docvec.hub must not wrap it
    pass


def _no_network(*args: object, **kwargs: object) -> Any:
    raise NetworkUsedError(f"test tried to use the network: {args!r}")


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Offline mode on, sockets off, and no token of the user's (huggingface_hub reads a stored login)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setattr(hf_constants, "HF_TOKEN_PATH", str(tmp_path / "hf-token"))
    # huggingface_hub reads HF_HUB_OFFLINE into a module constant at import; is_offline_mode() returns it.
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(socket.socket, "connect", _no_network)
    monkeypatch.setattr(socket.socket, "connect_ex", _no_network)
    monkeypatch.setattr(socket, "getaddrinfo", _no_network)
    monkeypatch.setattr(socket, "create_connection", _no_network)


def fill_cache(cache: Path, repo_id: str, files: dict[str, bytes], commit: str = COMMIT) -> dict[str, Path]:
    """Lay ``files`` out as huggingface_hub does.

    refs/main holds the commit; snapshots/<commit>/<file> links to blobs/<sha256>.
    """
    repo_dir = cache / ("models--" + repo_id.replace("/", "--"))
    (repo_dir / "refs").mkdir(parents=True, exist_ok=True)
    (repo_dir / "refs" / "main").write_text(commit)
    snapshot = repo_dir / "snapshots" / commit
    snapshot.mkdir(parents=True, exist_ok=True)
    (repo_dir / "blobs").mkdir(exist_ok=True)
    paths = {}
    for name, data in files.items():
        blob = repo_dir / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        pointer = snapshot / name
        pointer.parent.mkdir(parents=True, exist_ok=True)
        try:
            pointer.symlink_to(os.path.relpath(blob, pointer.parent))
        except OSError:  # no symlinks (Windows without developer mode): huggingface_hub copies too
            pointer.write_bytes(data)
        paths[name] = pointer
    return paths


def fake_gguf(tag: str) -> bytes:
    return b"GGUF\x03\x00\x00\x00" + tag.encode()


LM_Q4 = MODEL.lm_files["Q4_K_M"]
LM_DEFAULT = MODEL.lm_files[MODEL.default_quant]
MMPROJ = MODEL.mmproj_file


# --- registry -----------------------------------------------------------------------------------------


def test_registry_names() -> None:
    assert hub.registry_names() == ["jina-v4"]
    assert hub.get_model("JINA-V4") is MODEL


def test_registry_entry_matches_published_repository_and_names() -> None:
    """Names as published by Jina AI: <base>-<QUANT>.gguf in the text-retrieval GGUF repo (see hub.py)."""
    assert MODEL.lm_repo == "jinaai/jina-embeddings-v4-text-retrieval-GGUF"
    assert MODEL.mmproj_repo == "jinaai/jina-embeddings-v4-text-retrieval-GGUF"
    assert MODEL.mmproj_file == "mmproj-jina-embeddings-v4-retrieval-BF16.gguf"
    assert MODEL.revision == "main"
    assert MODEL.default_quant == "Q8_0"
    for q in ("F16", "Q8_0", "Q6_K", "Q5_K_M", "Q4_K_M", "Q3_K_M"):  # the six the model card lists by name
        assert q in MODEL.lm_files
    pattern = re.compile(
        r"jina-embeddings-v4-text-retrieval-(F16|Q\d_K(_[SM])?|Q8_0|IQ\d_(XXS|XS|NL|S|M))\.gguf"
    )
    for q, filename in MODEL.lm_files.items():
        m = pattern.fullmatch(filename)
        assert m is not None, filename
        assert m.group(1) == q
    assert MODEL.lm_files["Q4_K_M"] == "jina-embeddings-v4-text-retrieval-Q4_K_M.gguf"


def test_registry_model_is_frozen_and_hashable() -> None:
    with pytest.raises(AttributeError):
        MODEL.default_quant = "F16"  # type: ignore[misc]
    with pytest.raises(TypeError):
        MODEL.lm_files["F32"] = "x.gguf"  # type: ignore[index]
    assert hash(MODEL) == hash(hub.REGISTRY["jina-v4"])


def test_licence_notice_says_non_commercial() -> None:
    text = hub.licence_notice("jina-v4")
    assert "CC BY-NC 4.0" in text
    assert "NON-COMMERCIAL" in text.upper()
    assert MODEL.licence_id == "CC-BY-NC-4.0"
    assert MODEL.homepage in text


# --- pull from a pre-filled cache ---------------------------------------------------------------------


def test_pull_returns_cached_paths_with_content(tmp_path: Path) -> None:
    paths = fill_cache(tmp_path, MODEL.lm_repo, {LM_Q4: fake_gguf("lm"), MMPROJ: fake_gguf("mmproj")})
    files = hub.pull("jina-v4", quant="Q4_K_M", cache_dir=tmp_path)
    assert files.language_model == paths[LM_Q4]
    assert files.mmproj == paths[MMPROJ]
    assert files.language_model.read_bytes() == fake_gguf("lm")
    assert files.mmproj.read_bytes() == fake_gguf("mmproj")


def test_pull_default_quant_picks_default_file(tmp_path: Path) -> None:
    fill_cache(tmp_path, MODEL.lm_repo, {LM_DEFAULT: fake_gguf("q8"), MMPROJ: fake_gguf("mmproj")})
    files = hub.pull("jina-v4", cache_dir=tmp_path)
    assert files.language_model.name == "jina-embeddings-v4-text-retrieval-Q8_0.gguf"
    assert files.language_model.read_bytes() == fake_gguf("q8")


def test_pull_quant_is_case_insensitive(tmp_path: Path) -> None:
    fill_cache(tmp_path, MODEL.lm_repo, {LM_Q4: fake_gguf("lm"), MMPROJ: fake_gguf("mmproj")})
    assert hub.pull("jina-v4", quant="q4_k_m", cache_dir=tmp_path).language_model.name == LM_Q4


def test_pull_uses_default_hf_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hf_constants, "HF_HUB_CACHE", str(tmp_path))
    paths = fill_cache(tmp_path, MODEL.lm_repo, {LM_DEFAULT: fake_gguf("q8"), MMPROJ: fake_gguf("mmproj")})
    assert hub.pull("jina-v4") == hub.ModelFiles(paths[LM_DEFAULT], paths[MMPROJ])
    assert hub.find_cached("jina-v4") == hub.ModelFiles(paths[LM_DEFAULT], paths[MMPROJ])


def test_pull_offline_miss_names_repo_and_file(tmp_path: Path) -> None:
    fill_cache(tmp_path, MODEL.lm_repo, {LM_Q4: fake_gguf("lm")})  # mmproj missing
    with pytest.raises(ToolError) as info:
        hub.pull("jina-v4", quant="Q4_K_M", cache_dir=tmp_path)
    message = str(info.value)
    assert MODEL.mmproj_repo in message
    assert MMPROJ in message
    assert "HF_HUB_OFFLINE" in message
    assert "DOCVEC_MODEL" in message
    assert type(info.value) is ToolError


def test_pull_offline_empty_cache_names_language_model(tmp_path: Path) -> None:
    with pytest.raises(ToolError) as info:
        hub.pull("jina-v4", quant="Q6_K", cache_dir=tmp_path)
    assert MODEL.lm_repo in str(info.value)
    assert MODEL.lm_files["Q6_K"] in str(info.value)


def test_pull_passes_arguments_to_huggingface_hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[dict[str, Any]] = []

    def fake_download(**kwargs: Any) -> str:
        calls.append(kwargs)
        return str(tmp_path / kwargs["filename"])

    monkeypatch.setattr(hub, "hf_hub_download", fake_download)
    files = hub.pull("jina-v4", quant="F16", cache_dir=tmp_path, token="hf_secret")
    assert [c["filename"] for c in calls] == [MODEL.lm_files["F16"], MMPROJ]
    for c in calls:
        assert c["repo_id"] == MODEL.lm_repo
        assert c["revision"] == "main"
        assert c["cache_dir"] == tmp_path
        assert c["token"] == "hf_secret"
    assert files == hub.ModelFiles(tmp_path / MODEL.lm_files["F16"], tmp_path / MMPROJ)


# --- errors from huggingface_hub become ToolError -----------------------------------------------------


def _response(status: int) -> httpx2.Response:
    return httpx2.Response(status, request=httpx2.Request("HEAD", "https://huggingface.co/x/resolve/main/y"))


@pytest.mark.parametrize(
    ("error", "offline_mode", "expected"),
    [
        (LocalEntryNotFoundError("not cached"), True, "HF_HUB_OFFLINE"),
        (LocalEntryNotFoundError("not cached"), False, "network"),
        (GatedRepoError("gated", response=_response(403)), False, "HF_TOKEN"),
        (RepositoryNotFoundError("nope", response=_response(401)), False, "HF_TOKEN"),
        (RemoteEntryNotFoundError("404", response=_response(404)), False, "no such file"),
        (HfHubHTTPError("unauthorised", response=_response(401)), False, "HF_TOKEN"),
        (HfHubHTTPError("server", response=_response(503)), False, "HTTP 503"),
        (OSError(errno.ENOSPC, "No space left on device"), False, "disk space"),
        (httpx2.ConnectError("connection refused"), False, "network"),
        (RuntimeError("anything else"), False, "network"),
    ],
)
def test_download_errors_become_tool_errors(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    error: Exception,
    offline_mode: bool,
    expected: str,
) -> None:
    def failing_download(**kwargs: Any) -> str:
        raise error

    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", offline_mode)
    monkeypatch.setattr(hub, "hf_hub_download", failing_download)
    with pytest.raises(DocvecError) as info:
        hub.pull("jina-v4", quant="Q4_K_M", cache_dir=tmp_path)
    assert type(info.value) is ToolError
    assert info.value.__cause__ is error
    message = str(info.value)
    assert MODEL.lm_repo in message
    assert LM_Q4 in message
    assert expected in message


# --- unknown names ------------------------------------------------------------------------------------


def test_unknown_name_lists_choices(tmp_path: Path) -> None:
    calls: tuple[Callable[[], object], ...] = (
        lambda: hub.pull("jina-v9", cache_dir=tmp_path),
        lambda: hub.find_cached("jina-v9", cache_dir=tmp_path),
        lambda: hub.licence_notice("jina-v9"),
    )
    for call in calls:
        with pytest.raises(ModelNotFoundError, match="jina-v4"):
            call()


def test_unknown_quant_lists_choices(tmp_path: Path) -> None:
    calls: tuple[Callable[[], object], ...] = (
        lambda: hub.pull("jina-v4", quant="Q4_0", cache_dir=tmp_path),
        lambda: hub.find_cached("jina-v4", quant="Q4_0", cache_dir=tmp_path),
    )
    for call in calls:
        with pytest.raises(ModelNotFoundError) as info:
            call()
        assert "Q4_0" in str(info.value)
        assert "Q4_K_M" in str(info.value)
        assert "Q8_0" in str(info.value)


# --- find_cached --------------------------------------------------------------------------------------


@pytest.fixture
def no_download(monkeypatch: pytest.MonkeyPatch) -> None:
    def forbidden(**kwargs: Any) -> str:
        raise AssertionError("find_cached must not call hf_hub_download")

    monkeypatch.setattr(hub, "hf_hub_download", forbidden)


@pytest.mark.usefixtures("no_download")
def test_find_cached_returns_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", False)  # works without offline mode too
    paths = fill_cache(tmp_path, MODEL.lm_repo, {LM_Q4: fake_gguf("lm"), MMPROJ: fake_gguf("mmproj")})
    found = hub.find_cached("jina-v4", quant="Q4_K_M", cache_dir=tmp_path)
    assert found == hub.ModelFiles(paths[LM_Q4], paths[MMPROJ])
    assert found.language_model.read_bytes() == fake_gguf("lm")


@pytest.mark.usefixtures("no_download")
@pytest.mark.parametrize("present", [[LM_Q4], [MMPROJ], [LM_DEFAULT, MMPROJ]])
def test_find_cached_none_when_a_file_is_missing(tmp_path: Path, present: list[str]) -> None:
    fill_cache(tmp_path, MODEL.lm_repo, {name: fake_gguf(name) for name in present})
    assert hub.find_cached("jina-v4", quant="Q4_K_M", cache_dir=tmp_path) is None


@pytest.mark.usefixtures("no_download")
def test_find_cached_none_for_empty_or_missing_cache(tmp_path: Path) -> None:
    assert hub.find_cached("jina-v4", cache_dir=tmp_path) is None
    assert hub.find_cached("jina-v4", cache_dir=tmp_path / "does-not-exist") is None


@pytest.mark.usefixtures("no_download")
def test_find_cached_none_when_blob_was_deleted(tmp_path: Path) -> None:
    paths = fill_cache(tmp_path, MODEL.lm_repo, {LM_Q4: fake_gguf("lm"), MMPROJ: fake_gguf("mmproj")})
    if not paths[MMPROJ].is_symlink():
        pytest.skip("needs symlinks")
    paths[MMPROJ].resolve().unlink()
    assert hub.find_cached("jina-v4", quant="Q4_K_M", cache_dir=tmp_path) is None


@pytest.mark.usefixtures("no_download")
def test_find_cached_default_quant(tmp_path: Path) -> None:
    paths = fill_cache(tmp_path, MODEL.lm_repo, {LM_DEFAULT: fake_gguf("q8"), MMPROJ: fake_gguf("mmproj")})
    found = hub.find_cached("jina-v4", cache_dir=tmp_path)
    assert found is not None
    assert found.language_model == paths[LM_DEFAULT]
