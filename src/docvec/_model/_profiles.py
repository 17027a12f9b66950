"""Model profiles: what an embedding model needs from the generic path (prompts, pooling, sizes, image
bounds). The embedder knows no model names; adding a model is adding a profile here.

Settings may override a profile's sizes and image bounds; :meth:`ModelProfile.resolve` checks the
overrides against the model and fills in what was left unset.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

from .._config import EmbedSettings
from .._errors import ConfigError, ModelMismatchError
from ._pooling import TokenPooling

__all__ = [
    "COLQWEN3",
    "COLQWEN3_5",
    "JINA_V4",
    "PROFILES",
    "QWEN3_VL_EMBEDDING",
    "QWEN3_VL_RERANKER",
    "RERANKER_PROFILES",
    "ImageBounds",
    "ModelProfile",
    "Pooling",
    "Published",
    "RerankerProfile",
    "profile_for",
    "reranker_profile_for",
]


@dataclass(frozen=True)
class ImageBounds:
    """How images are resized for a model: area bounds after resizing, the token unit, the aspect limit."""

    min_pixels: int
    max_pixels: int
    unit: int  # pixels per side covered by one image token (patch x spatial merge)
    max_aspect: float  # longer side over shorter side, at most


#: How a profile turns token states into one vector: ``mean`` averages a text's tokens and an image's
#: :attr:`ModelProfile.image_span`; ``last`` takes the last token's state (the prompt's final token);
#: ``tokens``: the model was trained for late interaction only and has no single vector of its own, so
#: docvec's is the mean of its token vectors (the multi-vector head's, every token), re-normalised: the
#: first stage a search reranks by MaxSim (docs/late-interaction.md), never a ranking of its own
Pooling = Literal["mean", "last", "tokens"]


@dataclass(frozen=True)
class Published:
    """A quality figure its authors published for a model, and where."""

    benchmark: str  # e.g. "ViDoRe v1 (nDCG@5)"
    score: float
    source: str  # the page or paper the figure comes from
    size: str | None = None  # which size of the model it is for ("2B"), where the family has several


@dataclass(frozen=True)
class ModelProfile:
    """How one embedding model turns queries, passages and images into single vectors, and what a user
    choosing it should know (licence, published quality). Each value says where it comes from, next to it.
    """

    name: str
    architectures: tuple[str, ...]  # GGUF ``general.architecture`` values of its language model
    projectors: tuple[str, ...]  # ``clip.projector_type`` values of its vision encoder
    #: the whole prompt of a query, a passage and a page: ``{text}`` stands where the text goes (tokenized
    #: as plain text: markup in a query is never read as a control token), ``{marker}`` where the image goes
    query_template: str
    passage_template: str
    image_template: str
    pooling: Pooling
    #: tokens that open and close the pooled image span, both included (``mean`` pooling); ``None``: none
    image_span: tuple[str, str] | None
    image_unit: int  # pixels per side covered by one image token (patch x spatial merge)
    #: the sizes a vector may be truncated to (Matryoshka), as fractions of the model's width: the full
    #: size is always one. A model of the same architecture and another width (the tiny test model, 64
    #: wide) offers the same fractions of its own width.
    matryoshka: tuple[float, ...]
    #: sizes offered as they are, by any model of the profile wider than them (a model card's range that
    #: starts at the same size for every width)
    matryoshka_sizes: tuple[int, ...]
    min_pixels: int  # the model's image area bounds after resizing (its processor's defaults)
    max_pixels: int
    max_aspect: float  # its image processor refuses longer-to-shorter side ratios above this
    #: the image area pages are rendered near and resized within by default (``DOCVEC_EMBED__MAX_PIXELS``
    #: sets another, up to :attr:`max_pixels`): a measured trade of cost per page against detail
    page_pixels: int
    licence: str  # SPDX identifier
    #: language-model attention with flash attention (llama.cpp's), and the KV cache type, by default:
    #: the cheapest setting that keeps this model's vectors within docvec's parity bar (the embedder's
    #: settings may override both; a BF16 language model on the CPU takes flash attention over a BF16
    #: cache whatever these say, where :attr:`bf16_cpu_attention`: :func:`docvec._model._session.attention`)
    flash_attention: bool
    kv_cache: Literal["f16", "f32"]
    #: whether checkpoints of this model carry a multi-vector head docvec can use
    multivector: bool
    published: tuple[Published, ...] = ()
    #: the kind of multi-vector head (:attr:`docvec._model._head.MultiVectorHead.kind`) that makes a model
    #: of these architectures this profile's and not another's: ColQwen3 is Qwen3-VL with colpali-engine's
    #: head, Qwen3-VL-Embedding the same files without one. ``None``: the profile of the files alone
    head_kind: str | None = None
    #: how ``DOCVEC_TOKEN_POOL`` groups a page's token vectors (:mod:`docvec._model._pooling`)
    token_pooling: TokenPooling = "runs"
    #: a BF16 language model on the CPU attends with flash attention over a BF16 KV cache (measured for
    #: every embedding family in docs/models.md)
    bf16_cpu_attention: bool = True

    @property
    def late_interaction(self) -> bool:
        """Whether the model's own output is token vectors only (``tokens`` pooling): its collections
        always keep them, and its single vector is docvec's pooled prefetch."""
        return self.pooling == "tokens"

    def dims(self, width: int) -> tuple[int, ...]:
        """The vector sizes a model of this profile with ``width``-wide hidden states gives, smallest first
        (the last is ``width``, the full size)."""
        sizes = {width} | {
            int(width * f) for f in self.matryoshka if (width * f).is_integer() and width * f >= 1
        }
        return tuple(sorted(sizes | {s for s in self.matryoshka_sizes if s < width}))

    def check_dim(self, dim: int, width: int) -> int:
        """``dim`` if a model of this profile, ``width`` wide, gives vectors of that size, else
        :class:`ConfigError` naming the sizes it gives."""
        sizes = self.dims(width)
        if dim not in sizes:
            shown = ", ".join(map(str, sizes))
            model = f"this model ({self.name}, {width} wide)"
            raise ConfigError(f"dim must be one of {shown} for {model}, not {dim}")
        return dim

    def resolve(self, settings: EmbedSettings, width: int) -> tuple[int, ImageBounds]:
        """The vector size and image bounds ``settings`` ask for, checked against this model (``width``
        wide): unset values are the model's (the full width); a size it was not trained for, an image area
        under one token or over the model's largest image is a :class:`ConfigError`."""
        dim = self.check_dim(settings.dim if settings.dim is not None else width, width)
        low = settings.min_pixels if settings.min_pixels is not None else self.min_pixels
        high = settings.max_pixels if settings.max_pixels is not None else self.page_pixels
        token = self.image_unit**2
        side = self.image_unit
        if low < token or high < token:
            raise ConfigError(
                f"min_pixels and max_pixels must be at least {token} (one {side}x{side} image token of "
                f"{self.name}), not {low} and {high}"
            )
        # the model was trained up to its processor's largest image: a larger budget asks it for what it
        # never saw, and costs memory by the square of the page's side (a page rendered that large)
        for name, value in (("min_pixels", low), ("max_pixels", high)):
            if value > self.max_pixels:
                raise ConfigError(
                    f"{name} must lie between {token} and {self.max_pixels} pixels ({self.name}: 1 to "
                    f"{self.max_pixels // token} image tokens of {side}x{side} px), not {value}"
                )
        if low > high:
            raise ConfigError(f"min_pixels ({low}) is larger than max_pixels ({high})")
        return dim, ImageBounds(low, high, self.image_unit, self.max_aspect)


