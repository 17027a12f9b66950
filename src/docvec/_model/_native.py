"""The few llama.cpp and mtmd calls docvec needs, each native handle wrapped in an owner with ``close()``.

Only this module imports ``llama_cpp``. Return codes and null handles become :class:`BackendError`; the
rest of docvec sees numpy arrays. A context is not thread-safe: one thread at a time per owner.
"""

from __future__ import annotations

import ctypes
import logging
import signal
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from .._errors import BackendError

__all__ = [
    "LlamaContext",
    "LlamaModel",
    "MtmdContext",
    "Outputs",
    "PromptChunk",
    "backend",
    "holding_interrupts",
    "quantize",
]

log = logging.getLogger("docvec.llama")

_INSTALL_HINT = (
    "llama-cpp-python is not installed in this environment. Run `make setup` (llama.cpp/build.sh), which "
    "builds the pinned release once and caches the wheel."
)

_backend_lock = threading.Lock()
_backend_ready = False
_log_callbacks: list[Any] = []  # keep the ctypes callbacks alive as long as the library


def backend() -> tuple[Any, Any]:
    """Import llama_cpp and its mtmd bindings once, start the backend and route native logs to logging."""
    global _backend_ready
    try:
        import llama_cpp
        from llama_cpp import mtmd_cpp
    except ImportError as e:  # pragma: no cover - exercised only without the wheel
        raise BackendError(_INSTALL_HINT) from e
    with _backend_lock:
        if not _backend_ready:
            llama_cpp.llama_backend_init()
            cb = llama_cpp.llama_log_callback(_on_native_log)
            _log_callbacks.append(cb)
            llama_cpp.llama_log_set(cb, ctypes.c_void_p(0))
            mtmd_cpp.mtmd_helper_log_set(cb, ctypes.c_void_p(0))
            mtmd_cpp.mtmd_log_set(cb, ctypes.c_void_p(0))
            _backend_ready = True
    return llama_cpp, mtmd_cpp


# ggml_log_level: 0 none, 1 debug, 2 info, 3 warn, 4 error, 5 cont
# llama.cpp warns about things that do not concern embeddings (grounding needs 1024 image tokens, pooling
# overridden): its warnings are INFO here, its errors stay errors.
_LEVELS = {1: logging.DEBUG, 2: logging.DEBUG, 3: logging.INFO, 4: logging.ERROR, 5: logging.DEBUG}


def _on_native_log(level: int, text: bytes, _user: object) -> None:
    msg = text.decode("utf-8", "replace").rstrip()
    if msg:
        log.log(_LEVELS.get(level, logging.DEBUG), "%s", msg)


