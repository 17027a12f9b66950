"""One checkpoint, one multi-vector head: ``docvec models pull`` and ``docvec models convert`` read it alike.

Every case runs through both: pull against the fake Hub (tests/fakehub.py, on 127.0.0.1, by HTTP Range;
its adapter once large enough to be range-read, once small enough to be downloaded whole), and convert's
:func:`find_head` on the same files in a local folder. Each case is one way the two used to differ (what
reading safetensors and merging the head's LoRA gave, or how they failed) before they shared
docvec._tools._safetensors.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from docvec._errors import ToolError
from docvec._model._head import read_head
from docvec._tools._convert import find_head

from . import fakehub as hub

# offline, sockets off (conftest.py); the fake Hub where a test asks for it
pytestmark = pytest.mark.usefixtures("offline")

SHARD = hub.SHARDS[1]
ADAPTER = hub.ADAPTER
W_KEY, B_KEY = hub.W_KEY, hub.B_KEY
LORA = "base_model.model.multi_vector_projector"
DIM, WIDTH, RANK, ALPHA = 16, 32, 4, 8.0  # alpha/r = 2
TASKS = ("retrieval", "text-matching", "code")
#: jina-embeddings-v4's adapter also holds the decoder's LoRA; here enough of it to pass pull's 8 MB limit
FILLER = "base_model.model.model.layers.0.mlp.up_proj.lora_A.retrieval.weight"


def _safetensors(tensors: dict[str, np.ndarray]) -> bytes:
    from safetensors.numpy import save

    return save({k: np.ascontiguousarray(v) for k, v in tensors.items()}, metadata={"format": "pt"})


@dataclass
class Checkpoint:
    """A checkpoint laid out as jina-embeddings-v4's (the head in the second of two shards, its LoRA in
    adapters/), built from arrays; ``files`` renders it."""

    weight: np.ndarray
    bias: np.ndarray
    lora: dict[str, np.ndarray]
    config: dict[str, Any] = field(default_factory=lambda: {"r": RANK, "lora_alpha": ALPHA})
    base_keys: tuple[str, str] = (W_KEY, B_KEY)
    shard_extra: dict[str, np.ndarray] = field(default_factory=dict)

    def files(self, *, large_adapter: bool) -> dict[str, bytes]:
        shards = [
            {"model.embed_tokens.weight": np.ones((8, WIDTH), np.float32)},
            {
                "model.norm.weight": np.ones(WIDTH, np.float32),
                self.base_keys[0]: self.weight,
                self.base_keys[1]: self.bias,
                **self.shard_extra,
            },
        ]
        adapter = dict(self.lora)
        if large_adapter:
            adapter[FILLER] = np.zeros(((9 << 20) // (4 * 1024), 1024), np.float32)
        weight_map = {k: hub.SHARDS[i] for i, tensors in enumerate(shards) for k in tensors}
        return {
            "config.json": b"{}",
            hub.INDEX: json.dumps({"metadata": {}, "weight_map": weight_map}).encode(),
            **{hub.SHARDS[i]: _safetensors(tensors) for i, tensors in enumerate(shards)},
            ADAPTER: _safetensors(adapter),
            hub.ADAPTER_CONFIG: json.dumps(self.config).encode(),
        }


def checkpoint(
    *,
    dtype: Any = np.float32,
    tasks: tuple[str, ...] = TASKS,
    form: str = "lora_{f}.{task}.weight",
    seed: int = 0,
) -> Checkpoint:
    """Random head and LoRA factors for ``tasks``, named ``{LORA}.{form}``."""
    rng = np.random.default_rng(seed)
    lora = {}
    for task in tasks:
        lora[f"{LORA}.{form.format(f='A', task=task)}"] = rng.normal(size=(RANK, WIDTH)).astype(dtype)
        lora[f"{LORA}.{form.format(f='B', task=task)}"] = rng.normal(size=(DIM, RANK)).astype(dtype)
    return Checkpoint(rng.normal(size=(DIM, WIDTH)).astype(dtype), rng.normal(size=DIM).astype(dtype), lora)


def merged(ck: Checkpoint, a_key: str, b_key: str, scale: float = ALPHA / RANK) -> np.ndarray:
    """W + s·B·A summed in float64, in float32 (what both paths must give, to the bit)."""
    w, a, b = (np.asarray(x, np.float64) for x in (ck.weight, ck.lora[a_key], ck.lora[b_key]))
    return (w + scale * (b @ a)).astype(np.float32)


def task_keys(task: str = "retrieval") -> tuple[str, str]:
    return f"{LORA}.lora_A.{task}.weight", f"{LORA}.lora_B.{task}.weight"


Edit = Callable[[dict[str, bytes]], None]


@dataclass
class Reader:
    """One way of reading a checkpoint's head: ``how`` is convert, pull-ranges (the adapter range-read) or
    pull-whole (the adapter downloaded whole)."""

    how: str
    tmp_path: Path
    request: pytest.FixtureRequest

    def _run(self, ck: Checkpoint, edit: Edit | None) -> tuple[np.ndarray, np.ndarray]:
        files = ck.files(large_adapter=self.how == "pull-ranges")
        if edit is not None:
            edit(files)
        if self.how == "convert":
            folder = self.tmp_path / "ckpt"
            for name, data in files.items():
                (folder / name).parent.mkdir(parents=True, exist_ok=True)
                (folder / name).write_bytes(data)
            head = find_head(folder)
            assert head is not None
            return head.weight, head.bias
        state: hub.FakeHub = self.request.getfixturevalue("fake_hub")
        state.repos = {hub.MODEL.lm_repo: dict(hub.GGUFS), hub.HEAD_REPO: files}
        pulled = hub.pull_head(self.tmp_path).head
        assert pulled is not None
        got = read_head(pulled)
        return got.weight, got.bias

    def head(self, ck: Checkpoint, edit: Edit | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The head's weight and bias as this path reads them."""
        return self._run(ck, edit)

    def fails(self, ck: Checkpoint, edit: Edit | None = None) -> str:
        """The message of the ToolError this path raises; it says what to do, as each path's messages do."""
        with pytest.raises(ToolError) as info:
            self._run(ck, edit)
        assert type(info.value) is ToolError
        message = str(info.value)
        if self.how == "convert":
            assert str(self.tmp_path / "ckpt") in message
            assert "convert again" in message or "--head-task" in message
        else:
            assert hub.HEAD_REPO in message and "--no-head" in message
        return message