JINA_V4 = ModelProfile(
    name="jina-embeddings-v4",
    architectures=("qwen2vl",),
    projectors=("qwen2.5vl_merger",),
    # the model card's prompts (jina-embeddings-v4's encode_text: "Query: " / "Passage: " prefixes)
    query_template="Query: {text}",
    passage_template="Passage: {text}",
    # its encode_image prompt; mtmd inserts <|vision_start|> and <|vision_end|> around the marker itself
    image_template="<|im_start|>user\n{marker}Describe the image.<|im_end|>\n",
    # its pooling: texts average every token, images the vision span with both markers
    pooling="mean",
    image_span=("<|vision_start|>", "<|vision_end|>"),
    image_unit=28,
    # 2048 numbers, truncatable to 1024, 512, 256 or 128 (the model card's Matryoshka sizes)
    matryoshka=(1 / 16, 1 / 8, 1 / 4, 1 / 2),
    matryoshka_sizes=(),
    # Qwen2.5-VL's processor as jina-embeddings-v4 configures it: 4 to 768 image tokens of 28x28 pixels
    # ("Input Image Size: 768x28x28" on jina's model page); pages are rendered at the model's own maximum
    min_pixels=4 * 28 * 28,
    max_pixels=768 * 28 * 28,
    max_aspect=200.0,
    page_pixels=768 * 28 * 28,
    licence="CC-BY-NC-4.0",
    # mean pooling averages the F16 KV cache's rounding away: pooled cosine >= 0.9999993 on the 3B
    # geometry with llama.cpp's defaults (shared notes, llama-cpp-embedding.md)
    flash_attention=True,
    kv_cache="f16",
    multivector=True,
    published=(
        Published(
            "ViDoRe v1 (nDCG@5, single vector)", 84.1, "https://huggingface.co/jinaai/jina-embeddings-v4"
        ),
        Published(
            "ViDoRe v2 (nDCG@5, single vector)", 57.6, "https://huggingface.co/jinaai/jina-embeddings-v4"
        ),
    ),
)

