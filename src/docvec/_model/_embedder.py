"""Single-vector and multi-vector embeddings of queries, passages and page images through llama.cpp.

>>> with Embedder.open("path/to/model") as emb:           # doctest: +SKIP
...     q = emb.embed_queries(["invoice total"])          # (1, 2048) float32, unit norm
...     p = emb.embed_images(["page-1.png"], dim=512)     # Matryoshka-truncated, re-normalised
...     p, tokens = emb.embed_images_multi(["page-1.png"])  # the same, and (n_tokens, head_dim) per page

Multi-vector output needs the model's head (``multivector-head.gguf`` beside its GGUFs, see
:mod:`docvec._model._head`); the single vector and the token vectors come from one forward pass.

Which tokens get a vector: all of them, as the reference code of a model with a head (a profile with
``multivector``) returns them. Its forward pass applies the head to the last hidden state of every
position, and its encoders, asked for token vectors, keep every position the attention mask covers, i.e.
the whole input sequence: for a query the profile's query template with the text in it; for a page the
whole image prompt (the image template's tokens, the vision markers and one token per image token). So
MaxSim scores come out as with the model's own vectors; dropping the template tokens would make another,
unevaluated model. The single vector pools a subset of the same states (the profile's pooling: texts all
tokens, images the vision span), so both come from one decode.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from .._closing import Closing
from .._config import DECODE_BUDGET_MB, EmbedSettings
from .._errors import ConfigError, InputError, ModelError, ModelMismatchError
from .._records import ModelFingerprint
from ._files import ModelFiles, inspect_pair
from ._fingerprint import fingerprint
from ._gguf import GGUFInfo, read_gguf_info
from ._head import FILE_NAME as HEAD_FILE
from ._head import MultiVectorHead, read_head
from ._images import ImageInput, load_image, prepare_image, prepare_images
from ._native import PromptChunk
from ._profiles import ImageBounds, ModelProfile, profile_for
from ._registry import pull_with_head
from ._resolve import resolve_model
from ._session import Session

__all__ = ["Embedder", "ImageStates", "TokenStates", "inspect_model", "normalize"]

log = logging.getLogger("docvec")

Vectors = npt.NDArray[np.float32]


def normalize(vectors: Vectors, dim: int | None = None) -> Vectors:
    """Truncate rows to ``dim`` (Matryoshka) and scale each to unit L2 norm."""
    v = vectors[:, :dim] if dim is not None else vectors
    norms = np.linalg.norm(v, axis=1, keepdims=True)
    return np.asarray(v / np.maximum(norms, np.finfo(np.float32).tiny), dtype=np.float32)


@dataclass(frozen=True)
class TokenStates:
    """Last hidden states of every token of one input, with how long each stage took."""

    states: Vectors  # (n_tokens, hidden)
    token_ids: npt.NDArray[np.int32]  # -1 for image tokens
    lm_seconds: float


@dataclass(frozen=True)
class ImageStates(TokenStates):
    """Token states of an image prompt, and the pooled span (first, last index, both included) of a
    profile that pools one."""

    span: tuple[int, int] | None  # None: the profile pools no span (last-token pooling)
    size: tuple[int, int]  # (width, height) the image was resized to
    vision_seconds: float


class Embedder(Closing):
    """Embeds texts and images with one GGUF language model and its mmproj vision encoder, and, when the
    model has a multi-vector head (``files.head``), into one vector per token as well (:attr:`head_dim`).

    One embedder serves one thread at a time (llama.cpp contexts are not thread-safe); calls from several
    threads are serialised. Close it (or use it as a context manager) to free the native memory.
    """

    def __init__(
        self,
        files: ModelFiles,
        settings: EmbedSettings | None = None,
        *,
        headers: tuple[GGUFInfo, GGUFInfo] | None = None,
        decode_budget: int = DECODE_BUDGET_MB << 20,
    ) -> None:
        """Load ``files`` (checked first: see :func:`docvec._model._files.inspect_pair`) with ``settings``.

        ``headers`` are the two files' GGUF headers when the caller has read them already (so that an
        open reads each header once); the sizes and image bounds in ``settings`` are checked against the
        model's profile before any weight is loaded. An image file whose decoding would take more than
        ``decode_budget`` bytes is refused (``DOCVEC_RENDER__MAX_MEMORY_MB``, as in the render workers).
        The multi-vector head, when ``files.head`` names one, is loaded and checked here too (a bad file is
        a :class:`~docvec._errors.ModelFileError` naming it; one of another width a
        :class:`~docvec._errors.ModelMismatchError`).
        """
        self._view = False
        self.settings = settings or EmbedSettings()
        self.decode_budget = decode_budget
        lm_info, mm_info = headers or inspect_pair(files)
        self.files = files
        if lm_info.is_reranker:
            raise ModelMismatchError(
                f"{files.language_model} is a reranker, not an embedding model: it scores (query, page) "
                "pairs and gives no vectors. Use it as the reranker (DOCVEC_RERANK_MODEL, `docvec rerank`)"
            )
        # before the weights: a bad head fails the open in milliseconds; its kind may choose the profile
        self._head: MultiVectorHead | None = (
            read_head(files.head, width=lm_info.embedding_length) if files.head is not None else None
        )
        kind = self._head.kind if self._head is not None else None
        self.profile: ModelProfile = profile_for(lm_info.architecture, mm_info.projector, kind)
        self._check_geometry(mm_info)
        #: what the files hold, by content (:mod:`docvec._model._fingerprint`): recorded with every vector
        self.fingerprint = ModelFingerprint(
            model=fingerprint(lm_info),
            mmproj=fingerprint(mm_info),
            head=fingerprint(read_gguf_info(files.head)) if files.head is not None else None,
        )
        s = self.settings
        # the vector size and image bounds in use: the settings' overrides, else the model's own
        self._default_dim: int
        self.bounds: ImageBounds
        #: the full size of this model's single vectors: its hidden size, or, for a late-interaction
        #: model (whose vector is its token vectors' mean), its head's
        self.width: int = (
            self._head.dim
            if self._head is not None and self.profile.late_interaction
            else lm_info.embedding_length or 0
        )
        self._default_dim, self.bounds = self.profile.resolve(s, self.width)
        image_prompt = self.bounds.max_pixels // self.profile.image_unit**2 + 64
        #: the loaded model, shared with every view of this embedder (:meth:`with_dim`)
        self._session = Session(
            files,
            s,
            self.profile,
            header=lm_info,
            bounds=self.bounds,
            n_ctx=max(s.max_text_tokens, image_prompt),
            page_tokens=image_prompt,
        )
        #: the language model's attention settings in use (:func:`docvec._model._session.attention`)
        self.flash_attention, self.kv_cache = self._session.flash_attention, self._session.kv_cache
        span = self.profile.image_span
        session = self._session
        self._span_ids = (session.special_id(span[0]), session.special_id(span[1])) if span else None

    @classmethod
    def open(
        cls,
        model: str | Path,
        settings: EmbedSettings | None = None,
        *,
        cache_dir: Path | None = None,
        decode_budget: int = DECODE_BUDGET_MB << 20,
    ) -> Embedder:
        """An embedder for a model folder, a ``"LM.gguf,MMPROJ.gguf"`` pair or a registry name (found in
        docvec's cache folder ``cache_dir`` and the Hugging Face cache: see
        :func:`docvec._model._resolve.resolve_model`)."""
        files, lm, mm = resolve_model(model, cache_dir=cache_dir)
        return cls(files, settings, headers=(lm, mm), decode_budget=decode_budget)

    # -- public embedding API -------------------------------------------------------------------------

    @property
    def dim(self) -> int:
        """Size of the vectors returned when no ``dim`` is passed."""
        return self._dim(None)

    @property
    def hidden_size(self) -> int:
        """Width of the language model's hidden states (the vector size before truncation, except for a
        late-interaction model: :attr:`width`)."""
        return self._session.model.n_embd

    @property
    def has_multivector(self) -> bool:
        """Whether this model has a multi-vector head, so that the ``*_multi`` methods work."""
        return self._head is not None

    @property
    def head_dim(self) -> int | None:
        """Size of the token vectors of the multi-vector head; None without a head."""
        return self._head.dim if self._head is not None else None

    def embed_queries(self, texts: Sequence[str], *, dim: int | None = None) -> Vectors:
        """Embed search queries (in the profile's ``query_template``); returns (n, dim) float32 rows of
        unit norm."""
        return self._embed_texts(texts, self.profile.query_template, dim, None)[0]

    def embed_passages(self, texts: Sequence[str], *, dim: int | None = None) -> Vectors:
        """Embed text passages (in the profile's ``passage_template``); returns (n, dim) float32 rows of
        unit norm."""
        return self._embed_texts(texts, self.profile.passage_template, dim, None)[0]

    def embed_images(self, images: Sequence[ImageInput], *, dim: int | None = None) -> Vectors:
        """Embed page images (PIL images or paths); returns (n, dim) float32 rows of unit norm.

        A bad item raises :class:`InputError` naming its index and file before any work is done on the
        rest of the batch.
        """
        return self._embed_images(images, dim, None)[0]

    # -- multi-vector (late interaction; which tokens and why: the module's docstring) -----------------

    def embed_queries_multi(
        self, texts: Sequence[str], *, dim: int | None = None
    ) -> tuple[Vectors, list[Vectors]]:
        """Embed search queries as :meth:`embed_queries` does, and into one vector per token: returns the
        (n, dim) single vectors and, per query, a (tokens, :attr:`head_dim`) float32 array of unit rows
        (every token of the template and the text; ``dim`` applies to the single vectors only).

        Needs the model's multi-vector head (:attr:`has_multivector`), else raises :class:`ModelError`.
        """
        return self._embed_texts(texts, self.profile.query_template, dim, self._require_head())

    def embed_passages_multi(
        self, texts: Sequence[str], *, dim: int | None = None
    ) -> tuple[Vectors, list[Vectors]]:
        """Embed text passages as :meth:`embed_passages` does, and into one vector per token, as
        :meth:`embed_queries_multi` does."""
        return self._embed_texts(texts, self.profile.passage_template, dim, self._require_head())

    def embed_images_multi(
        self, images: Sequence[ImageInput], *, dim: int | None = None
    ) -> tuple[Vectors, list[Vectors]]:
        """Embed page images as :meth:`embed_images` does, and into one vector per token: returns the
        (n, dim) single vectors (the same numbers :meth:`embed_images` returns) and, per image, a
        (tokens, :attr:`head_dim`) float32 array of unit rows, one per token of the whole image prompt
        (template, vision markers and image tokens; ``dim`` applies to the single vectors only).

        Needs the model's multi-vector head (:attr:`has_multivector`), else raises :class:`ModelError`.
        """
        return self._embed_images(images, dim, self._require_head())

    # -- token-level access (parity tests, benchmarks, the multi-vector head) ------------------------------

    def text_states(self, text: str) -> TokenStates:
        """Hidden states of every token of ``text`` exactly as given (no prompt is added; markup such as
        ``<|im_start|>`` is read as plain text)."""
        return self.prompt_states("{text}", text)

    def prompt_states(self, template: str, text: str) -> TokenStates:
        """Hidden states of every token of ``text`` in ``template`` (``{text}`` marks its place), as the
        embedding methods decode it: the template's control tokens are read as such, the text as plain text.

        A text longer than ``max_text_tokens`` is cut (with a warning) and the template kept whole, so that
        the tokens a pooling rule reads (the prompt's last one) stay where the model expects them.
        """
        session = self._session
        with session.use():
            start, body, end = session.prompt(template, text)
            room = self.settings.max_text_tokens - len(start) - len(end)
            if len(body) > room:
                log.warning(
                    "text of %d tokens truncated to max_text_tokens=%d",
                    len(body),
                    self.settings.max_text_tokens,
                )
                body = body[: max(room, 0)]
            tokens = np.concatenate([start, body, end]).astype(np.int32)
            t0 = time.perf_counter()
            session.context.clear()
            states = session.context.decode_tokens(tokens, 0)
            return TokenStates(states, tokens, time.perf_counter() - t0)

    def image_states(self, image: ImageInput, template: str | None = None) -> ImageStates:
        """Hidden states of every token of the image prompt, and the span that is pooled. ``template`` is
        another prompt to decode the image in (``{marker}`` marks its place) instead of the profile's."""
        return self._image_states(self._prepare(image), template)

    def _prepare(self, image: ImageInput) -> npt.NDArray[np.uint8]:
        return prepare_image(load_image(image, budget=self.decode_budget), self.bounds)

    def _image_states(self, rgb: npt.NDArray[np.uint8], template: str | None = None) -> ImageStates:
        return self._images_states([rgb], template)[0]

    def _images_states(
        self, rgbs: Sequence[npt.NDArray[np.uint8]], template: str | None = None
    ) -> list[ImageStates]:
        """:meth:`_image_states` of each of ``rgbs``, their images through the vision encoder together (in as
        few passes as it takes: see :meth:`MtmdContext.tokenize_many`) and their prompts through the
        language model together (:meth:`Session.decode_many`). Each one's ``vision_seconds`` and
        ``lm_seconds`` are its share of each stage's time (the time over the images)."""
        session = self._session
        prompt = (template or self.profile.image_template).format(marker=session.vision.marker)
        n = max(len(rgbs), 1)
        with session.use():
            t0 = time.perf_counter()
            tokenized = session.vision.tokenize_many(prompt, rgbs)
            t1 = time.perf_counter()
            states = session.decode_many(tokenized)
            lm_seconds = (time.perf_counter() - t1) / n
        out: list[ImageStates] = []
        for rgb, chunks, st in zip(rgbs, tokenized, states, strict=True):
            ids = _token_ids(chunks)
            out.append(
                ImageStates(
                    states=st,
                    token_ids=ids,
                    lm_seconds=lm_seconds,
                    span=self._span(ids),
                    size=(int(rgb.shape[1]), int(rgb.shape[0])),
                    vision_seconds=(t1 - t0) / n,
                )
            )
        return out

    # -- lifecycle -----------------------------------------------------------------------------------

    @property
    def is_view(self) -> bool:
        """Whether this is a view made by :meth:`with_dim` (which owns nothing)."""
        return self._view

    def with_dim(self, dim: int) -> Embedder:
        """This model, returning ``dim``-d vectors by default: a view that shares the loaded model with this
        embedder, and its lifetime. It costs no memory; its :meth:`close` does nothing; once this embedder
        is closed, every call of the view raises :class:`~docvec.ModelError`, as this embedder's do."""
        view = copy.copy(self)  # the same session: one lock, one closed state for the owner and its views
        view._default_dim = self.profile.check_dim(dim, self.width)
        view._view = True
        return view

    def close(self) -> None:
        """Free the native model, context and vision encoder, once the call in progress (if any) ends;
        a later call raises :class:`~docvec.ModelError`. A view's does nothing."""
        session = getattr(self, "_session", None)  # None: the open failed before loading
        if session is not None and not self._view:
            session.close()

    def __del__(self) -> None:
        # at interpreter shutdown the native library may already be gone
        with contextlib.suppress(Exception):
            self.close()

    # -- internals -----------------------------------------------------------------------------------

    def _require_head(self) -> MultiVectorHead:
        if self._head is not None:
            return self._head
        if not self.profile.multivector:
            raise ModelError(
                f"{self.profile.name} has no multi-vector head: it gives single vectors only. Multi-vector "
                f"search needs a model with one ({pull_with_head()})"
            )
        raise ModelError(
            f"the model in {self.files.language_model.parent} has no multi-vector head ({HEAD_FILE} "
            "beside its GGUFs), so it gives single vectors only. Make one with `docvec models convert "
            "HF_DIR OUT_DIR` from a checkpoint that has a multi_vector_projector, or get a model with one "
            f"({pull_with_head()})"
        )

    def _embed_texts(
        self, texts: Sequence[str], template: str, dim: int | None, head: MultiVectorHead | None
    ) -> tuple[Vectors, list[Vectors]]:
        """Pooled vectors of ``texts`` in ``template``, and, with a ``head``, each one's token vectors."""
        d = self._dim(dim)
        items = _as_list(texts, "texts")
        for i, t in enumerate(items):
            if not isinstance(t, str):
                raise InputError(f"expected a string, got {type(t).__name__}", index=i)
            if not t.strip():
                raise InputError("empty text", index=i)
        out = np.empty((len(items), self.width), np.float32)
        tokens: list[Vectors] = []
        for i, t in enumerate(items):
            out[i] = self._vectors(self.prompt_states(template, t).states, None, head, tokens)
        return normalize(out, d), tokens

    def _embed_images(
        self, images: Sequence[ImageInput], dim: int | None, head: MultiVectorHead | None
    ) -> tuple[Vectors, list[Vectors]]:
        """Pooled vectors of ``images``, and, with a ``head``, each one's token vectors."""
        d = self._dim(dim)
        prepared = prepare_images(images, self.bounds, budget=self.decode_budget)
        out = np.empty((len(prepared), self.width), np.float32)
        tokens: list[Vectors] = []
        step = self.settings.vision_batch  # pages per vision-encoder pass
        for i in range(0, len(prepared), step):
            group = prepared[i : i + step]
            states = [self._image_states(group[0])] if len(group) == 1 else self._images_states(group)
            for j, st in enumerate(states):
                out[i + j] = self._vectors(st.states, st.span, head, tokens)
        return normalize(out, d), tokens

    def _vectors(
        self,
        states: Vectors,
        span: tuple[int, int] | None,
        head: MultiVectorHead | None,
        tokens: list[Vectors],
    ) -> Vectors:
        """One input's vector from its token states (before normalisation), and, with a ``head``, its token
        vectors appended to ``tokens``."""
        if self.profile.late_interaction:
            assert self._head is not None  # profile_for chose it by its head
            vectors = self._head(states)
            if head is not None:
                tokens.append(vectors)
            return np.asarray(vectors.mean(axis=0), np.float32)
        if head is not None:
            tokens.append(head(states))
        return self._pool(states, span)

    def _pool(self, states: Vectors, span: tuple[int, int] | None) -> Vectors:
        """One input's vector from its token states, by the profile's rule (before normalisation)."""
        if self.profile.pooling == "last":
            return np.asarray(states[-1], np.float32)
        a, b = span if span is not None else (0, len(states) - 1)
        return np.asarray(states[a : b + 1].mean(axis=0), np.float32)

    def _span(self, ids: npt.NDArray[np.int32]) -> tuple[int, int] | None:
        """The pooled image span (first, last index, both included), or None for a profile without one."""
        if self._span_ids is None:
            return None
        start, end = self._span_ids
        a = np.flatnonzero(ids == start)
        b = np.flatnonzero(ids == end)
        if len(a) != 1 or len(b) != 1 or b[0] <= a[0]:
            raise ModelMismatchError(
                f"{self.files.language_model}: the image prompt does not hold one {self.profile.image_span} "
                f"span as {self.profile.name} expects (tokens {ids.tolist()})"
            )
        return int(a[0]), int(b[0])

    def _dim(self, dim: int | None) -> int:
        return self._default_dim if dim is None else self.profile.check_dim(dim, self.width)

    def _check_geometry(self, mm: GGUFInfo) -> None:
        patch = mm.metadata.get("clip.vision.patch_size")
        merge = mm.metadata.get("clip.vision.spatial_merge_size", 2)
        if patch is not None and int(patch) * int(merge) != self.profile.image_unit:
            raise ConfigError(
                f"{mm.path}: patch {patch} x merge {merge} does not give the {self.profile.image_unit}-pixel "
                f"tokens {self.profile.name} expects"
            )


def inspect_model(model: str | Path, *, cache_dir: Path | None = None) -> tuple[ModelProfile, int]:
    """The profile of the model ``model`` names (resolved as :meth:`Embedder.open` resolves it) and the
    full size of its vectors (:attr:`Embedder.width`), from its files' headers and its head, without loading
    any weight."""
    files, lm, mm = resolve_model(model, cache_dir=cache_dir)
    head = read_head(files.head) if files.head is not None else None
    profile = profile_for(lm.architecture, mm.projector, head.kind if head is not None else None)
    width = head.dim if head is not None and profile.late_interaction else lm.embedding_length or 0
    return profile, width


def _token_ids(chunks: list[PromptChunk]) -> npt.NDArray[np.int32]:
    """The token ids of a tokenized prompt, -1 for each image token."""
    return np.concatenate(
        [c.tokens if c.tokens is not None else np.full(c.n_tokens, -1, np.int32) for c in chunks]
    )


def _as_list(items: Sequence[Any], what: str) -> list[Any]:
    if isinstance(items, str | bytes | Path):
        raise InputError(f"{what} must be a list, not a single {type(items).__name__}")
    return list(items)
