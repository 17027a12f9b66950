"""A Hugging Face Hub for the tests, without a network: a cache laid out as huggingface_hub lays it out,
offline mode with sockets off, and a fake Hub on 127.0.0.1 answering HEAD, GET and Range requests over
real safetensors files (a checkpoint shaped as jinaai/jina-embeddings-v4), counting what it is sent.

The fixtures over these (``offline``, ``fake_hub``) are in conftest.py."""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
import struct
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import numpy as np
import pytest
from huggingface_hub import constants as hf_constants

from docvec._model import _registry as registry
from docvec._tools import _pull as pulling

MODEL = registry.REGISTRY["jina-v4"]
COMMIT = "0123456789abcdef0123456789abcdef01234567"


# --- offline -----------------------------------------------------------------------------------------


class NetworkUsedError(BaseException):  # not an Exception: docvec._tools._pull must not wrap it
    pass


def _no_network(*args: object, **kwargs: object) -> Any:
    raise NetworkUsedError(f"test tried to use the network: {args!r}")


_REAL_CONNECT = socket.socket.connect
_REAL_CONNECT_EX = socket.socket.connect_ex
_REAL_GETADDRINFO = socket.getaddrinfo
_REAL_CREATE_CONNECTION = socket.create_connection


def go_offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Offline mode on, sockets off, and no token of the user's (huggingface_hub reads a stored login);
    HOME in tmp_path, so that docvec's default cache folder (~/.cache/docvec) is never the user's."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
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
assert MODEL.mmproj_file is not None  # jina-v4 publishes its mmproj
MMPROJ = MODEL.mmproj_file


assert MODEL.head_repo is not None
HEAD_REPO: str = MODEL.head_repo
INDEX = MODEL.head_index
SHARDS = ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors")
ADAPTER_CONFIG = "adapters/adapter_config.json"
ADAPTER = "adapters/adapter_model.safetensors"
TASKS = ("retrieval", "text-matching", "code")
W_KEY, B_KEY = "multi_vector_projector.weight", "multi_vector_projector.bias"
# small, but with alpha/r = 2: a merge that used alpha alone, r alone or no scale would show
DIM, WIDTH, RANK, ALPHA = 128, 256, 8, 16
COMMIT2 = "fedcba9876543210fedcba9876543210fedcba98"


@dataclass
class FakeHub:
    """What the fake Hub serves (``repos``: repo id -> file path -> bytes, at ``commit``) and what it saw."""

    repos: dict[str, dict[str, bytes]] = field(default_factory=dict)
    commit: str = COMMIT
    honour_range: bool = True
    url: str = ""
    #: body bytes sent by GET, per "repo/path"
    sent: Counter[str] = field(default_factory=Counter)
    #: every request: (method, "repo/path", Range header or None, revision asked for)
    requests: list[tuple[str, str, str | None, str]] = field(default_factory=list)
    stop: Callable[[], None] = lambda: None

    def gets(self, name: str) -> list[str | None]:
        """The Range headers of the GETs of ``name`` ("repo/path")."""
        return [r for m, n, r, _ in self.requests if m == "GET" and n == name]

    def asked_of(self, repo: str) -> list[tuple[str, str, str | None, str]]:
        """The requests for files of ``repo``."""
        return [q for q in self.requests if q[1].startswith(repo + "/")]