# Qwen3-VL-Embedding (Qwen, 2026-01; 2B and 8B). Every rule below is from its official code, github
# QwenLM/Qwen3-VL-Embedding src/models/qwen3_vl_embedding.py (Apache-2.0): Qwen3VLEmbedder.format_model_input
# builds a conversation of a system message (the instruction) and a user turn (the image, then the text),
# _preprocess_inputs renders it with the chat template and add_generation_prompt=True, and _pooling_last
# takes the last token's last hidden state, then F.normalize.
_QWEN3_VL_CHAT = (
    "<|im_start|>system\n{instruction}<|im_end|>\n<|im_start|>user\n{content}<|im_end|>\n"
    "<|im_start|>assistant\n"
)
#: the embedder's default_instruction, used for everything that is not a query
QWEN3_VL_DEFAULT_INSTRUCTION = "Represent the user's input."
#: the instruction its authors give queries for retrieval of images or text (the model card's and the
#: repository's examples, and the reranker's evaluation scripts)
QWEN3_VL_QUERY_INSTRUCTION = "Retrieve images or text relevant to the user's query."

QWEN3_VL_EMBEDDING = ModelProfile(
    name="qwen3-vl-embedding",
    architectures=("qwen3vl",),
    projectors=("qwen3vl_merger",),
    query_template=_QWEN3_VL_CHAT.format(instruction=QWEN3_VL_QUERY_INSTRUCTION, content="{text}"),
    passage_template=_QWEN3_VL_CHAT.format(instruction=QWEN3_VL_DEFAULT_INSTRUCTION, content="{text}"),
    # mtmd inserts <|vision_start|> and <|vision_end|> around the marker, as the chat template does
    image_template=_QWEN3_VL_CHAT.format(instruction=QWEN3_VL_DEFAULT_INSTRUCTION, content="{marker}"),
    pooling="last",
    image_span=None,
    # patch 16 x spatial merge 2 (IMAGE_FACTOR = 32 in the official code)
    image_unit=32,
    # 2B: 2048 wide, 8B: 4096; the model cards: "supports user-defined output dimensions ranging from 64 to
    # 2048" (4096 for the 8B). docvec offers the powers of two in that range (a collection has one size):
    # 64 and up for both widths, and the same fractions of a test model's width
    matryoshka=(1 / 32, 1 / 16, 1 / 8, 1 / 4, 1 / 2),
    matryoshka_sizes=(64, 128, 256, 512, 1024, 2048),
    # MIN_PIXELS = 4 * 32 * 32 and MAX_PIXELS = 1800 * 32 * 32 in the official code, resized by
    # qwen_vl_utils' fetch_image (smart_resize with factor 32; aspect ratio at most 200)
    min_pixels=4 * 32 * 32,
    max_pixels=1800 * 32 * 32,
    max_aspect=200.0,
    # docvec's page budget: 1,024 tokens (an A4 page at about 105 dpi) where the model takes up to 1,800;
    # the measured cost of each is in docs/models.md
    page_pixels=1024 * 32 * 32,
    licence="Apache-2.0",
    # last-token pooling reads one state, so the F16 rounding of flash attention is not averaged away:
    # pooled cosine 0.99998 after 961 image tokens with it, >= 0.9999999 without (shared notes,
    # qwen3-vl.md; measured again in tests/test_parity_qwen3vl.py)
    flash_attention=False,
    kv_cache="f16",
    multivector=False,
    published=(
        Published("ViDoRe v1 (nDCG@5)", 84.4, "https://huggingface.co/Qwen/Qwen3-VL-Embedding-2B", "2B"),
        Published("ViDoRe v2 (nDCG@5)", 65.3, "https://huggingface.co/Qwen/Qwen3-VL-Embedding-2B", "2B"),
        Published("ViDoRe v1 (nDCG@5)", 87.2, "https://huggingface.co/Qwen/Qwen3-VL-Embedding-8B", "8B"),
        Published("ViDoRe v2 (nDCG@5)", 69.9, "https://huggingface.co/Qwen/Qwen3-VL-Embedding-8B", "8B"),
    ),
)

