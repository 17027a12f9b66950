"""The reranker (Qwen3-VL-Reranker through llama.cpp) against its PyTorch reference on the tiny random model,
and the rules a wrong transcription would break: the conversation, the position read, the sign."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageDraw

from docvec import (
    ConflictError,
    Embedder,
    EmbedSettings,
    Index,
    InputError,
    ModelError,
    Reranker,
    SearchFilter,
    Settings,
)
from docvec._errors import ModelMismatchError
from docvec._model._gguf import read_gguf_info
from docvec._model._profiles import QWEN3_VL_RERANKER
from docvec_reference.qwen3vl import Qwen3VLRerankerReference

from .documents import make_pages_pdf
from .helpers import SMALL

pytestmark = pytest.mark.slow

QUERIES = ("what is the invoice total?", "quarterly revenue by region")
# the bar: scores within 1e-3 of the reference, in the same order
BAR = 1e-3


def _page(width: int, height: int, seed: int, mode: str = "RGB") -> Image.Image:
    """A page-like image: coloured blocks on white, different for every seed."""
    rng = np.random.default_rng(seed)
    img = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(img)
    for _ in range(24):
        x, y = int(rng.integers(0, width)), int(rng.integers(0, height))
        w, h = int(rng.integers(4, max(5, width // 2))), int(rng.integers(4, max(5, height // 3)))
        draw.rectangle([x, y, x + w, y + h], fill=tuple(int(c) for c in rng.integers(0, 255, 3)))
    return img.convert(mode)


# six shapes: a tiny image (4 tokens), tall and wide pages, a portrait page, a square one near the 1,024
# token budget, and an RGBA image (alpha over white, as the reference's fetch_image does)
PAGES = {
    "tiny": _page(64, 64, 1),
    "tall": _page(300, 900, 2),
    "wide": _page(900, 300, 3),
    "portrait": _page(500, 700, 4),
    "square": _page(1000, 1000, 5),
    "rgba": _page(260, 200, 6, "RGBA"),
}


@pytest.fixture(scope="module")
def reference(reranker_dir: Path) -> Qwen3VLRerankerReference:
    return Qwen3VLRerankerReference(reranker_dir / "hf", threads=2)


@pytest.fixture(scope="module")
def expected(reference: Qwen3VLRerankerReference) -> dict[str, np.ndarray]:
    return {q: reference.score(q, list(PAGES.values())) for q in QUERIES}


def test_scores_match_the_reference_in_value_and_order(
    reranker: Reranker, expected: dict[str, np.ndarray]
) -> None:
    for q in QUERIES:
        got = reranker.score(q, list(PAGES.values()))
        want = expected[q]
        assert np.abs(got - want).max() < BAR, (q, got, want)
        assert list(np.argsort(-got)) == list(np.argsort(-want)), (q, got, want)
        # the tiny reranker's scores are spread out (see temper_answers): the bar is not met by saturation
        assert want.min() > 0.05 and want.max() < 0.95 and np.diff(np.sort(want)).min() > 2 * BAR


def test_the_three_rules_each_move_the_scores_past_the_bar(
    reranker: Reranker, expected: dict[str, np.ndarray], monkeypatch: pytest.MonkeyPatch
) -> None:
    q = QUERIES[0]
    pages = list(PAGES.values())
    wrong_rules = {
        # the conversation: no newline between the query and the document (the official '\n<Document>:')
        "template": {
            "profile": dataclasses.replace(
                QWEN3_VL_RERANKER, prefix=QWEN3_VL_RERANKER.prefix.replace("\n<Doc", "<Doc")
            )
        },
        # the position read: the state of "assistant", one before the generation prompt's last token
        "position": {"profile": dataclasses.replace(QWEN3_VL_RERANKER, suffix=QWEN3_VL_RERANKER.suffix[:-1])},
        # the sign: head[no] - head[yes]
        "sign": {"direction": -reranker.direction},
    }
    for rule, changes in wrong_rules.items():
        with monkeypatch.context() as m:
            for attr, value in changes.items():
                m.setattr(reranker, attr, value)
            got = reranker.score(q, pages)
        # past the parity bar with room to spare: the parity test fails with the rule wrong
        assert np.abs(got - expected[q]).max() > 3 * BAR, rule
    assert np.abs(reranker.score(q, pages) - expected[q]).max() < BAR  # and restored


def test_the_query_prefix_is_decoded_once_with_the_same_scores(
    reranker: Reranker, monkeypatch: pytest.MonkeyPatch
) -> None:
    pages = list(PAGES.values())
    reused = reranker.score(QUERIES[1], pages)
    timing = reranker.last_timing
    assert timing is not None and timing.pages == len(pages)
    monkeypatch.setattr(reranker, "reuse_prefix", False)
    again = reranker.score(QUERIES[1], pages)
    assert np.array_equal(reused, again)  # the same KV cache either way, bit for bit
    # one page's score does not depend on the pages scored before it
    assert reranker.score(QUERIES[1], pages[3:4])[0] == reused[3]


def test_a_custom_instruction_is_the_references(
    reranker: Reranker, reference: Qwen3VLRerankerReference
) -> None:
    pages = [PAGES["portrait"], PAGES["wide"]]
    instruction = "Find the page that shows the total of an invoice."
    got = reranker.score(QUERIES[0], pages, instruction=instruction)
    want = reference.score(QUERIES[0], pages, instruction=instruction)
    assert np.abs(got - want).max() < BAR
    assert np.abs(got - reranker.score(QUERIES[0], pages)).max() > BAR  # it is read


def test_markup_in_a_query_stays_text(reranker: Reranker, reference: Qwen3VLRerankerReference) -> None:
    prefix = QWEN3_VL_RERANKER.prefix.format(instruction=QWEN3_VL_RERANKER.instruction, query="{text}")
    ids = reranker._query_tokens(prefix, "total <|im_end|> due")
    im_end = reference.token_ids("<|im_end|>")[0]
    assert list(ids).count(im_end) == 1  # the system turn's only: the query's is plain text


def test_bad_inputs_are_refused_before_any_model_work(reranker: Reranker, tmp_path: Path) -> None:
    with pytest.raises(InputError, match="query is empty"):
        reranker.score("  ", [PAGES["tiny"]])
    with pytest.raises(InputError, match="must be a list"):
        reranker.score("q", "page.png")  # type: ignore[arg-type]
    bad = tmp_path / "not-an-image.png"
    bad.write_bytes(b"no image here")
    with pytest.raises(InputError) as info:
        reranker.score("q", [PAGES["tiny"], bad])
    assert "not-an-image.png" in str(info.value) and "1" in str(info.value)
    assert len(reranker.score("q", [])) == 0


def test_embedders_and_rerankers_refuse_each_others_files(
    reranker_dir: Path, qwen3vl_dir: Path, reranker: Reranker
) -> None:
    with pytest.raises(ModelMismatchError, match="is a reranker, not an embedding model"):
        Embedder.open(reranker_dir)
    with pytest.raises(ModelMismatchError, match="is not a reranker"):
        Reranker.open(qwen3vl_dir)
    # what the converter wrote: rank pooling and the two answer rows, labelled
    info = read_gguf_info(reranker.files.language_model)
    assert info.is_reranker
    assert info.metadata["qwen3vl.classifier.output_labels"] == ["yes", "no"]


def test_the_direction_is_the_checkpoints_head_rows(reranker: Reranker, reranker_dir: Path) -> None:
    import torch
    from safetensors.torch import load_file

    vocab = json.loads((reranker_dir / "hf" / "tokenizer.json").read_text())["model"]["vocab"]
    weights = load_file(reranker_dir / "hf" / "model.safetensors")
    head = next(w for k, w in weights.items() if k.endswith("embed_tokens.weight")).to(torch.float32)
    want = (head[vocab["yes"]] - head[vocab["no"]]).numpy()
    assert np.array_equal(reranker.direction, want)  # bf16 rows, exact in F16 and in float32


def test_a_closed_reranker_says_so(reranker_dir: Path) -> None:
    rr = Reranker.open(reranker_dir, EmbedSettings(threads=1))
    rr.close()
    with pytest.raises(ModelError, match="closed"):
        rr.score("q", [PAGES["tiny"]])


def test_a_page_budget_outside_the_models_bounds_is_refused(reranker_dir: Path) -> None:
    from docvec import ConfigError

    with pytest.raises(ConfigError, match="page budget"):
        Reranker.open(reranker_dir, max_pixels=100)


# -- the second stage of a search -----------------------------------------------------------------------

BACKENDS = [pytest.param(None, id="embedded"), pytest.param(":memory:", id="server-backend")]


@pytest.fixture(scope="module")
def small(tiny_dir: Path) -> Iterator[Embedder]:
    emb = Embedder.open(tiny_dir, EmbedSettings(threads=2, max_pixels=SMALL))
    yield emb
    emb.close()


def _settings(data: Path, url: str | None, reranker_dir: Path | None) -> Settings:
    return Settings(
        data_dir=data,
        qdrant_url=url,
        ocr="off",
        rerank_model=str(reranker_dir) if reranker_dir else None,
        embed=EmbedSettings(threads=2, max_pixels=SMALL),
    )


@pytest.mark.parametrize("url", BACKENDS)
def test_a_search_reranks_its_best_pages_with_filters(
    tmp_path: Path, small: Embedder, reranker_dir: Path, reranker: Reranker, url: str | None
) -> None:
    docs = [
        make_pages_pdf(
            tmp_path / f"doc-{i}.pdf", [[f"Report {i}", f"Section {j} of the archive."] for j in range(2)]
        )
        for i in range(4)
    ]
    with Index.open(_settings(tmp_path / "data", url, reranker_dir), embedder=small) as index:
        assert index.add(docs[:2], tags=["team=a"]).ok and index.add(docs[2:], tags=["team=b"]).ok
        query = "section of the archive"
        first = index.search(query, k=6, mode="dense")
        hits = index.search(query, k=3, mode="dense", rerank=6)
        assert len(hits) == 3 and all(h.rerank_score is not None for h in hits)
        scores = [h.rerank_score for h in hits]
        assert scores == sorted(scores, reverse=True)  # type: ignore[type-var]
        # the reranker read the six pages the first stage found, and kept its three best
        images = [index.page_file(h.doc_id, h.page) for h in first]
        by_reranker = reranker.score(query, images)
        best = [(first[i].doc_id, first[i].page) for i in np.argsort(-by_reranker)[:3]]
        assert [(h.doc_id, h.page) for h in hits] == best
        for h in hits:  # each keeps its first-stage score
            assert h.score == next(f.score for f in first if (f.doc_id, f.page) == (h.doc_id, h.page))
        # filters hold in the first stage; the reranker sees only what they admit
        team_b = index.search(query, k=2, filter=SearchFilter(tags={"team": "b"}), rerank=4)
        assert team_b and {h.tags["team"] for h in team_b} == {"b"}
        assert all(h.rerank_score is not None for h in team_b)
        # off: the first stage as it was
        plain = index.search(query, k=3, mode="dense", rerank=0)
        assert [h.rerank_score for h in plain] == [None] * 3
        with pytest.raises(InputError, match="below k"):
            index.search(query, k=5, rerank=3)
        with pytest.raises(InputError, match="from 0"):
            index.search(query, k=5, rerank=101)


def test_without_a_reranker_a_rerank_is_a_conflict_before_any_work(tmp_path: Path, small: Embedder) -> None:
    with (
        Index.open(_settings(tmp_path / "data", None, None), embedder=small) as index,
        pytest.raises(ConflictError, match="DOCVEC_RERANK_MODEL"),
    ):
        index.search("anything", k=3, rerank=5)  # nothing indexed yet: refused before the lookup


def test_the_setting_reranks_every_search_and_needs_a_model(tmp_path: Path, reranker_dir: Path) -> None:
    with pytest.raises(ValueError, match="rerank_model"):
        Settings(data_dir=tmp_path, rerank=10)
    s = Settings(data_dir=tmp_path, rerank=10, rerank_model=str(reranker_dir))
    assert s.rerank == 10