def _handler(hub_state: FakeHub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        """HEAD and GET /<repo>/resolve/<revision>/<path>, answered as the Hub answers them: X-Repo-Commit,
        ETag and Content-Length; 206 and Content-Range for a Range; 404 with X-Error-Code for what is not
        there (huggingface_hub turns that code into its RemoteEntryNotFoundError and the like)."""

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def do_HEAD(self) -> None:
            self._answer(send_body=False)

        def do_GET(self) -> None:
            self._answer(send_body=True)

        def _error(self, code: str) -> None:
            self.send_response(404)
            self.send_header("X-Error-Code", code)
            self.send_header("X-Repo-Commit", hub_state.commit)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def _answer(self, send_body: bool) -> None:
            if self.path == "/":  # the Hub's home page: what docvec's pull looks at first (not counted)
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            m = re.fullmatch(r"/([^/]+/[^/]+)/resolve/([^/]+)/(.+)", self.path.split("?")[0])
            assert m is not None, self.path
            repo, revision, name = m.group(1), unquote(m.group(2)), unquote(m.group(3))
            rng = self.headers.get("Range")
            hub_state.requests.append((self.command, f"{repo}/{name}", rng, revision))
            files = hub_state.repos.get(repo)
            if files is None:
                return self._error("RepoNotFound")
            if revision not in ("main", hub_state.commit):
                return self._error("RevisionNotFound")
            data = files.get(name)
            if data is None:
                return self._error("EntryNotFound")
            body, status = data, 200
            ranged = re.fullmatch(r"bytes=(\d+)-(\d*)", rng or "")
            if ranged and hub_state.honour_range:
                start = int(ranged.group(1))
                stop = min(int(ranged.group(2)) + 1 if ranged.group(2) else len(data), len(data))
                body, status = data[start:stop], 206
            self.send_response(status)
            self.send_header("X-Repo-Commit", hub_state.commit)
            self.send_header("ETag", f'"{hashlib.sha256(data).hexdigest()}"')
            self.send_header("Accept-Ranges", "bytes")
            self.send_header("Content-Length", str(len(body)))
            if status == 206:
                self.send_header("Content-Range", f"bytes {start}-{stop - 1}/{len(data)}")
            self.end_headers()
            if not send_body:
                return
            try:
                for i in range(0, len(body), 1 << 16):
                    chunk = body[i : i + (1 << 16)]
                    # counted before it is sent: the client may be done (and the test looking) before
                    # this thread runs again
                    hub_state.sent[f"{repo}/{name}"] += len(chunk)
                    self.wfile.write(chunk)
            except OSError:  # the client hung up: it had what it wanted
                pass

    return Handler


def _loopback(host: object) -> bool:
    return host in ("127.0.0.1", "localhost", "::1")


def _connect(sock: socket.socket, address: Any) -> Any:
    if not _loopback(address[0]):
        raise NetworkUsedError(f"test tried to reach {address!r}")
    return _REAL_CONNECT(sock, address)


def _connect_ex(sock: socket.socket, address: Any) -> Any:
    if not _loopback(address[0]):
        raise NetworkUsedError(f"test tried to reach {address!r}")
    return _REAL_CONNECT_EX(sock, address)


def _getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
    if not _loopback(host):
        raise NetworkUsedError(f"test tried to resolve {host!r}")
    return _REAL_GETADDRINFO(host, *args, **kwargs)


def _create_connection(address: Any, *args: Any, **kwargs: Any) -> Any:
    if not _loopback(address[0]):
        raise NetworkUsedError(f"test tried to reach {address!r}")
    return _REAL_CREATE_CONNECTION(address, *args, **kwargs)


def run_fake_hub(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHub]:
    """A Hub on 127.0.0.1, online mode, sockets allowed to loopback only."""
    state = FakeHub()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_port}"
    stopped = False

    def stop() -> None:
        nonlocal stopped
        if not stopped:
            server.shutdown()
            server.server_close()
            stopped = True

    state.stop = stop
    # what HF_ENDPOINT does: huggingface_hub reads it into these constants at import (as HF_HUB_OFFLINE)
    monkeypatch.setattr(hf_constants, "ENDPOINT", state.url)
    monkeypatch.setattr(
        hf_constants, "HUGGINGFACE_CO_URL_TEMPLATE", state.url + "/{repo_id}/resolve/{revision}/{filename}"
    )
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(socket.socket, "connect", _connect)
    monkeypatch.setattr(socket.socket, "connect_ex", _connect_ex)
    monkeypatch.setattr(socket, "getaddrinfo", _getaddrinfo)
    monkeypatch.setattr(socket, "create_connection", _create_connection)
    yield state
    stop()
    thread.join(timeout=5)


@dataclass
class Checkpoint:
    """A fake jina-embeddings-v4 checkpoint: its files, and the float32 values of what it holds."""

    files: dict[str, bytes]
    weight: np.ndarray
    bias: np.ndarray
    #: task -> (lora_A [r, width], lora_B [dim, r])
    lora: dict[str, tuple[np.ndarray, np.ndarray]]
    #: task -> lora_B's bias [dim], when the adapter has lora_bias
    lora_bias: dict[str, np.ndarray]

    def merged(self, task: str = "retrieval") -> np.ndarray:
        """W + (alpha/r)·B·A for ``task``, in float32."""
        a, b = self.lora[task]
        return self.weight + np.float32(ALPHA / RANK) * (b @ a)