# ColQwen3 and ColQwen3.5 (late interaction): every rule below is colpali-engine's (github
# illuin-tech/colpali, MIT; read in 0.3.18): colpali_engine/models/qwen3/colqwen3/ and qwen3_5/colqwen3_5/.
# The model classes
# (ColQwen3: Qwen3VLModel, ColQwen3_5: Qwen3_5Model) run every token's last hidden state through
# custom_text_proj, L2-normalise it and keep every position the attention mask covers; their processors
# give the prompts. The registry's models follow these prompts on their cards (docvec._model._registry).
#: ``visual_prompt_prefix``; mtmd inserts <|vision_start|> and <|vision_end|> around the marker, as the
#: processor's prompt has them around <|image_pad|>
COLPALI_PAGE_TEMPLATE = "<|im_start|>user\n{marker}Describe the image.<|im_end|><|endoftext|>"
#: ``process_queries``: ``query_prefix`` (empty for these classes), the text, then
#: ``query_augmentation_token`` (<|endoftext|>) ten times, each a vector of the query
COLPALI_QUERY_TEMPLATE = "{text}" + "<|endoftext|>" * 10


# The scores: MTEB's published results (github embeddings-benchmark/results, results/<org>__<model>/), ViDoRe
# v3 over its eight public tasks (nDCG@10; the two private ones are not in them), as the Vultr cards quote
# them ("Official MTEB: V1 88.15, V2 60.36, V3 56.49" for Flash)
_RESULTS = "https://github.com/embeddings-benchmark/results/tree/main/results/"
_COLQWEN3_PUBLISHED = (
    Published(
        "ViDoRe v3 (nDCG@10, 8 public tasks)", 60.16, _RESULTS + "TomoroAI__tomoro-colqwen3-embed-4b", "4B"
    ),
    Published(
        "ViDoRe v3 (nDCG@10, 8 public tasks)", 61.60, _RESULTS + "TomoroAI__tomoro-colqwen3-embed-8b", "8B"
    ),
)
_COLQWEN3_5_PUBLISHED = (
    Published(
        "ViDoRe v3 (nDCG@10, 8 public tasks)",
        56.49,
        "https://huggingface.co/vultr/VultronRetrieverFlash-Qwen3.5-0.8B",
        "0.8B",
    ),
    Published(
        "ViDoRe v3 (nDCG@10, 8 public tasks)",
        63.72,
        "https://huggingface.co/vultr/VultronRetrieverCore-Qwen3.5-4.5B",
        "4.5B",
    ),
    Published(
        "ViDoRe v3 (nDCG@10, 8 public tasks)",
        64.72,
        _RESULTS + "vultr__VultronRetrieverPrime-Qwen3.5-8B",
        "8B",
    ),
)

COLQWEN3 = ModelProfile(
    name="colqwen3",
    architectures=("qwen3vl",),
    projectors=("qwen3vl_merger",),
    query_template=COLPALI_QUERY_TEMPLATE,
    # ``process_texts``: the text alone
    passage_template="{text}",
    image_template=COLPALI_PAGE_TEMPLATE,
    pooling="tokens",
    image_span=None,
    # patch 16 x spatial merge 2, as Qwen3-VL's
    image_unit=32,
    # one size: the head's (docvec's single vector is its tokens' mean)
    matryoshka=(),
    matryoshka_sizes=(),
    # the checkpoints' image processor (Qwen3-VL's preprocessor_config.json: shortest_edge 65,536 px, 64
    # tokens); the most its models were evaluated with: max_num_visual_tokens 1280 (tomoro-colqwen3-embed's
    # processor default, and what MTEB's wrapper passes)
    min_pixels=64 * 32 * 32,
    max_pixels=1280 * 32 * 32,
    max_aspect=200.0,
    # the same page budget as Qwen3-VL-Embedding's, 1,024 tokens (docs/models.md has the cost per page)
    page_pixels=1024 * 32 * 32,
    licence="Apache-2.0",
    # every token's state is a vector: nothing averages the F16 rounding of flash attention away. MaxSim is
    # within the bar without it, not with it (tests/test_parity_colqwen.py; docs/late-interaction.md)
    flash_attention=False,
    kv_cache="f16",
    multivector=True,
    published=_COLQWEN3_PUBLISHED,
    head_kind="colpali",
    # colpali-engine's pooler for its models
    token_pooling="hierarchical",
)
#: Qwen3.5's language model (hybrid linear and full attention); its vision tower is Qwen3-VL's, which the
#: pinned converter writes as one
COLQWEN3_5 = dataclasses.replace(
    COLQWEN3,
    name="colqwen3.5",
    architectures=("qwen35",),
    # VultronRetriever's evaluation budget: 1,792 visual tokens (its MTEB runs, "vt1792"; vLLM's ColQwen3.5
    # example sets max_pixels 1792 x 32 x 32)
    max_pixels=1792 * 32 * 32,
    published=_COLQWEN3_5_PUBLISHED,
)

