"""One loaded model's native side, shared by every model kind (the :class:`~docvec.Embedder`, the
:class:`~docvec.Reranker`): its language model, context and vision encoder, and the guard around them.

A session opens the three handles with the threads, GPU offload and batch size of the settings, and the
attention and KV cache they name (the model's profile's defaults where they name none); it frees them once,
closing what it opened when the open fails part-way. Its handles serve one thread at a time, never after
they were freed, and a Ctrl-C meanwhile is held until the native calls return (:meth:`Session.use`). What
every kind does with them the same way is here too: a text prompt's tokens (its control tokens read as such,
a user's text as plain text) and the decoding of a tokenized multimodal prompt. What a kind reads from the
states (a pooled vector, token vectors, a score) is its own.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import threading
from collections.abc import Iterator
from typing import Protocol

import numpy as np
import numpy.typing as npt

from .._config import EmbedSettings
from .._errors import ConfigError, ModelError
from ._files import ModelFiles
from ._gguf import GGUFInfo
from ._native import LlamaContext, LlamaModel, MtmdContext, Outputs, PromptChunk, holding_interrupts
from ._profiles import ImageBounds
from ._token_table import TokenTable

__all__ = ["Defaults", "Session", "split_template"]

Tokens = npt.NDArray[np.int32]


class Defaults(Protocol):
    """What a session takes from a model's profile: its attention settings where the settings name none."""

    @property
    def flash_attention(self) -> bool: ...

    @property
    def kv_cache(self) -> str: ...

    @property
    def bf16_cpu_attention(self) -> bool: ...


def attention(settings: EmbedSettings, defaults: Defaults, header: GGUFInfo) -> tuple[bool, str]:
    """The language model's flash attention and KV cache type: the settings' where they name them, else the
    profile's, except that a BF16 language model on the CPU takes flash attention over a BF16 KV cache.

    That pair runs a BF16 model's attention on AMX tiles (llama.cpp patch 0009) and elsewhere in F32 over the
    BF16 keys and values, and keeps last-token vectors within the parity bar that an F16 cache with flash
    attention misses (the profiles' reason to leave it off); its cost and fidelity are in docs/models.md.
    GPUs, other weight types, and profiles that do not take it (a reranker's) keep the profile's choice.
    """
    from gguf.constants import LlamaFileType

    fa, kv = defaults.flash_attention, defaults.kv_cache
    bf16 = header.metadata.get("general.file_type") == LlamaFileType.MOSTLY_BF16
    if defaults.bf16_cpu_attention and settings.gpu_layers == 0 and bf16:
        fa, kv = True, "bf16"
    return (
        settings.flash_attention if settings.flash_attention is not None else fa,
        settings.kv_cache or kv,
    )