def build_checkpoint(
    *,
    seed: int = 0,
    dtype: str = "bfloat16",
    tasks: tuple[str, ...] = TASKS,
    projector_lora: bool = True,
    single_task: bool = False,
    adapter_filler_mb: int = 12,
    lora_bias: bool = False,
) -> Checkpoint:
    """Real safetensors files laid out as jinaai/jina-embeddings-v4 (see docvec._model._registry): two
    shards with the projector in the second between other tensors, the index, one adapter folder with every
    task's LoRA (BF16) and decoder LoRA filler (the real one is 343 MB; past 8 MB here, so it is
    range-read)."""
    import torch
    from safetensors.torch import save

    gen = torch.Generator().manual_seed(seed)

    def rand(*shape: int, kind: Any = torch.bfloat16) -> torch.Tensor:
        return (torch.randn(*shape, generator=gen) * 0.05).to(kind)

    def values(t: torch.Tensor) -> np.ndarray:
        return t.float().numpy()

    kind = getattr(torch, dtype)
    w, b = rand(DIM, WIDTH, kind=kind), rand(DIM, kind=kind)
    shards = [
        {"model.embed_tokens.weight": rand(1024, 1024), "model.layers.0.mlp.up_proj.weight": rand(512, 1024)},
        {
            "model.layers.1.mlp.up_proj.weight": rand(1024, 1024),
            "model.norm.weight": rand(1024),
            W_KEY: w,
            B_KEY: b,
            "visual.blocks.0.attn.qkv.weight": rand(1024, 1024),  # sorts after the projector
        },
    ]
    weight_map = {k: SHARDS[i] for i, tensors in enumerate(shards) for k in tensors}
    files = {SHARDS[i]: save(tensors) for i, tensors in enumerate(shards)}
    files[INDEX] = json.dumps({"metadata": {"total_size": 0}, "weight_map": weight_map}).encode()
    adapter: dict[str, torch.Tensor] = {}
    lora: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    lora_biases: dict[str, np.ndarray] = {}
    filler_rows = adapter_filler_mb * (1 << 20) // (2 * 1024 * len(tasks))
    for task in tasks:
        segment = "" if single_task else f".{task}"
        if filler_rows:
            layer = "base_model.model.model.language_model.layers.0.mlp.up_proj"
            adapter[f"{layer}.lora_A{segment}.weight"] = torch.zeros(filler_rows, 1024, dtype=torch.bfloat16)
        if projector_lora:
            a, bb = rand(RANK, WIDTH), rand(DIM, RANK)
            adapter[f"base_model.model.multi_vector_projector.lora_A{segment}.weight"] = a
            adapter[f"base_model.model.multi_vector_projector.lora_B{segment}.weight"] = bb
            lora[task] = (values(a), values(bb))
            if lora_bias:  # PEFT's lora_bias=True
                bias_b = rand(DIM)
                adapter[f"base_model.model.multi_vector_projector.lora_B{segment}.bias"] = bias_b
                lora_biases[task] = values(bias_b)
    files[ADAPTER] = save(adapter)
    config = {
        "peft_type": "LORA",
        "r": RANK,
        "lora_alpha": ALPHA,
        "use_rslora": False,
    }
    files[ADAPTER_CONFIG] = json.dumps(config).encode()
    return Checkpoint(files, values(w), values(b), lora, lora_biases)


GGUFS = {LM_DEFAULT: fake_gguf("q8"), MMPROJ: fake_gguf("mmproj")}


def serve(fake_hub: FakeHub, checkpoint: Checkpoint) -> None:
    fake_hub.repos = {MODEL.lm_repo: dict(GGUFS), HEAD_REPO: dict(checkpoint.files)}


def pull_head(tmp_path: Path, **kwargs: Any) -> registry.ModelFiles:
    return pulling.pull("jina-v4", cache_dir=tmp_path / "hf", docvec_cache_dir=tmp_path / "docvec", **kwargs)


def header_length(data: bytes) -> int:
    return int(struct.unpack("<Q", data[:8])[0])


def head_source(path: Path) -> str:
    import gguf

    f = gguf.GGUFReader(str(path)).fields["docvec.mvhead.source"]
    return bytes(f.parts[f.data[0]]).decode()