#: every model docvec knows
PROFILES = (JINA_V4, QWEN3_VL_EMBEDDING, COLQWEN3, COLQWEN3_5)


def profile_for(architecture: str, projector: str, head_kind: str | None = None) -> ModelProfile:
    """The profile serving a language model of ``architecture`` with a vision encoder of ``projector``,
    and a multi-vector head of ``head_kind`` (``None``: no head, or one that does not choose a profile)."""
    matching = [p for p in PROFILES if architecture in p.architectures and projector in p.projectors]
    for p in matching:
        if p.head_kind == head_kind:
            return p
    if matching and head_kind is not None:
        raise ModelMismatchError(
            f"no embedding profile for a '{architecture}' language model with a '{projector}' vision encoder "
            f"and a {head_kind!r} multi-vector head; with that head docvec knows "
            + ", ".join(
                f"{p.name} ({'/'.join(p.architectures)})" for p in PROFILES if p.head_kind == head_kind
            )
        )
    if matching:  # a late-interaction model without its head: nothing it gives means anything
        names = " or ".join(p.name for p in matching)
        raise ModelMismatchError(
            f"a '{architecture}' language model with a '{projector}' vision encoder is {names}, a "
            "late-interaction model: it needs its multi-vector head (multivector-head.gguf beside its GGUFs, "
            "which `docvec models convert` and `docvec models pull` write from its checkpoint)"
        )
    raise ModelMismatchError(
        f"no embedding profile for a '{architecture}' language model with a '{projector}' vision encoder; "
        f"supported: "
        + "; ".join(f"{p.name} ({'/'.join(p.architectures)} + {'/'.join(p.projectors)})" for p in PROFILES)
    )


@dataclass(frozen=True)
class RerankerProfile:
    """How one reranker reads a (query, page image) pair and scores it: the conversation it is trained on,
    the two answer tokens whose head rows give the score, image bounds and attention defaults. Each value
    says where it comes from, next to it."""

    name: str
    architectures: tuple[str, ...]  # GGUF ``general.architecture`` values of its language model
    projectors: tuple[str, ...]  # ``clip.projector_type`` values of its vision encoder
    #: the conversation up to the page, and after it: ``{instruction}`` and ``{query}`` stand where they go
    #: (the query is tokenized as plain text); the page image follows ``prefix``, ``suffix`` follows it
    prefix: str
    suffix: str
    instruction: str  # the default instruction
    #: the answer tokens: score = sigmoid((head[yes] - head[no]) . h), h the last position's last state
    yes: str
    no: str
    image_unit: int
    min_pixels: int
    max_pixels: int
    max_aspect: float
    page_pixels: int  # the default page budget (``DOCVEC_RERANK_MAX_PIXELS`` sets another)
    licence: str
    flash_attention: bool
    kv_cache: Literal["f16", "f32"]
    published: tuple[Published, ...] = ()
    #: the embedders' BF16 attention on the CPU (:attr:`ModelProfile.bf16_cpu_attention`) is not measured
    #: for a reranker's scores (docs/rerank.md): the profile's attention stays
    bf16_cpu_attention: bool = False

    def bounds(self, max_pixels: int | None) -> ImageBounds:
        """The image bounds of a page budget of ``max_pixels`` (None: the profile's); a budget under the
        model's smallest image or over its largest is a :class:`ConfigError`."""
        high = max_pixels if max_pixels is not None else self.page_pixels
        unit2 = self.image_unit**2
        if not self.min_pixels <= high <= self.max_pixels:
            raise ConfigError(
                f"the reranker's page budget must lie between {self.min_pixels} and {self.max_pixels} pixels "
                f"({self.name}: {self.min_pixels // unit2} to {self.max_pixels // unit2} image tokens of "
                f"{self.image_unit}x{self.image_unit} px), not {high}"
            )
        return ImageBounds(self.min_pixels, high, self.image_unit, self.max_aspect)