class Session:
    """The language model, context and vision encoder of ``files``, loaded for images within ``bounds``
    and prompts of up to ``n_ctx`` tokens (at most the model's trained length); ``header`` is the language
    model's GGUF header, read by the caller.

    ``kind`` names the model in the error a call after :meth:`close` gets ("the reranker ... was closed").
    With ``page_tokens`` (the longest page prompt) and the settings' ``vision_batch`` above 1, a second
    context decodes that many page prompts together, one sequence each (:meth:`decode_many`).
    """

    def __init__(
        self,
        files: ModelFiles,
        settings: EmbedSettings,
        defaults: Defaults,
        *,
        header: GGUFInfo,
        bounds: ImageBounds,
        n_ctx: int,
        kind: str = "model",
        page_tokens: int = 0,
    ) -> None:
        s = settings
        self.files = files
        self.kind = kind
        self._lock = threading.Lock()
        self._closed = False
        threads = s.threads or os.cpu_count() or 1
        unit2 = bounds.unit**2
        self.model = LlamaModel(files.language_model, gpu_layers=s.gpu_layers)
        try:
            #: the language model's attention settings in use (:func:`attention`)
            self.flash_attention, self.kv_cache = attention(s, defaults, header)
            self._token_table = TokenTable.open(header, self.model.n_embd_inp)
            context = functools.partial(
                LlamaContext,
                self.model,
                n_batch=s.decode_batch,
                threads=threads,
                flash_attention=self.flash_attention,
                kv_cache=self.kv_cache,
            )
            self.context = context(n_ctx=min(n_ctx, self.model.n_ctx_train))
            #: the context that decodes a group of pages, one sequence each; None: one page at a time
            self.pages: LlamaContext | None = None
            if page_tokens and s.vision_batch > 1:
                self.pages = context(n_ctx=min(page_tokens, self.model.n_ctx_train), n_seq=s.vision_batch)
            self.vision = MtmdContext(
                files.mmproj,
                self.model,
                threads=threads,
                use_gpu=s.vision_gpu,
                min_tokens=-(-bounds.min_pixels // unit2),
                max_tokens=bounds.max_pixels // unit2,
            )
        except BaseException:
            self.close()
            raise

    @contextlib.contextmanager
    def use(self) -> Iterator[None]:
        """The native handles, one thread at a time, never after they were freed (:class:`ModelError`); a
        Ctrl-C meanwhile is raised when the native calls return (see :func:`holding_interrupts`)."""
        with self._lock:
            if self._closed:
                raise ModelError(f"the {self.kind} {self.files.language_model.name} was closed")
            with holding_interrupts():
                yield

    def close(self) -> None:
        """Free the vision encoder, the context and the model, once the call in progress (if any) ends; a
        later :meth:`use` raises :class:`ModelError`. Calling it again does nothing."""
        with self._lock:
            self._closed = True
            for name in ("vision", "pages", "context", "model"):
                handle = getattr(self, name, None)  # absent when the open failed before it
                if handle is not None:
                    handle.close()

    # -- what every kind does alike (inside :meth:`use`) ---------------------------------------------------

    def prompt(self, template: str, text: str) -> tuple[Tokens, Tokens, Tokens]:
        """The tokens of ``text`` in ``template`` (``{text}`` marks its place) in three parts: the template's
        control part before the text, the plain stretch (the text and the template's words beside it, read
        as plain text: markup in a user's text stays text) and the control part after it (see
        :func:`split_template`). A kind that cuts a long text cuts the plain stretch."""
        head, plain_pre, plain_post, tail = split_template(template)
        return (
            self.model.tokenize(head, parse_special=True),
            self.model.tokenize(plain_pre + text + plain_post, parse_special=False),
            self.model.tokenize(tail, parse_special=True),
        )

    def special_id(self, token: str) -> int:
        """The id of ``token``, a control token of the model's vocabulary (:class:`ConfigError` when it is
        not one token there)."""
        ids = self.model.tokenize(token, parse_special=True)
        if len(ids) != 1:
            raise ConfigError(
                f"{self.files.language_model}: '{token}' is not a single token in this vocabulary"
            )
        return int(ids[0])

    def decode(
        self, chunks: list[PromptChunk], pos0: int = 0, *, outputs: Outputs = "all"
    ) -> npt.NDArray[np.float32]:
        """Decode a tokenized multimodal prompt's ``chunks`` (text tokens, encoded images) at their
        positions, after ``pos0`` decoded ones; the hidden states ``outputs`` asks for: every token's, or
        the prompt's last one's (none where its last chunk is empty)."""
        states: list[npt.NDArray[np.float32]] = []
        pos = pos0
        chunks = self._text_with_images(chunks, pos0)
        for i, c in enumerate(chunks):
            part: Outputs = outputs if outputs == "all" or i == len(chunks) - 1 else "none"
            if c.tokens is not None:
                states.append(self.context.decode_tokens(c.tokens, pos, outputs=part))
            else:
                assert c.image_embd is not None and c.image_pos is not None
                with self.context.causal(c.causal):
                    states.append(self.context.decode_embeddings(c.image_embd, c.image_pos, outputs=part))
            pos += c.n_pos
        return np.concatenate(states) if states else np.zeros((0, self.model.n_embd), np.float32)

    def decode_many(self, prompts: list[list[PromptChunk]]) -> list[npt.NDArray[np.float32]]:
        """Every token's hidden states of each tokenized prompt, each decoded from an empty cache: as
        sequences of one batch in the pages context where there is one and each prompt folds into one chunk
        of input embeddings (:meth:`_text_with_images`), else one prompt after the other. The states are
        those each prompt gives alone."""
        folded = [self._text_with_images(chunks, 0) for chunks in prompts]
        pages = self.pages
        if (
            pages is None
            or len(prompts) < 2
            or len(prompts) > pages.n_seq
            or any(len(f) != 1 or f[0].image_embd is None for f in folded)
            or any(f[0].n_tokens > pages.n_ctx for f in folded)
        ):
            out = []
            for chunks in folded:
                self.context.clear()
                out.append(self.decode(chunks))
            return out
        pages.clear()
        return pages.decode_sequences(
            [f[0].image_embd for f in folded],  # type: ignore[misc]
            [f[0].image_pos for f in folded],  # type: ignore[misc]
        )

    def _text_with_images(self, chunks: list[PromptChunk], pos0: int) -> list[PromptChunk]:
        """A prompt with images as one chunk of input embeddings, its text's rows read from the token table
        (:mod:`._token_table`) at the positions llama.cpp gives text (the same in every M-RoPE section):
        one pass over the weights instead of one more for each stretch of text around an image. The chunks
        as they are for text alone, for images that attend both ways, without a table, or where they are one
        chunk already."""
        if (
            self._token_table is None
            or len(chunks) < 2
            or not any(c.image_embd is not None for c in chunks)
            or not all(c.causal for c in chunks)
        ):
            return chunks
        n_sections = next(c.image_pos.shape[0] for c in chunks if c.image_pos is not None)
        embd: list[npt.NDArray[np.float32]] = []
        positions: list[npt.NDArray[np.int32]] = []
        pos = pos0
        for c in chunks:
            if c.tokens is not None:
                embd.append(self._token_table.rows(c.tokens))
                positions.append(
                    np.tile(np.arange(pos, pos + len(c.tokens), dtype=np.int32), (n_sections, 1))
                )
            else:
                assert c.image_embd is not None and c.image_pos is not None
                embd.append(c.image_embd)
                positions.append(c.image_pos)
            pos += c.n_pos
        return [
            PromptChunk(
                image_embd=np.concatenate(embd), image_pos=np.concatenate(positions, axis=1), n_pos=pos - pos0
            )
        ]


# a control token of the Qwen chat templates (<|im_start|>, <|vision_start|>, ...)
_CONTROL = re.compile(r"<\|[^|<>\s]+\|>")


@functools.lru_cache(maxsize=32)  # a profile has a few templates: split each once, not once per text
def split_template(template: str) -> tuple[str, str, str, str]:
    """``template`` cut around ``{text}`` into (control part, plain part, plain part, control part).

    The plain stretch runs from the last control token before ``{text}`` to the first one after it, and
    is tokenized with the text as plain text: the same tokens a tokenizer gives the whole prompt (it splits
    at control tokens first), but markup inside a user's text stays text.
    """
    if template.count("{text}") != 1:
        raise ConfigError(f"a text template holds '{{text}}' exactly once: {template!r}")
    pre, post = template.split("{text}")
    before = [m.end() for m in _CONTROL.finditer(pre)]
    after = _CONTROL.search(post)
    a = before[-1] if before else 0
    b = after.start() if after else len(post)
    return pre[:a], pre[a:], post[:b], post[b:]