@pytest.fixture(params=["convert", "pull-ranges", "pull-whole"])
def reader(request: pytest.FixtureRequest, tmp_path: Path) -> Reader:
    return Reader(request.param, tmp_path, request)


def test_the_jina_layout_gives_the_same_head_both_ways(reader: Reader) -> None:
    ck = checkpoint()
    weight, bias = reader.head(ck)
    np.testing.assert_array_equal(weight, merged(ck, *task_keys()))
    np.testing.assert_array_equal(bias, ck.bias)  # LoRA leaves the bias alone


def test_rank_and_alpha_pattern_name_the_head(reader: Reader) -> None:
    """PEFT's per-module r and lora_alpha: the first pattern that matches the module's name wins."""
    ck = checkpoint()
    ck.config = {
        "r": 16,
        "lora_alpha": 64,
        "rank_pattern": {"vector_projector": 99, "q_proj": 8, "multi_vector_projector": RANK},
        "alpha_pattern": {r".*_projector": 12, "multi_vector_projector": 99},
    }
    weight, _ = reader.head(ck)
    np.testing.assert_array_equal(weight, merged(ck, *task_keys(), scale=12 / RANK))


def test_peft_base_layer_keys(reader: Reader) -> None:
    """A model saved with its LoRA in place keeps the linear layer's own tensors under ``base_layer``."""
    ck = checkpoint()
    ck.base_keys = (f"{W_KEY[:-7]}.base_layer.weight", f"{B_KEY[:-5]}.base_layer.bias")
    weight, bias = reader.head(ck)
    np.testing.assert_array_equal(weight, merged(ck, *task_keys()))
    np.testing.assert_array_equal(bias, ck.bias)