@contextmanager
def holding_interrupts() -> Iterator[None]:
    """Around native calls: a Ctrl-C that arrives meanwhile is held, and raised (KeyboardInterrupt) once
    they return.

    Python raises KeyboardInterrupt at the next bytecode it runs, which during a native call is the log
    callback's (:func:`_on_native_log`); ctypes reports an exception raised in a callback and drops it,
    so the interrupt was lost and an ingest went on to its end. Only the main thread, and only while Ctrl-C
    has Python's own handler (a server installs its own, which raises nothing), is changed.
    """
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):
        yield
        return
    held: list[int] = []
    signal.signal(signal.SIGINT, lambda signum, frame: held.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if held:
        raise KeyboardInterrupt


class LlamaModel:
    """A GGUF language model loaded by llama.cpp."""

    def __init__(self, path: Path, *, gpu_layers: int = 0) -> None:
        ll, _ = backend()
        self._ll = ll
        params = ll.llama_model_default_params()
        params.n_gpu_layers = gpu_layers if gpu_layers >= 0 else 0x7FFFFFFF
        # mmap, as llama-cpp-python's own Llama passes: pages are shared between processes and loading
        # does not copy the model (AUTO leaves the choice to the build and the file system).
        params.load_mode = ll.LLAMA_LOAD_MODE_MMAP
        handle = ll.llama_model_load_from_file(str(path).encode(), params)
        if not handle:
            raise BackendError(f"{path}: llama.cpp could not load this language model (see the log for why)")
        self.handle: Any = handle
        self.path = path
        self.vocab = ll.llama_model_get_vocab(handle)
        self.n_embd = int(ll.llama_model_n_embd(handle))
        self.n_embd_inp = int(ll.llama_model_n_embd_inp(handle))
        self.n_ctx_train = int(ll.llama_model_n_ctx_train(handle))

    def meta(self, key: str) -> str | None:
        """A metadata value of the GGUF as a string, or None when absent."""
        buf = ctypes.create_string_buffer(1024)
        n = self._ll.llama_model_meta_val_str(self.handle, key.encode(), buf, len(buf))
        return None if n < 0 else buf.value.decode("utf-8", "replace")

    def tokenize(self, text: str, *, parse_special: bool = False) -> npt.NDArray[np.int32]:
        """Token ids of ``text``; no BOS/EOS is added (the profiles' reference code adds none)."""
        data = text.encode("utf-8")
        cap = len(data) + 8
        for _ in range(2):
            out = (self._ll.llama_token * cap)()
            n = self._ll.llama_tokenize(self.vocab, data, len(data), out, cap, False, parse_special)
            if n >= 0:
                return np.ctypeslib.as_array(out)[:n].astype(np.int32)
            cap = -n
        raise BackendError("llama_tokenize failed")

    def close(self) -> None:
        if self.handle:
            self._ll.llama_model_free(self.handle)
            self.handle = None


#: the KV cache types docvec offers, each by its name in gguf-py's GGMLQuantizationType (ggml's type numbers)
_KV_TYPES = {"f16": "F16", "f32": "F32", "bf16": "BF16"}

#: which decoded tokens' hidden states a decode returns (copies out of llama.cpp's buffer): every one, the
#: last one, or none
Outputs = Literal["all", "last", "none"]


def _part(outputs: Outputs, last: bool) -> Outputs:
    """What one sub-batch of a decode returns: "last" means the last sub-batch's last token."""
    return outputs if outputs == "all" or last else "none"


class LlamaContext:
    """An embeddings context with no pooling: every decoded token yields its last hidden state.

    ``flash_attention`` False turns llama.cpp's flash attention off (True leaves it to llama.cpp, which
    uses it where the backend has it); ``kv_cache`` is the KV cache's type: ``"f16"``, ``"f32"`` or
    ``"bf16"``. ``n_seq`` sequences of up to ``n_ctx`` tokens each decode together
    (:meth:`decode_sequences`), each in a KV cache stream of its own (llama.cpp's ``kv_unified`` off), so
    that a token attends over its own sequence's cells only, not over every sequence's masked out.
    """

    def __init__(
        self,
        model: LlamaModel,
        *,
        n_ctx: int,
        n_batch: int,
        threads: int,
        flash_attention: bool = True,
        kv_cache: str = "f16",
        n_seq: int = 1,
    ) -> None:
        from gguf.constants import GGMLQuantizationType

        ll = model._ll
        self._ll = ll
        self.model = model
        params = ll.llama_context_default_params()
        params.n_ctx = n_ctx * n_seq
        params.n_batch = n_batch
        params.n_ubatch = n_batch
        params.n_seq_max = n_seq
        params.kv_unified = False
        params.n_threads = threads
        params.n_threads_batch = threads
        params.embeddings = True
        params.pooling_type = ll.LLAMA_POOLING_TYPE_NONE
        params.flash_attn_type = (
            ll.LLAMA_FLASH_ATTN_TYPE_AUTO if flash_attention else ll.LLAMA_FLASH_ATTN_TYPE_DISABLED
        )
        try:
            params.type_k = params.type_v = int(GGMLQuantizationType[_KV_TYPES[kv_cache]])
        except KeyError:
            raise BackendError(f"kv_cache must be one of {', '.join(_KV_TYPES)}, not {kv_cache!r}") from None
        handle = ll.llama_init_from_model(model.handle, params)
        if not handle:
            raise BackendError(f"{model.path}: llama.cpp could not create a context (n_ctx={n_ctx})")
        self.handle: Any = handle
        self.n_ctx = int(ll.llama_n_ctx_seq(handle))  # per sequence
        self.n_batch = n_batch
        self.n_seq = n_seq
        self.n_embd = model.n_embd
        #: llama_decode calls made so far
        self.calls = 0
        # the sequence ids a batch's seq_id pointers point into
        self._seq_ids = np.arange(n_seq, dtype=np.int32)

    def clear(self) -> None:
        """Forget every decoded token (the KV cache), ready for the next sequence.

        The cache's cells are emptied and their data left as it is: the attention masks empty cells out, so
        the next sequence's states are the same, and zeroing the whole cache (sized for the longest prompt,
        about a gigabyte for a 2B model) cost a query a fifth of its time (docs/models.md)."""
        self._ll.llama_memory_clear(self._ll.llama_get_memory(self.handle), False)

    def keep(self, n_pos: int) -> None:
        """Forget the decoded tokens at positions ``n_pos`` and after, keeping the ones before: the next
        decode continues a shared prefix (an image token's positions all lie at or after its chunk's
        start, so a whole chunk goes)."""
        mem = self._ll.llama_get_memory(self.handle)
        if not self._ll.llama_memory_seq_rm(mem, 0, n_pos, -1):
            raise BackendError(f"llama_memory_seq_rm could not cut the KV cache at position {n_pos}")

    def decode_tokens(
        self, tokens: npt.NDArray[np.int32], pos0: int, *, outputs: Outputs = "all"
    ) -> npt.NDArray[np.float32]:
        """Decode ``tokens`` at positions pos0, pos0+1, ...; returns the hidden states ``outputs`` asks for:
        every token's (n, n_embd), the last one's (1, n_embd) or none (0, n_embd)."""
        out = []
        for s in range(0, len(tokens), self.n_batch):
            part = np.ascontiguousarray(tokens[s : s + self.n_batch], dtype=np.int32)
            pos = np.arange(pos0 + s, pos0 + s + len(part), dtype=np.int32)
            last = s + self.n_batch >= len(tokens)
            out.append(self._decode(len(part), pos, tokens=part, outputs=_part(outputs, last)))
        return np.concatenate(out) if out else np.zeros((0, self.n_embd), np.float32)

    def decode_embeddings(
        self, embd: npt.NDArray[np.float32], pos: npt.NDArray[np.int32], *, outputs: Outputs = "all"
    ) -> npt.NDArray[np.float32]:
        """Decode input embeddings (n, n_embd_inp) with positions (n_pos_per_token, n); in sub-batches;
        returns the hidden states ``outputs`` asks for, as :meth:`decode_tokens` does.

        Sub-batches give the same states as one batch (KV cache plus causal mask) and bound the memory the
        context needs for outputs (hidden states only with our patch 0002; a full vocabulary of logits per
        output token for architectures it does not cover).
        """
        n = embd.shape[0]
        out = []
        for s in range(0, n, self.n_batch):
            e = np.ascontiguousarray(embd[s : s + self.n_batch], dtype=np.float32)
            p = np.ascontiguousarray(pos[:, s : s + self.n_batch], dtype=np.int32).reshape(-1)
            last = s + self.n_batch >= n
            out.append(self._decode(e.shape[0], p, embd=e, outputs=_part(outputs, last)))
        return np.concatenate(out) if out else np.zeros((0, self.n_embd), np.float32)

    def decode_sequences(
        self, embds: Sequence[npt.NDArray[np.float32]], positions: Sequence[npt.NDArray[np.int32]]
    ) -> list[npt.NDArray[np.float32]]:
        """Decode up to ``n_seq`` prompts of input embeddings (n_i, n_embd_inp), with positions
        (n_pos_per_token, n_i), together into a cleared cache, each as sequence i; returns every token's
        hidden states for each (n_i, n_embd): the states each gives decoded alone.

        Each call takes an equal slice of every unfinished sequence (``n_batch`` tokens shared among them),
        so that llama.cpp runs it as one micro-batch: its split over KV cache streams takes the same number
        of tokens from every sequence in a micro-batch, and unequal slices would break a call into several.
        """
        k = len(embds)
        if k > self.n_seq or len(positions) != k:
            raise BackendError(
                f"{k} sequences (with {len(positions)} position arrays) for a context of {self.n_seq}"
            )
        done = [0] * k
        out: list[list[npt.NDArray[np.float32]]] = [[] for _ in range(k)]
        while True:
            active = [i for i in range(k) if done[i] < embds[i].shape[0]]
            if not active:
                break
            share = max(1, self.n_batch // len(active))
            spans = [(i, done[i], min(done[i] + share, embds[i].shape[0])) for i in active]
            e = np.concatenate([embds[i][a:b] for i, a, b in spans]).astype(np.float32, copy=False)
            p = np.concatenate([positions[i][:, a:b] for i, a, b in spans], axis=1)
            seq = np.concatenate([np.full(b - a, i, np.int32) for i, a, b in spans])
            rows = self._decode(
                e.shape[0],
                np.ascontiguousarray(p, dtype=np.int32).reshape(-1),
                embd=np.ascontiguousarray(e),
                seq=seq,
            )
            at = 0
            for i, a, b in spans:
                out[i].append(rows[at : at + b - a])
                at += b - a
                done[i] = b
        return [np.concatenate(parts) if parts else np.zeros((0, self.n_embd), np.float32) for parts in out]

    @contextmanager
    def causal(self, causal: bool) -> Iterator[None]:
        """Temporarily switch causal attention (for models whose media tokens attend both ways)."""
        if causal:
            yield
            return
        self._ll.llama_set_causal_attn(self.handle, False)
        try:
            yield
        finally:
            self._ll.llama_set_causal_attn(self.handle, True)

    def _decode(
        self,
        n: int,
        pos: npt.NDArray[np.int32],
        *,
        tokens: npt.NDArray[np.int32] | None = None,
        embd: npt.NDArray[np.float32] | None = None,
        outputs: Outputs = "all",
        seq: npt.NDArray[np.int32] | None = None,
    ) -> npt.NDArray[np.float32]:
        """One llama_decode of ``n`` tokens (or input embeddings) at ``pos``, token i in sequence ``seq[i]``
        (every one in sequence 0 without ``seq``)."""
        ll = self._ll
        # Built by hand rather than with llama_batch_init, which allocates one position per token where an
        # M-RoPE embedding batch needs four.
        n_seq = np.ones(n, dtype=np.int32)
        # token i's seq_id pointer: the address of its sequence's id in self._seq_ids
        ids = np.zeros(n, np.intp) if seq is None else seq.astype(np.intp)
        seq_ptrs = self._seq_ids.ctypes.data + ids * self._seq_ids.itemsize
        # an embeddings context outputs every token whatever the flags say (llama_context::decode's
        # output_all): asking for fewer would only misplace the rows read below
        logits = np.ones(n, dtype=np.int8)
        batch = ll.llama_batch()
        batch.n_tokens = n
        batch.token = tokens.ctypes.data_as(ctypes.POINTER(ll.llama_token)) if tokens is not None else None
        batch.embd = embd.ctypes.data_as(ctypes.POINTER(ctypes.c_float)) if embd is not None else None
        batch.pos = pos.ctypes.data_as(ctypes.POINTER(ll.llama_pos))
        batch.n_seq_id = n_seq.ctypes.data_as(ctypes.POINTER(ctypes.c_int32))
        batch.seq_id = seq_ptrs.ctypes.data_as(ctypes.POINTER(ctypes.POINTER(ctypes.c_int32)))
        batch.logits = logits.ctypes.data_as(ctypes.POINTER(ctypes.c_int8))
        rc = ll.llama_decode(self.handle, batch)
        self.calls += 1
        if rc != 0:
            raise BackendError(f"llama_decode failed with code {rc} ({n} tokens)")
        if outputs == "none":
            return np.zeros((0, self.n_embd), np.float32)
        ptr = ll.llama_get_embeddings(self.handle)
        if not ptr:
            raise BackendError("llama_get_embeddings returned no data")
        rows = np.ctypeslib.as_array(ptr, shape=(n, self.n_embd))
        return (rows if outputs == "all" else rows[-1:]).copy()

    def close(self) -> None:
        if self.handle:
            self._ll.llama_free(self.handle)
            self.handle = None


@dataclass
class PromptChunk:
    """One piece of a tokenized multimodal prompt: text tokens, or one encoded image."""

    tokens: npt.NDArray[np.int32] | None = None  # text chunk
    image_embd: npt.NDArray[np.float32] | None = None  # image chunk: (n_tokens, n_embd_inp)
    image_pos: npt.NDArray[np.int32] | None = None  # image chunk: (n_pos_per_token, n_tokens), absolute
    n_pos: int = 0  # positions the chunk advances
    causal: bool = True

    @property
    def n_tokens(self) -> int:
        if self.tokens is not None:
            return len(self.tokens)
        assert self.image_embd is not None
        return int(self.image_embd.shape[0])


class MtmdContext:
    """A vision encoder (mmproj GGUF) bound to its language model through mtmd."""

    def __init__(
        self,
        mmproj: Path,
        model: LlamaModel,
        *,
        threads: int,
        use_gpu: bool,
        min_tokens: int,
        max_tokens: int,
    ) -> None:
        _, mt = backend()
        self._mt = mt
        params = mt.mtmd_context_params_default()
        params.use_gpu = use_gpu
        params.n_threads = threads
        params.print_timings = False
        params.warmup = False
        params.image_min_tokens = min_tokens
        params.image_max_tokens = max_tokens
        # the caller sizes its groups of images (tokenize_many); mtmd's own cap (1024 output tokens by
        # default) would split a group of two A4 pages
        params.batch_max_tokens = 2**31 - 1
        handle = mt.mtmd_init_from_file(str(mmproj).encode(), model.handle, params)
        if not handle:
            raise BackendError(f"{mmproj}: mtmd could not load this vision encoder (see the log for why)")
        self.handle: Any = handle
        if not mt.mtmd_support_vision(handle):
            self.close()
            raise BackendError(f"{mmproj}: this mmproj has no vision encoder")
        self.model = model
        self.marker = mt.mtmd_default_marker().decode()
        self.mrope = bool(mt.mtmd_decode_use_mrope(handle))
        #: vision-encoder passes run so far (one per image, or one per group that mtmd batches)
        self.passes = 0

    def tokenize(self, prompt: str, rgb: npt.NDArray[np.uint8], *, pos0: int = 0) -> list[PromptChunk]:
        """Split ``prompt`` at the media marker, encode the image ``rgb`` (h, w, 3) and return the chunks,
        their positions counted from ``pos0`` (where the prompt continues a decoded prefix).

        The image must already have the size the model wants: mtmd's own resize pads rather than stretches
        and rounds halves differently from the reference, so docvec resizes in Python first.
        """
        return self.tokenize_many(prompt, [rgb], pos0=pos0)[0]

    def tokenize_many(
        self, prompt: str, images: Sequence[npt.NDArray[np.uint8]], *, pos0: int = 0
    ) -> list[list[PromptChunk]]:
        """:meth:`tokenize` for each of ``images`` in the same ``prompt``, their images encoded together:
        as many as the vision encoder takes in one pass (``mtmd_batch``: the graphs that llama.cpp patch 0008
        lets batch take images of any mix of sizes), one pass per image where it takes one. The vectors are
        those of one image at a time."""
        mt = self._mt
        text = mt.mtmd_input_text()
        raw = prompt.encode("utf-8")
        text.text = raw
        text.text_len = len(raw)
        text.add_special = False
        text.parse_special = True
        lists: list[Any] = []
        bitmaps: list[Any] = []
        try:
            for rgb in images:
                h, w = int(rgb.shape[0]), int(rgb.shape[1])
                data = np.ascontiguousarray(rgb, dtype=np.uint8)
                bitmap = mt.mtmd_bitmap_init(w, h, data.ctypes.data_as(ctypes.POINTER(ctypes.c_uint8)))
                if not bitmap:
                    raise BackendError(f"mtmd_bitmap_init failed for a {w}x{h} image")
                bitmaps.append(bitmap)
                chunks = mt.mtmd_input_chunks_init()
                lists.append(chunks)
                rc = mt.mtmd_tokenize(
                    self.handle, chunks, ctypes.byref(text), (mt.mtmd_bitmap_p_ctypes * 1)(bitmap), 1
                )
                if rc != 0:
                    raise BackendError(f"mtmd_tokenize failed with code {rc} for a {w}x{h} image")
            native = [
                [mt.mtmd_input_chunks_get(chunks, i) for i in range(mt.mtmd_input_chunks_size(chunks))]
                for chunks in lists
            ]
            embds = self._encode(
                [
                    c
                    for cs in native
                    for c in cs
                    if mt.mtmd_input_chunk_get_type(c) == mt.MTMD_INPUT_CHUNK_TYPE_IMAGE
                ]
            )
            out: list[list[PromptChunk]] = []
            for cs in native:
                pos = pos0
                prompt_chunks: list[PromptChunk] = []
                for c in cs:
                    prompt_chunks.append(self._chunk(c, pos, embds))
                    pos += prompt_chunks[-1].n_pos
                out.append(prompt_chunks)
            return out
        finally:
            for chunks in lists:
                mt.mtmd_input_chunks_free(chunks)
            for bitmap in bitmaps:
                mt.mtmd_bitmap_free(bitmap)

    def _encode(self, chunks: list[Any]) -> dict[int, npt.NDArray[np.float32]]:
        """The encoder's output for each image chunk (by address): one pass for as many as ``mtmd_batch``
        takes together, the next pass from the first it refuses (code 2, too many tokens, or 3, cannot be
        batched: an encoder that takes one image per pass)."""
        mt = self._mt
        out: dict[int, npt.NDArray[np.float32]] = {}
        width = self.model.n_embd_inp

        def rows(ptr: Any, chunk: Any) -> npt.NDArray[np.float32]:
            n_tokens = int(mt.mtmd_input_chunk_get_n_tokens(chunk))
            return np.ctypeslib.as_array(ptr, shape=(n_tokens, width)).copy()

        if len(chunks) == 1:
            rc = mt.mtmd_encode_chunk(self.handle, chunks[0])
            if rc != 0:
                raise BackendError(f"mtmd_encode_chunk failed with code {rc}")
            self.passes += 1
            out[int(chunks[0])] = rows(mt.mtmd_get_output_embd(self.handle), chunks[0])
            return out
        i = 0
        while i < len(chunks):
            batch = mt.mtmd_batch_init(self.handle)
            if not batch:
                raise BackendError("mtmd_batch_init failed")
            try:
                group = [chunks[i]]
                rc = mt.mtmd_batch_add_chunk(batch, chunks[i])
                if rc != 0:
                    raise BackendError(f"mtmd_batch_add_chunk failed with code {rc}")
                while i + len(group) < len(chunks):
                    rc = mt.mtmd_batch_add_chunk(batch, chunks[i + len(group)])
                    if rc in (2, 3):
                        break
                    if rc != 0:
                        raise BackendError(f"mtmd_batch_add_chunk failed with code {rc}")
                    group.append(chunks[i + len(group)])
                rc = mt.mtmd_batch_encode(batch)
                if rc != 0:
                    raise BackendError(f"mtmd_batch_encode failed with code {rc} for {len(group)} images")
                self.passes += 1
                for c in group:
                    ptr = mt.mtmd_batch_get_output_embd(batch, c)
                    if not ptr:
                        raise BackendError("mtmd_batch_get_output_embd found no output for an image")
                    out[int(c)] = rows(ptr, c)
            finally:
                mt.mtmd_batch_free(batch)
            i += len(group)
        return out

    def _chunk(self, chunk: Any, pos0: int, embds: dict[int, npt.NDArray[np.float32]]) -> PromptChunk:
        mt = self._mt
        kind = mt.mtmd_input_chunk_get_type(chunk)
        if kind == mt.MTMD_INPUT_CHUNK_TYPE_TEXT:
            n = ctypes.c_size_t(0)
            ptr = mt.mtmd_input_chunk_get_tokens_text(chunk, ctypes.byref(n))
            toks = (
                np.ctypeslib.as_array(ptr, shape=(n.value,)).astype(np.int32)
                if n.value
                else np.zeros(0, np.int32)
            )
            return PromptChunk(tokens=toks, n_pos=int(n.value))
        if kind != mt.MTMD_INPUT_CHUNK_TYPE_IMAGE:
            raise BackendError(f"unexpected mtmd chunk type {kind}")
        embd = embds[int(chunk)]
        n_tokens = int(embd.shape[0])
        if self.mrope:
            img = mt.mtmd_input_chunk_get_tokens_image(chunk)
            pos = np.empty((4, n_tokens), dtype=np.int32)
            for i in range(n_tokens):
                p = mt.mtmd_image_tokens_get_decoder_pos(img, pos0, i)
                pos[:, i] = (p.t, p.y, p.x, p.z)
        else:
            pos = np.arange(pos0, pos0 + n_tokens, dtype=np.int32)[None, :]
        return PromptChunk(
            image_embd=embd,
            image_pos=pos,
            n_pos=int(mt.mtmd_input_chunk_get_n_pos(chunk)),
            causal=not bool(mt.mtmd_decode_use_non_causal(self.handle, chunk)),
        )

    def close(self) -> None:
        if self.handle:
            self._mt.mtmd_free(self.handle)
            self.handle = None


def quantize(src: Path, dst: Path, ftype: int, *, threads: int) -> None:
    """Quantize a GGUF language model with llama.cpp's own quantizer (``llama_model_quantize``)."""
    ll, _ = backend()
    params = ll.llama_model_quantize_default_params()
    params.nthread = threads
    params.ftype = ftype
    rc = ll.llama_model_quantize(str(src).encode(), str(dst).encode(), ctypes.byref(params))
    if rc != 0:
        raise BackendError(f"llama_model_quantize failed with code {rc} for {src}")
