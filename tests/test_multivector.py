"""Multi-vector collections end to end on the tiny model: token vectors stored with every page, searched
in three modes (dense, multi, hybrid) from the library, the API and the command line, pooled when asked,
made by a reindex from a single-vector collection, and scored per mode by `docvec eval`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient

from docvec import EmbedSettings, Index, InputError, ModelError, ReindexSpec, SearchFilter, Settings
from docvec._store import Filter

from .helpers import TINY, copy_documents, eval_dataset, report
from .processes import docvec

DOCS = (
    "pysamples__smile.png",
    "pysamples__minimal-document.pdf",
    "pysamples__pdflatex-4-pages.pdf",
    "pysamples__multicolumn.pdf",
)


def _settings(data: Path, tiny_dir: Path, **extra: object) -> Settings:
    return Settings(
        data_dir=data, model=str(tiny_dir), embed=EmbedSettings(max_pixels=TINY, threads=2), **extra
    )


@pytest.fixture()
def folder(tmp_path: Path, documents: Path) -> Path:
    return copy_documents(documents, tmp_path / "docs", DOCS)


def _maxsim(query: np.ndarray, page: np.ndarray) -> float:
    return float((query @ page.T).max(axis=1).sum())


def test_pages_keep_their_tokens_and_three_modes_search_them(
    tmp_path: Path, folder: Path, tiny_dir: Path
) -> None:
    settings = _settings(tmp_path / "data", tiny_dir, multivector=True)
    with Index.open(settings) as index:
        report = index.add([folder], tags=["set=a"])
        assert report.ok
        version = index._store.live("docvec")
        assert version is not None and index._store.token_dim(version) == 128
        points = list(index._store.scroll(version, with_vectors=True))
        assert len(points) == report.pages_indexed
        embedder = index.embedder
        for p in points[:2]:  # each page's tokens are the head's, for every token of its prompt
            _, want = embedder.embed_images_multi([index.pages.path(p.payload["image"])])
            assert p.tokens is not None and p.tokens.shape == want[0].shape
            np.testing.assert_allclose(p.tokens, want[0], atol=2**-10)
        _, query_tokens = embedder.embed_queries_multi(["the quick brown fox"])
        exact = sorted(points, key=lambda p: -_maxsim(query_tokens[0], p.tokens))  # type: ignore[arg-type]
        # auto, on a multi-vector collection (with text, as new collections are: fused with it)
        assert index.search_mode() == "hybrid+text"
        multi = index.search("the quick brown fox", 5, mode="multi")
        assert [h.doc_id for h in multi] == [p.payload["doc_id"] for p in exact[:5]]
        assert [h.page for h in multi] == [p.payload["page"] for p in exact[:5]]
        want_scores = [_maxsim(query_tokens[0], p.tokens) for p in exact[:5]]  # type: ignore[arg-type]
        np.testing.assert_allclose([h.score for h in multi], want_scores, atol=2e-2)  # float16 tokens
        # a prefetch covering every page is the exhaustive MaxSim; a narrow one stays within dense's best
        hybrid = index.search("the quick brown fox", 5, mode="hybrid", prefetch=len(points))
        assert hybrid.hits == multi.hits and (hybrid.mode, multi.mode) == ("hybrid", "multi")
        dense = index.search("the quick brown fox", 3, mode="dense")
        narrow = index.search("the quick brown fox", 3, mode="hybrid", prefetch=3)
        assert {(h.doc_id, h.page) for h in narrow} == {(h.doc_id, h.page) for h in dense}
        # filters hold in every mode
        pdf = SearchFilter(source=str(folder / "pysamples__pdflatex-4-pages.pdf"))
        for mode in ("dense", "multi", "hybrid"):
            hits = index.search("the quick brown fox", 10, pdf, mode=mode)  # type: ignore[arg-type]
            assert {h.name for h in hits} == {"pysamples__pdflatex-4-pages.pdf"} and len(hits) == 4, mode


def test_tokens_are_pooled_when_asked(tmp_path: Path, folder: Path, tiny_dir: Path) -> None:
    plain = _settings(tmp_path / "plain", tiny_dir, multivector=True)
    pooled = _settings(tmp_path / "pooled", tiny_dir, multivector=True, token_pool=3)
    counts = []
    for settings in (plain, pooled):
        with Index.open(settings) as index:
            index.add([folder / "pysamples__smile.png"])
            version = index._store.live("docvec")
            assert version is not None
            (point,) = index._store.scroll(version, with_vectors=True)
            assert point.tokens is not None
            counts.append(point.tokens.shape[0])
            assert point.payload["embedding"]["token_pool"] == settings.token_pool
            assert index.search("a face", 1)  # and it searches
    assert counts[1] == -(-counts[0] // 3)


def test_a_single_vector_collection_refuses_token_searches_and_reindexes_into_one(
    tmp_path: Path, folder: Path, tiny_dir: Path
) -> None:
    data = tmp_path / "data"
    env = {
        "DOCVEC_DATA_DIR": str(data),
        "DOCVEC_MODEL": str(tiny_dir),
        "DOCVEC_EMBED__MAX_PIXELS": str(TINY),
    }
    assert docvec("ingest", str(folder), env=env).returncode == 0
    r = docvec("search", "a face", "--mode", "multi", env=env)
    assert r.returncode == 2 and "single-vector" in r.stderr and "docvec reindex --multivector" in r.stderr
    r = docvec("reindex", "--multivector", "--json", env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    report = json.loads(r.stdout)
    assert report["switched"] and report["pages_rendered"] == 0  # tokens from the stored images
    r = docvec("search", "a face", "--json", env=env)  # auto: hybrid now
    assert r.returncode == 0 and len(json.loads(r.stdout)) == 5
    r = docvec("search", "a face", "--mode", "dense", "--json", env=env)
    assert r.returncode == 0 and len(json.loads(r.stdout)) == 5
    settings = _settings(data, tiny_dir)
    with Index.open(settings) as index:
        assert [(v.version, v.live) for v in index.versions()] == [("docvec.v1", False), ("docvec.v2", True)]
        version = index._store.live("docvec")
        assert version is not None
        assert index._store.count(version, Filter(finished=True)) == index._store.count("docvec.v1")
        with pytest.raises(InputError, match="prefetch"):
            index.search("a face", 3, prefetch=0)


def test_a_model_without_a_head_cannot_fill_a_multi_vector_collection(
    tmp_path: Path, folder: Path, tiny_dir: Path
) -> None:
    headless = tmp_path / "headless"
    headless.mkdir()
    for f in tiny_dir.glob("*.gguf"):
        if f.name != "multivector-head.gguf":
            shutil.copy(f, headless / f.name)
    with (
        Index.open(_settings(tmp_path / "data", headless, multivector=True)) as index,
        pytest.raises(ModelError, match="no multi-vector head"),
    ):
        index.add([folder / "pysamples__smile.png"])


def test_reindexing_to_multi_vector_needs_a_head(tmp_path: Path, folder: Path, tiny_dir: Path) -> None:
    """Refused before the new version is made: no empty version is left, the live one is untouched."""
    headless = tmp_path / "headless"
    headless.mkdir()
    for f in tiny_dir.glob("*.gguf"):
        if f.name != "multivector-head.gguf":
            shutil.copy(f, headless / f.name)
    with Index.open(_settings(tmp_path / "data", headless)) as index:
        index.add([folder / "pysamples__smile.png"])
        with pytest.raises(ModelError, match=r"collection 'docvec' is multi-vector, and the model .* has no"):
            index.reindex(ReindexSpec(multivector=True))
        assert [(v.version, v.live) for v in index.versions()] == [("docvec.v1", True)]
        assert index.count() == 1


def test_the_api_says_which_mode_answered(tmp_path: Path, folder: Path, tiny_dir: Path) -> None:
    from docvec.api import create_app

    settings = _settings(tmp_path / "data", tiny_dir, multivector=True)
    with Index.open(settings) as index:
        index.add([folder / "pysamples__smile.png", folder / "pysamples__minimal-document.pdf"])
    with TestClient(create_app(settings)) as client:
        r = client.post("/search", json={"query": "a face", "k": 2})
        assert r.status_code == 200 and r.json()["mode"] == "hybrid+text"
        r = client.get("/search", params={"q": "a face", "mode": "multi"})
        assert r.json()["mode"] == "multi" and len(r.json()["hits"]) == 2
        r = client.post("/search", json={"query": "a face", "mode": "dense", "prefetch": 5})
        assert r.json()["mode"] == "dense"
        assert client.post("/search", json={"query": "x", "mode": "sideways"}).status_code == 400


def test_eval_scores_each_mode_on_the_same_pages(tmp_path: Path, tiny_dir: Path) -> None:
    ds = eval_dataset(tmp_path / "ds")
    env = {"DOCVEC_MODEL": str(tiny_dir), "DOCVEC_EMBED__MAX_PIXELS": str(TINY)}
    r = docvec("eval", str(ds), "--mode", "dense", "--mode", "multi", "--mode", "hybrid", "--json", env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout)
    assert set(out["modes"]) == {"dense", "multi", "hybrid"} and out["pages_indexed"] == 6
    for scores in out["modes"].values():
        assert 0.0 <= scores["ndcg@5"] <= 1.0 and 0.0 <= scores["recall@10"] <= 1.0
    assert out["ndcg@5"] == out["modes"]["dense"]["ndcg@5"]  # the first mode asked for heads the report


def test_a_family_without_a_head_is_refused_a_multi_vector_collection(
    tmp_path: Path, folder: Path, qwen3vl_dir: Path
) -> None:
    """Qwen3-VL-Embedding has no multi-vector head: the error names the family and what to do, before
    any page is written, on ingest and on a reindex to multi-vector."""
    pattern = r"collection 'docvec' is multi-vector, and qwen3-vl-embedding gives single vectors only"
    with (
        Index.open(_settings(tmp_path / "multi", qwen3vl_dir, multivector=True)) as index,
        pytest.raises(ModelError, match=pattern),
    ):
        index.add([folder / "pysamples__smile.png"])
    with Index.open(_settings(tmp_path / "data", qwen3vl_dir)) as index:
        index.add([folder / "pysamples__smile.png"])
        with pytest.raises(ModelError, match=pattern):
            index.reindex(ReindexSpec(multivector=True))
        assert [(v.version, v.live) for v in index.versions()] == [("docvec.v1", True)]
        assert [h.page for h in index.search("a smiling face", 3)] == [1]


#: a ColQwen3's smallest page budget (its processor's least image: 64 tokens of 32x32 pixels)
SMALLEST = 64 * 32 * 32


def test_a_late_interaction_model_keeps_its_tokens_and_its_prefetch_covers_exact_maxsim(
    tmp_path: Path, folder: Path, tiny_dir: Path, colqwen3_dir: Path
) -> None:
    # a ColQwen3 gives token vectors only: its collections keep them unasked, and its single vector is their
    # mean, the first stage the hybrid search reranks by MaxSim
    settings = Settings(
        data_dir=tmp_path / "data",
        model=str(colqwen3_dir),
        embed=EmbedSettings(max_pixels=SMALLEST, threads=2),
    )
    with Index.open(settings) as index:
        assert index.embedder.profile.name == "colqwen3" and not settings.multivector
        report = index.add([folder])
        assert report.ok
        version = index._store.live("docvec")
        assert version is not None and index._store.token_dim(version) == 320
        points = list(index._store.scroll(version, with_vectors=True))
        for p in points:  # the page vector is the mean of its tokens, re-normalised
            assert p.tokens is not None
            mean = p.tokens.astype(np.float64).mean(axis=0)
            np.testing.assert_allclose(p.vector, mean / np.linalg.norm(mean), atol=2e-3)
        assert index.search_mode() == "hybrid+text"
        query = "the quick brown fox"
        _, query_tokens = index.embedder.embed_queries_multi([query])
        exact = sorted(points, key=lambda p: -_maxsim(query_tokens[0], p.tokens))  # type: ignore[arg-type]
        multi = index.search(query, len(points), mode="multi")
        assert [(h.doc_id, h.page) for h in multi] == [
            (p.payload["doc_id"], p.payload["page"]) for p in exact
        ]
        # a prefetch that holds the collection answers exactly as MaxSim over every page does
        hybrid = index.search(query, len(points), mode="hybrid", prefetch=len(points))
        assert hybrid.hits == multi.hits
        narrow = index.search(query, 2, mode="hybrid", prefetch=2)
        dense = index.search(query, 2, mode="dense")
        assert {(h.doc_id, h.page) for h in narrow} == {(h.doc_id, h.page) for h in dense}
        # filters and the text layer, as on any collection
        pdf = SearchFilter(source=str(folder / "pysamples__pdflatex-4-pages.pdf"))
        for mode in ("multi", "hybrid", "hybrid+text"):
            hits = index.search(query, 10, pdf, mode=mode)  # type: ignore[arg-type]
            assert {h.name for h in hits} == {"pysamples__pdflatex-4-pages.pdf"}, mode
        assert index.search("document", 10, mode="text").hits  # its pages' text is kept and searched
    # served: the API answers as the library does
    from docvec.api import create_app

    with TestClient(create_app(settings)) as client:
        r = client.post("/search", json={"query": query, "k": 3, "mode": "multi"})
        assert r.status_code == 200 and r.json()["mode"] == "multi"
        assert [(h["doc_id"], h["page"]) for h in r.json()["hits"]] == [(h.doc_id, h.page) for h in multi][:3]
    # a reindex to another family: what the collection was built with carries over where that family offers
    # it (multi-vector pages: jina-embeddings-v4 has a head), its own where not (its vector size)
    with Index.open(settings) as index:
        report = index.reindex(ReindexSpec(model=str(tiny_dir), max_pixels=TINY))
        assert report.switched and report.pages_missing == 0
    with Index.open(Settings(data_dir=tmp_path / "data", embed=EmbedSettings(threads=2))) as index:
        assert index.embedder.profile.name == "jina-embeddings-v4" and index.embedder.dim == 64
        assert index.search_mode() == "hybrid+text" and len(index.search("a face", 3)) == 3
        # and back: the ColQwen3's version keeps its tokens again, unasked
        report = index.reindex(ReindexSpec(model=str(colqwen3_dir), max_pixels=SMALLEST))
        assert report.switched
        assert index.search_mode() == "hybrid+text" and len(index.search("a face", 3, mode="multi")) == 3


def test_a_late_interaction_collection_pools_its_tokens_as_colpali_engine_does(
    tmp_path: Path, folder: Path, colqwen3_dir: Path
) -> None:
    # DOCVEC_TOKEN_POOL=3 with a ColQwen: colpali-engine's hierarchical pooler (Ward clusters of a page's
    # tokens, at most a third as many), recorded with the collection; what it costs MaxSim on the tiny pages
    import torch

    from docvec._model._pooling import pool_tokens
    from docvec_reference.colqwen import colpali_pooler

    embed = EmbedSettings(max_pixels=SMALLEST, threads=2)
    settings = Settings(data_dir=tmp_path / "data", model=str(colqwen3_dir), embed=embed, token_pool=3)
    query = "the quick brown fox"
    with Index.open(settings) as index:
        assert index.embedder.profile.token_pooling == "hierarchical"
        assert index.add([folder]).ok
        version = index._store.live("docvec")
        assert version is not None
        points = list(index._store.scroll(version, with_vectors=True))
        _, (q,) = index.embedder.embed_queries_multi([query])
        full_bytes = pooled_bytes = 0
        differences = []
        for p in points:
            assert p.payload["embedding"]["token_pool"] == 3 and p.tokens is not None
            _, (full,) = index.embedder.embed_images_multi([index.pages.path(p.payload["image"])])
            want = colpali_pooler().pool_embeddings([torch.from_numpy(full)], pool_factor=3)[0].numpy()
            np.testing.assert_allclose(pool_tokens(full, 3, "hierarchical"), want, atol=1e-6)
            np.testing.assert_allclose(p.tokens, want, atol=2e-3)  # stored as float16
            assert len(p.tokens) <= len(full) // 3
            full_bytes += full.shape[0] * full.shape[1] * 2
            pooled_bytes += p.tokens.shape[0] * p.tokens.shape[1] * 2
            exact = _maxsim(q, full)
            differences.append(abs(_maxsim(q, p.tokens) - exact) / exact)
        report("colqwen3 tokens a page, float16 bytes: every token", full_bytes / len(points))
        report(
            "colqwen3 tokens a page, float16 bytes: pooled by 3 (hierarchical)", pooled_bytes / len(points)
        )
        report(
            "colqwen3 MaxSim pooled by 3 against every token, largest relative difference", max(differences)
        )
        hits = index.search(query, len(points), mode="multi")
        assert len(hits) == len(points)


def test_eval_scores_a_late_interaction_model(tmp_path: Path, colqwen3_dir: Path) -> None:
    ds = eval_dataset(tmp_path / "ds")
    env = {"DOCVEC_MODEL": str(colqwen3_dir), "DOCVEC_EMBED__MAX_PIXELS": str(SMALLEST)}
    r = docvec("eval", str(ds), "--mode", "multi", "--mode", "hybrid", "--json", env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout)
    assert set(out["modes"]) == {"multi", "hybrid"} and out["pages_indexed"] == 6