def test_the_merge_sums_in_float64(reader: Reader) -> None:
    """B·A whose terms cancel: in float32 the small ones are lost against 1e8 (6 becomes 0)."""
    ck = checkpoint(tasks=("retrieval",))
    a_key, b_key = task_keys()
    column = np.array([1e8, 1, 1, 1, 1, 1, 1, -1e8], np.float32)
    ck.lora[a_key] = np.repeat(column[:, None], WIDTH, axis=1)
    ck.lora[b_key] = np.ones((DIM, len(column)), np.float32)
    ck.config = {"r": len(column), "lora_alpha": 2 * len(column)}
    weight, _ = reader.head(ck)
    expected = merged(ck, a_key, b_key, scale=2.0)
    np.testing.assert_allclose(expected - ck.weight, 12, rtol=1e-5)
    np.testing.assert_array_equal(weight, expected)


@pytest.mark.parametrize(
    ("form", "tasks"),
    [
        ("lora_{f}.{task}.weight", TASKS),  # jina-embeddings-v4's adapter
        ("lora_{f}.default.{task}.weight", TASKS),  # the same with PEFT's adapter name
        ("lora_{f}.weight", ("only",)),  # a single-task PEFT adapter
        ("lora_{f}.default.weight", ("only",)),  # the same with PEFT's adapter name
    ],
)
def test_the_lora_key_forms(reader: Reader, form: str, tasks: tuple[str, ...]) -> None:
    ck = checkpoint(form=form, tasks=tasks)
    task = tasks[0]
    weight, _ = reader.head(ck)
    keys = (f"{LORA}.{form.format(f=f, task=task)}" for f in "AB")
    np.testing.assert_array_equal(weight, merged(ck, *keys))


def test_the_colpali_layout_gives_the_same_head_both_ways(reader: Reader) -> None:
    """colpali-engine's head (ColQwen3, ColQwen3.5): ``custom_text_proj`` at the top level, its LoRA a
    single-task PEFT adapter's, named under PeftModel's prefix."""
    rng = np.random.default_rng(3)
    lora = {
        f"base_model.model.custom_text_proj.lora_{f}.weight": rng.normal(size=shape).astype(np.float32)
        for f, shape in (("A", (RANK, WIDTH)), ("B", (DIM, RANK)))
    }
    ck = Checkpoint(
        rng.normal(size=(DIM, WIDTH)).astype(np.float32), rng.normal(size=DIM).astype(np.float32), lora
    )
    ck.base_keys = ("custom_text_proj.weight", "custom_text_proj.bias")
    weight, bias = reader.head(ck)
    np.testing.assert_array_equal(weight, merged(ck, *lora))
    np.testing.assert_array_equal(bias, ck.bias)


def test_f64_tensors(reader: Reader) -> None:
    ck = checkpoint(dtype=np.float64)
    weight, bias = reader.head(ck)
    np.testing.assert_array_equal(weight, merged(ck, *task_keys()))
    np.testing.assert_array_equal(bias, ck.bias.astype(np.float32))


@pytest.mark.parametrize("rslora", [False, True])
def test_lora_b_bias_and_rslora(reader: Reader, rslora: bool) -> None:
    """PEFT's lora_bias: lora_B has a bias, scaled like the product; rsLoRA scales by alpha / sqrt(r)."""
    ck = checkpoint()
    b_bias = np.random.default_rng(5).normal(size=DIM).astype(np.float32)
    ck.lora[f"{LORA}.lora_B.retrieval.bias"] = b_bias
    ck.config["use_rslora"] = rslora
    scale = ALPHA / np.sqrt(RANK) if rslora else ALPHA / RANK
    weight, bias = reader.head(ck)
    np.testing.assert_array_equal(weight, merged(ck, *task_keys(), scale=scale))
    np.testing.assert_array_equal(bias, (ck.bias.astype(np.float64) + scale * b_bias).astype(np.float32))


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("lora_B.retrieval.bias", np.ones(1, np.float32), "not the head's bias [16]"),
        ("lora_A.retrieval.bias", np.ones(RANK, np.float32), "not a LoRA factor docvec can merge"),
        ("lora_magnitude_vector.retrieval.weight", np.ones(DIM, np.float32), "docvec cannot merge"),  # DoRA
        ("lora_A.weight", np.ones((RANK, WIDTH), np.float32), "both with and without a task name"),
    ],
)
def test_lora_tensors_docvec_cannot_merge_are_refused(
    reader: Reader, key: str, value: np.ndarray, expected: str
) -> None:
    ck = checkpoint()
    ck.lora[f"{LORA}.{key}"] = value
    message = reader.fails(ck)
    assert expected in message and ADAPTER in message