# Qwen3-VL-Reranker (Qwen, 2026-01; 2B and 8B). Every rule below is from its official code, github
# QwenLM/Qwen3-VL-Embedding src/models/qwen3_vl_reranker.py (Apache-2.0), read at commit 7f13038:
# format_mm_instruction builds a system message (the judging text below) and one user turn of the text
# items '<Instruct>: ' + instruction, '<Query>:', the query, '\n<Document>:', then the document (its
# images come before its texts: format_mm_content); tokenize renders it with the chat template and
# add_generation_prompt=True (examples/reranker_template.jinja writes the same text out); compute_scores
# takes model(...).last_hidden_state[:, -1] (Qwen3VLModel: after the final norm) through a bias-free
# linear whose weight is lm_head[yes] - lm_head[no], then a sigmoid.
_QWEN3_VL_JUDGE = (
    "Judge whether the Document meets the requirements based on the Query and the Instruct provided. Note "
    'that the answer can only be "yes" or "no".'
)

QWEN3_VL_RERANKER = RerankerProfile(
    name="qwen3-vl-reranker",
    architectures=("qwen3vl",),
    projectors=("qwen3vl_merger",),
    prefix=(
        f"<|im_start|>system\n{_QWEN3_VL_JUDGE}<|im_end|>\n<|im_start|>user\n"
        "<Instruct>: {instruction}<Query>:{query}\n<Document>:"
    ),
    # mtmd inserts <|vision_start|> and <|vision_end|> around the image, as the chat template does
    suffix="<|im_end|>\n<|im_start|>assistant\n",
    # Qwen3VLReranker's default_instruction
    instruction="Given a search query, retrieve relevant candidates that answer the query.",
    # get_binary_linear: tokenizer.get_vocab()["yes"] and ["no"], single tokens of the Qwen2 vocabulary
    yes="yes",
    no="no",
    # the same image rule as the embedding model: IMAGE_FACTOR 32, MIN_PIXELS 4 and MAX_PIXELS 1800 tokens
    image_unit=32,
    min_pixels=4 * 32 * 32,
    max_pixels=1800 * 32 * 32,
    max_aspect=200.0,
    # the embedding profile's page budget (1,024 tokens): a stored page is never larger than the budget it
    # was rendered for, and the cost per page grows with its tokens (docs/rerank.md has the measurements)
    page_pixels=1024 * 32 * 32,
    licence="Apache-2.0",
    # a score is one last-token state, as the embedding model's vector is: on the tiny model within 5e-4 of
    # the reference with flash attention and 5e-5 without; on the 2B geometry (BF16 GGUF, 1,024 tokens)
    # 1.3e-3-6e-3 with it and 1e-4-2e-3 without (make bench-rerank). Off, as for the embedding model; its
    # speed against on was not told apart by a measurement disturbed by other work (docs/rerank.md)
    flash_attention=False,
    kv_cache="f16",
    published=(
        # the model cards' table: ViDoRe v3 52.9 for Qwen3-VL-Embedding-2B alone, 60.8 and 66.7 reranked
        Published("ViDoRe v3 (reranked)", 60.8, "https://huggingface.co/Qwen/Qwen3-VL-Reranker-2B", "2B"),
        Published("ViDoRe v3 (reranked)", 66.7, "https://huggingface.co/Qwen/Qwen3-VL-Reranker-8B", "8B"),
    ),
)

#: every reranker docvec knows
RERANKER_PROFILES = (QWEN3_VL_RERANKER,)


def reranker_profile_for(architecture: str, projector: str) -> RerankerProfile:
    """The reranker profile serving a language model of ``architecture`` with a ``projector`` vision
    encoder."""
    for p in RERANKER_PROFILES:
        if architecture in p.architectures and projector in p.projectors:
            return p
    raise ModelMismatchError(
        f"no reranker profile for a '{architecture}' language model with a '{projector}' vision encoder; "
        "supported: "
        + "; ".join(
            f"{p.name} ({'/'.join(p.architectures)} + {'/'.join(p.projectors)})" for p in RERANKER_PROFILES
        )
    )
