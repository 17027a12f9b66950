"""The embedder's behaviour on the tiny model: shapes, norms, dims, batching, threads, bad input."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from docvec import ConfigError, Embedder, EmbedSettings, InputError, ModelFiles
from docvec._model._embedder import normalize
from docvec._model._native import LlamaContext
from docvec._model._registry import find_tiny_model

from .helpers import page_image


def test_vectors_are_unit_float32_rows(embedder: Embedder) -> None:
    q = embedder.embed_queries(["what is the invoice total", "revenue chart"])
    p = embedder.embed_passages(["The total due is 1,530.00 EUR."])
    i = embedder.embed_images([page_image(300, 400)])
    for v, n in ((q, 2), (p, 1), (i, 1)):
        assert v.dtype == np.float32 and v.shape == (n, embedder.hidden_size)
        np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert abs(float(q[0] @ q[1])) < 0.99  # different inputs, different vectors


def test_query_and_passage_prompts_differ(embedder: Embedder) -> None:
    q = embedder.embed_queries(["invoice"])
    p = embedder.embed_passages(["invoice"])
    assert float(q[0] @ p[0]) < 0.9999
    assert embedder.text_states("Query: invoice").states.shape[0] == len(
        embedder._session.model.tokenize("Query: invoice")
    )


def test_same_input_same_vector(embedder: Embedder) -> None:
    img = page_image(200, 300, seed=3)
    a = embedder.embed_images([img, img])
    np.testing.assert_array_equal(a[0], a[1])
    np.testing.assert_array_equal(embedder.embed_queries(["x y z"]), embedder.embed_queries(["x y z"]))


def test_what_an_earlier_input_left_in_the_cache_changes_nothing(tiny_files: ModelFiles) -> None:
    """Clearing the KV cache between inputs empties its cells without zeroing their data (much cheaper):
    a query after a page and a long passage gives the vector it gives in a fresh embedder, bit for bit."""
    query = "who signed the contract"
    with Embedder(tiny_files, EmbedSettings(threads=2)) as fresh:
        want = fresh.embed_queries([query])
    with Embedder(tiny_files, EmbedSettings(threads=2)) as used:
        used.embed_images([page_image(400, 560, seed=4)])
        used.embed_passages(["a passage long enough to fill many cells of the cache " * 20])
        got = used.embed_queries([query])
    np.testing.assert_array_equal(got, want)


def test_matryoshka_dims(tiny_files: ModelFiles) -> None:
    full = normalize(np.arange(1, 9, dtype=np.float32)[None, :])
    np.testing.assert_allclose(normalize(full, 4), normalize(np.arange(1, 5, dtype=np.float32)[None, :]))
    with Embedder(tiny_files, EmbedSettings(dim=16, threads=1)) as emb:
        # the tiny model is 64 wide: jina-v4's sizes are fractions of that (2048 -> 1024 ... 128)
        assert emb.dim == 16 and emb.embed_queries(["a"]).shape == (1, 16)
        full = emb.embed_queries(["a"], dim=64)
        np.testing.assert_allclose(emb.embed_queries(["a"], dim=32), normalize(full, 32), atol=1e-6)
        with pytest.raises(ConfigError, match=r"dim must be one of 4, 8, 16, 32, 64 for .*64 wide.*not 100"):
            emb.embed_queries(["a"], dim=100)
    # a setting is checked against the model when it opens, before any weight loads
    with pytest.raises(ConfigError, match=r"dim must be one of 4, 8, 16, 32, 64 .*, not 128"):
        Embedder(tiny_files, EmbedSettings(dim=128))


def test_settings_left_unset_are_the_models(tiny_files: ModelFiles) -> None:
    with Embedder(tiny_files, EmbedSettings(threads=1)) as emb:
        assert (emb.bounds.min_pixels, emb.bounds.max_pixels) == (
            emb.profile.min_pixels,
            emb.profile.max_pixels,
        )
        assert emb.dim == 64  # the model's full width
    with pytest.raises(ConfigError, match="at least 784"):
        Embedder(tiny_files, EmbedSettings(min_pixels=100))
    with pytest.raises(ConfigError, match=r"min_pixels must lie between 784 and 602112 pixels"):
        Embedder(tiny_files, EmbedSettings(min_pixels=602113))  # over the model's largest image


def test_sub_batched_decoding_gives_the_same_states(tiny_files: ModelFiles) -> None:
    """Tokens decoded in sub-batches (bounded memory) match one big batch: KV cache + causal mask.

    At 256 the states are identical; much smaller batches take other ggml kernels (different rounding), so
    there the pooled vectors are compared.
    """
    img = page_image(900, 700, seed=5)  # 768 tokens at the default max_pixels
    long_text = "Passage: " + "the quick brown fox jumps over the lazy dog " * 40
    states = {}
    for nb in (1024, 256, 16):
        with Embedder(tiny_files, EmbedSettings(decode_batch=nb, threads=2)) as emb:
            states[nb] = (emb.image_states(img), emb.text_states(long_text))
    (img_full, text_full), (img_256, text_256), (img_16, text_16) = states.values()
    assert img_full.states.shape[0] > 700 and text_full.states.shape[0] > 300
    np.testing.assert_allclose(img_256.states, img_full.states, rtol=0, atol=1e-5)
    np.testing.assert_allclose(text_256.states, text_full.states, rtol=0, atol=1e-5)
    for a, b in ((img_16, img_full), (text_16, text_full)):
        sa, sb = (getattr(x, "span", (0, len(x.states) - 1)) for x in (a, b))
        pa, pb = (normalize(x.states[s[0] : s[1] + 1].mean(0)[None]) for x, s in ((a, sa), (b, sb)))
        assert float((pa @ pb.T)[0, 0]) >= 0.99999


@pytest.mark.parametrize("files", ["tiny_files", "qwen3vl_files"])
def test_the_vision_encoder_takes_pages_of_any_size_together(
    files: str, request: pytest.FixtureRequest
) -> None:
    """``vision_batch`` pages go through the vision encoder in one pass, whatever their sizes: mtmd's batch
    API takes a second Qwen2.5-VL (jina-embeddings-v4) or Qwen3-VL image of another size (llama.cpp patch
    0008; unpatched it refuses it, and each page takes a pass of its own)."""
    model: ModelFiles = request.getfixturevalue(files)
    pages = [page_image(120, 90), page_image(90, 150, seed=1), page_image(200, 60, seed=2)]
    with Embedder(model, EmbedSettings(threads=2, vision_batch=2)) as emb:
        before = emb._session.vision.passes
        vectors = emb.embed_images(pages)
        assert emb._session.vision.passes - before == 2  # pages 1 and 2 together, then page 3
    assert vectors.shape[0] == 3 and np.allclose(np.linalg.norm(vectors, axis=1), 1.0)


@pytest.mark.parametrize("files", ["tiny_files", "qwen3vl_files", "no token table"])
def test_a_group_of_pages_decodes_as_sequences_of_one_batch(
    files: str, request: pytest.FixtureRequest
) -> None:
    """With ``vision_batch`` a group's page prompts decode together, each a sequence in its own KV cache
    stream, every llama.cpp call an equal slice of each unfinished page (a small ``decode_batch`` cuts the
    images across calls): each page's token states are those it gives alone, in the order it was given. A
    model whose text cannot join its image in one batch (no token table docvec reads)
    decodes the pages one after the other."""
    model: ModelFiles = request.getfixturevalue("tiny_files" if files == "no token table" else files)
    pages = [page_image(300, 200, seed=3), page_image(120, 260, seed=4), page_image(200, 200, seed=5)]
    with Embedder(model, EmbedSettings(threads=2, vision_batch=3, decode_batch=256)) as emb:
        session = emb._session
        if files == "no token table":  # as for a token table in a type only llama.cpp reads (TokenTable.open)
            session._token_table = None
        assert session.pages is not None and session.pages.n_seq == 3
        rgbs = [emb._prepare(p) for p in pages]
        calls = session.context.calls
        together = emb._images_states(rgbs)
        batched_calls, alone_calls = session.pages.calls, session.context.calls - calls
        alone = [emb._image_states(rgb) for rgb in rgbs]
    n_tokens = [a.states.shape[0] for a in alone]
    assert len(set(n_tokens)) == 3  # three lengths: the slices run out at different calls
    if files == "no token table":
        assert batched_calls == 0 and alone_calls >= 3
    else:
        assert alone_calls == 0 and batched_calls >= -(-sum(n_tokens) // 256)
    for t, a in zip(together, alone, strict=True):
        np.testing.assert_array_equal(t.token_ids, a.token_ids)
        assert t.span == a.span and t.states.shape == a.states.shape
        cos = np.sum(normalize(t.states) * normalize(a.states), axis=1)
        assert cos.min() >= 0.99999, cos.min()
        pooled = normalize(t.states.mean(0)[None]) @ normalize(a.states.mean(0)[None]).T
        assert float(pooled[0, 0]) >= 0.999999


@pytest.mark.parametrize(
    ("files", "bar"),
    [
        ("tiny_files", 0.99999),
        ("tiny_bf16", 0.99999),
        # a Q8_0 product of a few tokens takes another kernel than a page's (ggml's vec_dot against AMX-INT8
        # tiles), which rounds the activations' Q8_0 scales apart: the text decoded apart differs by that
        ("Q8_0", 0.9999),
        ("qwen3vl_files", 0.99999),
        ("colqwen35_dir", 0.99999),
    ],
)
def test_the_text_around_an_image_decodes_in_one_batch_with_it(
    files: str, bar: float, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A page's prompt (text, image, text) takes one decode: the text's input embeddings come from the
    GGUF's token table (docvec._model._token_table), in F16, BF16 or Q8_0, at the positions llama.cpp gives
    text, with a Qwen3-VL's deepstack part zero; the states are those of the text decoded as tokens."""
    if files == "Q8_0":
        model: ModelFiles = request.getfixturevalue("tiny_quantized")[files]
    elif files == "colqwen35_dir":  # Qwen3.5: linear-attention layers, partial M-RoPE
        model = find_tiny_model(request.getfixturevalue(files), arch="colqwen3.5")
    else:
        model = request.getfixturevalue(files)
    decodes: list[int] = []
    real = LlamaContext._decode

    def counting(self: LlamaContext, n: int, *args: Any, **kwargs: Any) -> Any:
        decodes.append(n)
        return real(self, n, *args, **kwargs)

    monkeypatch.setattr(LlamaContext, "_decode", counting)
    img = page_image(300, 200, seed=3)
    with Embedder(model, EmbedSettings(threads=2)) as emb:
        assert emb._session._token_table is not None
        folded = emb.image_states(img).states
        assert len(decodes) == 1
        emb._session._token_table = None
        decodes.clear()
        apart = emb.image_states(img).states
        assert len(decodes) == 3  # text, image, text
    assert folded.shape == apart.shape
    cos = np.sum(normalize(folded) * normalize(apart), axis=1)
    assert cos.min() >= bar