def test_a_tensor_only_named_like_the_head_is_not_part_of_it(reader: Reader) -> None:
    ck = checkpoint()
    ck.shard_extra = {"model.multi_vector_projector_norm.weight": np.ones(DIM, np.float32)}
    weight, _ = reader.head(ck)
    np.testing.assert_array_equal(weight, merged(ck, *task_keys()))


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({"r": str(RANK), "lora_alpha": ALPHA}, "not a positive integer"),
        ({"r": float(RANK), "lora_alpha": ALPHA}, "not a positive integer"),
        ({"r": RANK, "lora_alpha": str(ALPHA)}, "is not a number"),
        ({"r": RANK, "lora_alpha": ALPHA, "use_rslora": "false"}, "use_rslora is not true or false"),
        ({"r": RANK, "lora_alpha": ALPHA, "rank_pattern": {"(": 2}}, "no regex"),
    ],
)
def test_adapter_configs_docvec_cannot_read(reader: Reader, config: dict[str, Any], expected: str) -> None:
    ck = checkpoint()
    ck.config = config
    message = reader.fails(ck)
    assert expected in message and hub.ADAPTER_CONFIG in message


def test_a_lora_of_another_rank_than_r(reader: Reader) -> None:
    ck = checkpoint()
    ck.config["r"] = 2 * RANK
    message = reader.fails(ck)
    assert f"lora_A.retrieval.weight has rank {RANK}, but r={2 * RANK} in " in message
    assert hub.ADAPTER_CONFIG in message


def test_an_adapter_without_the_task_lists_the_ones_it_has(reader: Reader) -> None:
    message = reader.fails(checkpoint(tasks=("text-matching", "code")))
    assert "the head's LoRA has the tasks code, text-matching, not 'retrieval'" in message
    assert f"{LORA}.lora_A.code.weight" in message and ADAPTER in message


def _header(data: bytes) -> tuple[dict[str, Any], bytes]:
    (n,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8 : 8 + n]), data[8 + n :]


def _with_header(header: dict[str, Any], body: bytes) -> bytes:
    raw = json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + body


def _move(data: bytes, key: str, offsets: Callable[[int, int, int], list[int]]) -> bytes:
    """``data`` with the data_offsets of ``key`` replaced by ``offsets(begin, end, size of the data)``."""
    header, body = _header(data)
    header[key]["data_offsets"] = offsets(*header[key]["data_offsets"], len(body))
    return _with_header(header, body)


#: a file damaged in each way a header can be: what the message says
DAMAGE: dict[str, tuple[Callable[[bytes, str], bytes], str]] = {
    "header over the limit": (
        lambda data, key: struct.pack("<Q", 100_000_001) + data[8:],
        "a header length of 100000001 bytes; the format allows 2 to 100000000",
    ),
    "header cut short": (lambda data, key: data[:64], "the safetensors header is cut short"),
    "not JSON": (lambda data, key: data[:8] + b"\xff" * (len(data) - 8), "a corrupt safetensors header"),
    "offsets past the end": (
        lambda data, key: _move(data, key, lambda begin, end, size: [begin, size + 4]),
        "lies outside the file",
    ),
    "offsets reversed": (
        lambda data, key: _move(data, key, lambda begin, end, size: [end, begin]),
        "lies outside the file",
    ),
    "a tensor's bytes do not fit its shape": (
        lambda data, key: _move(data, key, lambda begin, end, size: [begin, end - 4]),
        "bytes, not",
    ),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
@pytest.mark.parametrize("where", ["shard", "adapter"])
def test_a_damaged_file_is_named(reader: Reader, damage: str, where: str) -> None:
    name, key = (SHARD, W_KEY) if where == "shard" else (ADAPTER, task_keys()[0])
    corrupt, expected = DAMAGE[damage]

    def edit(files: dict[str, bytes]) -> None:
        files[name] = corrupt(files[name], key)

    message = reader.fails(checkpoint(), edit)
    assert expected in message and name in message


def test_tensors_of_a_type_docvec_cannot_read(reader: Reader) -> None:
    ck = checkpoint()
    ck.weight = ck.weight.astype(np.int32)
    message = reader.fails(ck)
    assert f"{W_KEY} is I32; docvec reads BF16, F16, F32 and F64 tensors" in message and SHARD in message
