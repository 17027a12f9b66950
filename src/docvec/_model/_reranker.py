"""A second stage: a reranker that reads a query and a page image together and scores the pair.

>>> with Reranker.open("path/to/reranker") as rr:                       # doctest: +SKIP
...     rr.score("total amount due", ["page-1.png", "page-2.png"])    # array([0.93, 0.04])

The model is a vision-language model asked whether the page meets the query (:class:`RerankerProfile`:
the conversation and the answer tokens, from the model's official code). Its score is
``sigmoid((head[yes] - head[no]) . h)``, ``h`` the last position's last hidden state: one dot product with
the difference of two rows of the language-model head, read once from the GGUF's classifier tensor
(``cls.output.weight``, rows labelled ``yes`` and ``no``, which llama.cpp's converter writes for a
reranker checkpoint), so no logits over the vocabulary are ever computed.

The conversation up to the page (system message, instruction, query) is the same for every page of one
query: it is decoded once per call and the KV cache is cut back to it before each page, so only the
page's tokens are decoded per candidate.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from .._closing import Closing
from .._config import DECODE_BUDGET_MB, EmbedSettings
from .._errors import InputError, ModelError, ModelFileError, ModelMismatchError
from .._records import ModelFingerprint
from ._files import ModelFiles, inspect_pair
from ._fingerprint import fingerprint
from ._gguf import GGUFInfo
from ._images import ImageInput, prepare_images
from ._native import PromptChunk
from ._profiles import ImageBounds, RerankerProfile, reranker_profile_for
from ._resolve import resolve_model
from ._session import Session

__all__ = ["CLASSIFIER", "RerankTiming", "Reranker"]

log = logging.getLogger("docvec")

#: the GGUF tensor holding the answer tokens' rows of the language-model head (llama.cpp's converter
#: writes it for a reranker checkpoint, with the rows' labels in ``{arch}.classifier.output_labels``)
CLASSIFIER = "cls.output.weight"


@dataclass(frozen=True)
class RerankTiming:
    """Where the time of one :meth:`Reranker.score` call went, in seconds."""

    prefix: float  # decoding the conversation up to the page (once per call when it is reused)
    vision: float  # the vision encoder, all pages
    language: float  # the language model over the pages' tokens, all pages
    pages: int
    tokens: int  # image tokens, all pages


class Reranker(Closing):
    """Scores (query, page image) pairs with a GGUF reranker and its mmproj vision encoder.

    One reranker serves one thread at a time (a llama.cpp context is not thread-safe); calls from several
    threads are serialised. Close it (or use it as a context manager) to free the native memory.
    """

    def __init__(
        self,
        files: ModelFiles,
        settings: EmbedSettings | None = None,
        *,
        max_pixels: int | None = None,
        headers: tuple[GGUFInfo, GGUFInfo] | None = None,
        decode_budget: int = DECODE_BUDGET_MB << 20,
        reuse_prefix: bool = True,
    ) -> None:
        """Load ``files`` with the threads, GPU offload and batch size of ``settings`` (the embedder's:
        a reranker shares its machine); ``max_pixels`` is the page budget (default: the profile's).

        Pages are resized within the budget by the model's own rule; a stored page smaller than the budget
        is not enlarged. ``reuse_prefix`` False decodes the whole conversation for every page (for
        measurements: the scores are the same).
        """
        s = settings or EmbedSettings()
        self.settings = s
        self.decode_budget = decode_budget
        self.reuse_prefix = reuse_prefix
        lm_info, mm_info = headers or inspect_pair(files)
        self.files = files
        self.profile: RerankerProfile = reranker_profile_for(lm_info.architecture, mm_info.projector)
        self.bounds: ImageBounds = self.profile.bounds(max_pixels)
        labels = _classifier_labels(lm_info)
        #: head[yes] - head[no], float32 (the language model's width): the score's direction
        self.direction = _read_direction(lm_info, labels, self.profile)
        #: what the files hold, by content (:mod:`docvec._model._fingerprint`)
        self.fingerprint = ModelFingerprint(model=fingerprint(lm_info), mmproj=fingerprint(mm_info))
        if lm_info.embedding_length != self.direction.shape[0]:  # before the weights, as the head's check
            raise ModelMismatchError(
                f"{files.language_model}: its classifier rows are {self.direction.shape[0]} wide, its "
                f"hidden states {lm_info.embedding_length}"
            )
        # the conversation, the query and the largest page, in one sequence
        n_ctx = s.max_text_tokens + self.bounds.max_pixels // self.profile.image_unit**2 + 256
        self._session = Session(
            files, s, self.profile, header=lm_info, bounds=self.bounds, n_ctx=n_ctx, kind="reranker"
        )
        #: the language model's attention settings in use (:func:`docvec._model._session.attention`)
        self.flash_attention, self.kv_cache = self._session.flash_attention, self._session.kv_cache
        #: seconds spent by the last :meth:`score` call, by stage
        self.last_timing: RerankTiming | None = None

    @classmethod
    def open(
        cls,
        model: str | Path,
        settings: EmbedSettings | None = None,
        *,
        max_pixels: int | None = None,
        cache_dir: Path | None = None,
        decode_budget: int = DECODE_BUDGET_MB << 20,
    ) -> Reranker:
        """A reranker for a model folder, a ``"LM.gguf,MMPROJ.gguf"`` pair or a registry name
        (``docvec models list`` shows the rerankers; found in docvec's cache folder ``cache_dir`` once
        pulled)."""
        files, lm, mm = resolve_model(model, cache_dir=cache_dir)
        return cls(files, settings, max_pixels=max_pixels, headers=(lm, mm), decode_budget=decode_budget)

    @property
    def weights_bytes(self) -> int:
        """The size of the model's two GGUF files: what its weights take in memory once read (llama.cpp
        maps them, so processes on one machine share them)."""
        return sum(p.stat().st_size for p in (self.files.language_model, self.files.mmproj))

    def score(
        self, query: str, images: Sequence[ImageInput], *, instruction: str | None = None
    ) -> npt.NDArray[np.float64]:
        """The probability, by the model, that each page image meets ``query`` (0..1), in the order given.

        ``instruction`` replaces the profile's default task instruction. Every image is decoded and resized
        before any model work: a bad one is an :class:`InputError` naming its index and file. A query
        longer than ``max_text_tokens`` is cut, with a warning.
        """
        if not isinstance(query, str) or not query.strip():
            raise InputError("the query is empty")
        if instruction is not None and not instruction.strip():
            raise InputError("the instruction is empty")
        prepared = prepare_images(images, self.bounds, budget=self.decode_budget)
        prefix = self.profile.prefix.format(
            instruction=instruction or self.profile.instruction, query="{text}"
        )
        out = np.empty(len(prepared), np.float64)
        t_prefix = t_vision = t_lm = 0.0
        tokens = 0
        session = self._session
        ctx, vision = session.context, session.vision
        with session.use():
            ids = self._query_tokens(prefix, query)
            for i, rgb in enumerate(prepared):
                t0 = time.perf_counter()
                if i == 0 or not self.reuse_prefix:
                    ctx.clear()
                    ctx.decode_tokens(ids, 0, outputs="none")
                else:
                    ctx.keep(len(ids))
                t1 = time.perf_counter()
                chunks = vision.tokenize(vision.marker + self.profile.suffix, rgb, pos0=len(ids))
                t2 = time.perf_counter()
                h = self._decode_last(chunks, len(ids))
                t3 = time.perf_counter()
                out[i] = _sigmoid(float(np.dot(h.astype(np.float64), self.direction.astype(np.float64))))
                t_prefix += t1 - t0
                t_vision += t2 - t1
                t_lm += t3 - t2
                tokens += sum(c.n_tokens for c in chunks if c.tokens is None)
        self.last_timing = RerankTiming(t_prefix, t_vision, t_lm, len(prepared), tokens)
        return out

    # -- lifecycle -------------------------------------------------------------------------------------

    def close(self) -> None:
        """Free the native model, context and vision encoder once the call in progress (if any) ends; a
        later call raises :class:`~docvec.ModelError`."""
        session = getattr(self, "_session", None)  # None: the open failed before loading
        if session is not None:
            session.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()

    # -- internals -------------------------------------------------------------------------------------

    def _query_tokens(self, prefix: str, query: str) -> npt.NDArray[np.int32]:
        """The conversation's tokens up to the page (``prefix``, ``{text}`` where the query goes): its
        control tokens read as such, the instruction and the query as plain text, in one piece as the
        reference tokenizer reads it (markup in a query stays text); a query over ``max_text_tokens`` is cut
        at its end, the conversation kept whole."""
        session = self._session
        start, plain, _ = session.prompt(prefix, query)
        overhead = len(session.prompt(prefix, "")[1])
        room = self.settings.max_text_tokens
        if len(plain) - overhead > room:
            log.warning(
                "query of about %d tokens truncated to max_text_tokens=%d", len(plain) - overhead, room
            )
            while len(plain) - overhead > room:
                query = query[: max(1, len(query) * room // (len(plain) - overhead) - 1)]
                plain = session.prompt(prefix, query)[1]
        return np.concatenate([start, plain]).astype(np.int32)

    def _decode_last(self, chunks: list[PromptChunk], pos0: int) -> npt.NDArray[np.float32]:
        """Decode the page's chunks after the prefix; the last token's hidden state."""
        last = self._session.decode(chunks, pos0, outputs="last")
        if not len(last):
            raise ModelError("the reranker's prompt ended without a token to read")
        return np.asarray(last[-1], np.float32)


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))


def _classifier_labels(info: GGUFInfo) -> list[str]:
    """The labels of a reranker GGUF's classifier rows; a language model that is not a reranker is a
    :class:`ModelMismatchError` saying how to make one."""
    labels = info.metadata.get(f"{info.architecture}.classifier.output_labels")
    if not info.is_reranker or not isinstance(labels, list):
        raise ModelMismatchError(
            f"{info.path} is not a reranker: its GGUF has no rank pooling and no classifier labels, as "
            "llama.cpp's converter writes for a reranker checkpoint. Get one with `docvec models pull` "
            "(`docvec models list` shows the rerankers), or convert a reranker's checkpoint with "
            "`docvec models convert --reranker`"
        )
    return [str(x) for x in labels]


def _read_direction(info: GGUFInfo, labels: list[str], profile: RerankerProfile) -> npt.NDArray[np.float32]:
    """head[yes] - head[no] from the GGUF's classifier tensor, dequantized to float32 (the difference is
    taken in float32: exact for the F16/BF16 rows a conversion writes)."""
    for token in (profile.yes, profile.no):
        if token not in labels:
            raise ModelMismatchError(
                f"{info.path}: its classifier rows are {labels}, not the {profile.yes!r} and {profile.no!r} "
                f"answers {profile.name} scores with"
            )
    rows = _classifier_rows(info)
    if rows.shape[0] != len(labels):
        raise ModelFileError(info.path, f"{CLASSIFIER} has {rows.shape[0]} rows for {len(labels)} labels")
    d = rows[labels.index(profile.yes)] - rows[labels.index(profile.no)]
    if not np.all(np.isfinite(d)):
        raise ModelFileError(info.path, f"{CLASSIFIER} holds values that are not finite")
    return np.asarray(d, np.float32)


def _classifier_rows(info: GGUFInfo) -> npt.NDArray[np.float32]:
    """The classifier tensor of a GGUF as float32 rows (n_labels, width), whatever its stored type: read
    through docvec's header reader, which skips the vocabulary (gguf.GGUFReader decodes it: seconds)."""
    from gguf import GGMLQuantizationType
    from gguf.quants import dequantize

    if CLASSIFIER not in info.layout:
        raise ModelFileError(info.path, f"a reranker GGUF without its classifier tensor ({CLASSIFIER})")
    ttype, shape, data = info.tensor(CLASSIFIER)
    width, n_rows = shape[0], (shape[1] if len(shape) > 1 else 1)
    try:
        rows = dequantize(np.frombuffer(data, np.uint8), GGMLQuantizationType(ttype))
    except (ValueError, NotImplementedError) as e:
        raise ModelFileError(info.path, f"{CLASSIFIER} of type {ttype} cannot be read: {e}") from None
    return np.asarray(rows, np.float32).reshape(n_rows, width)