def test_image_span_and_sizes(embedder: Embedder) -> None:
    st = embedder.image_states(page_image(350, 238))
    assert st.size == (336, 224)
    n_image = int((st.token_ids == -1).sum())
    assert n_image == (336 // 28) * (224 // 28)
    a, b = st.span
    assert b - a + 1 == n_image + 2  # <|vision_start|>, the image tokens, <|vision_end|>
    assert st.token_ids[a] == 151652 and st.token_ids[b] == 151653


def test_pixel_bounds_are_settings(tiny_files: ModelFiles) -> None:
    with Embedder(tiny_files, EmbedSettings(max_pixels=28 * 28 * 16, threads=1)) as emb:
        st = emb.image_states(page_image(1000, 1000))
        assert st.size == (112, 112) and int((st.token_ids == -1).sum()) == 16
    with pytest.raises(ValueError, match=r"min_pixels .* is larger than max_pixels"):
        EmbedSettings(min_pixels=10_000, max_pixels=5_000)


def test_bad_items_are_named(embedder: Embedder, tmp_path: Path, documents: Path) -> None:
    good = page_image(100, 100)
    with pytest.raises(InputError, match="item 1: empty text"):
        embedder.embed_queries(["fine", "   "])
    with pytest.raises(InputError, match="item 0: expected a string, got int"):
        embedder.embed_passages([3])  # type: ignore[list-item]
    with pytest.raises(InputError, match="must be a list"):
        embedder.embed_queries("a single string")  # type: ignore[arg-type]
    bad = tmp_path / "broken.png"
    bad.write_bytes(b"\x89PNG\r\n\x1a\n garbage")
    with pytest.raises(InputError, match=r"item 1 .*broken\.png: cannot decode image"):
        embedder.embed_images([good, bad])
    with pytest.raises(InputError, match=r"item 2 .*minimal-document\.pdf: not an image file"):
        embedder.embed_images([good, good, documents / "pysamples__minimal-document.pdf"])
    with pytest.raises(InputError, match=r"item 0 image: image has no pixels"):
        embedder.embed_images([Image.new("RGB", (0, 0))])
    with pytest.raises(InputError, match=r"item 0 .*gone\.jpg: no such file"):
        embedder.embed_images([tmp_path / "gone.jpg"])
    # the embedder is still usable after every one of these
    assert embedder.embed_images([good]).shape == (1, embedder.hidden_size)


def test_long_text_is_truncated_with_a_warning(
    tiny_files: ModelFiles, caplog: pytest.LogCaptureFixture
) -> None:
    with Embedder(tiny_files, EmbedSettings(max_text_tokens=32, threads=1)) as emb:
        st = emb.text_states("word " * 100)
        assert st.states.shape[0] == 32
    assert "truncated to max_text_tokens=32" in caplog.text


def test_threads_share_one_embedder_safely(embedder: Embedder) -> None:
    texts = [f"query number {i}" for i in range(6)]
    expected = embedder.embed_queries(texts)
    img = page_image(280, 280, seed=9)
    expected_img = embedder.embed_images([img])
    results: dict[int, np.ndarray] = {}
    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            results[k] = embedder.embed_queries(texts) if k % 2 else embedder.embed_images([img])
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for k, v in results.items():
        np.testing.assert_array_equal(v, expected if k % 2 else expected_img)


def test_close_is_idempotent(tiny_files: ModelFiles) -> None:
    emb = Embedder(tiny_files, EmbedSettings(threads=1))
    emb.close()
    emb.close()
    with Embedder(tiny_files) as e2:
        assert e2.embed_queries(["ok"]).shape == (1, 64)


def test_an_open_reads_each_header_once(tiny_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import docvec._model._files as modelfiles
    import docvec._model._gguf as gguf
    import docvec._model._resolve as resolve

    read: list[str] = []
    real = gguf.read_gguf_info

    def counting(path: Path) -> gguf.GGUFInfo:
        read.append(path.name)
        return real(path)

    for module in (modelfiles, resolve):
        monkeypatch.setattr(module, "read_gguf_info", counting)
    with Embedder.open(tiny_dir, EmbedSettings(threads=1)):
        pass
    assert sorted(read) == sorted(p.name for p in tiny_dir.glob("*.gguf"))


@pytest.fixture()
def python_sigint() -> Iterator[None]:
    """Python's own Ctrl-C handler, as at a terminal (a test run started in the background inherits SIGINT
    ignored), and the handler before it back afterwards."""
    import signal

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_a_ctrl_c_during_native_calls_is_raised_when_they_return(
    python_sigint: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """llama.cpp logs through a Python callback: a Ctrl-C that lands in it is dropped by ctypes (an ingest
    went on to its end), unless the embedder's native calls hold it and raise it after they return."""
    import ctypes
    import os
    import signal
    import sys

    from docvec._model._native import holding_interrupts

    libc = ctypes.CDLL(None)
    compare = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int))
    sent: list[int] = []

    def by_value(a: Any, b: Any) -> int:  # a native sort calling back into Python, as llama.cpp's log does
        if not sent:
            sent.append(1)
            os.kill(os.getpid(), signal.SIGINT)
        return int(a[0] - b[0])

    def sort() -> list[int]:
        values = (ctypes.c_int * 64)(*range(64, 0, -1))
        libc.qsort(values, 64, ctypes.sizeof(ctypes.c_int), compare(by_value))
        return list(values)

    dropped: list[type[BaseException] | None] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: dropped.append(u.exc_type))
    sort()  # returns: the interrupt was raised inside the callback (which then answered 0), and dropped
    assert dropped == [KeyboardInterrupt]
    sent.clear()
    with pytest.raises(KeyboardInterrupt), holding_interrupts():
        assert sort() == list(range(1, 65))  # held while the native call ran ...
    assert dropped == [KeyboardInterrupt]  # (nothing dropped this time)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # ... and Python's handler is back
