"""The reranker on the command line: `docvec rerank`, `docvec search --rerank` and what `docvec serve` says
of its reranker, with the tiny random-weight models.

The reranker's weights are random: its scores order nothing meaningful, but they are its own, so the
command's scores are checked against the library's :class:`~docvec.Reranker` scoring the same inputs."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from docvec import Embedder, EmbedSettings, Index, ModelFiles, RenderSettings, Reranker, Settings
from docvec._cli import app

from .helpers import docvec_env, page_image
from .processes import docvec, served

#: small pages (about 12 image tokens for the embedder, 16 for the reranker): fast, and the same path
SMALL = 28 * 28 * 16
QUERY = "the total amount due"
runner = CliRunner()


def _one_line_error(output: str) -> str:
    lines = [ln for ln in output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), output
    assert "Traceback" not in output
    return lines[0]


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Three page images of different sizes, small enough for any page budget (no resizing differs)."""
    folder = tmp_path_factory.mktemp("rerank-images")
    paths = []
    for i, (w, h) in enumerate(((120, 160), (160, 120), (140, 140))):
        paths.append(folder / f"page-{i}.png")
        page_image(w, h, seed=30 + i).save(paths[-1])
    return paths


# -- docvec rerank ---------------------------------------------------------------------------------------


def test_rerank_json_gives_the_libraries_scores_in_input_order(
    reranker_dir: Path, reranker: Reranker, images: list[Path]
) -> None:
    instruction = "Find the page of an invoice that answers the query."
    args = ["rerank", "--model", str(reranker_dir), "-q", QUERY, "--instruction", instruction]
    order = [images[2], images[0], images[1]]  # not the files' order: the order given is kept
    r = runner.invoke(app, [*args, *(a for p in order for a in ("-i", str(p))), "--threads", "2", "--json"])
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)
    assert [row["image"] for row in rows] == [str(p) for p in order]
    scores = np.array([row["score"] for row in rows])
    assert all(isinstance(row["score"], float) for row in rows) and np.all((scores > 0) & (scores < 1))
    np.testing.assert_allclose(scores, reranker.score(QUERY, order, instruction=instruction), atol=1e-6)
    # the instruction counts: without it, other scores
    assert not np.allclose(scores, reranker.score(QUERY, order), atol=1e-6)


def test_rerank_table_with_the_model_from_the_environment(
    reranker_dir: Path, reranker: Reranker, images: list[Path]
) -> None:
    env = {"DOCVEC_RERANK_MODEL": str(reranker_dir), "DOCVEC_EMBED__THREADS": "2", "COLUMNS": "200"}
    r = runner.invoke(app, ["rerank", "-q", QUERY, *(a for p in images for a in ("-i", str(p)))], env=env)
    assert r.exit_code == 0, r.output
    expected = reranker.score(QUERY, images)
    ranks = {int(i): rank for rank, i in enumerate(np.argsort(-expected), start=1)}
    rows = [ln for ln in r.stdout.splitlines() if ".png" in ln]
    assert len(rows) == len(images)
    for i, (row, path) in enumerate(zip(rows, images, strict=True)):  # in the order given, each with its rank
        cells = [c.strip() for c in row.strip("│ ").split("│")]
        assert cells[0] == str(path), row
        assert float(cells[1]) == pytest.approx(expected[i], abs=1e-4) and int(cells[2]) == ranks[i]


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        # no reranker named anywhere
        (["-q", "x", "-i", "{img}"], {}, "no reranker: give --model or set DOCVEC_RERANK_MODEL"),
        (["-q", "x"], {"DOCVEC_RERANK_MODEL": "{rr}"}, "give at least one page image with --image"),
        (["-i", "{img}"], {"DOCVEC_RERANK_MODEL": "{rr}"}, "give the query with --query"),
        (["-q", "   ", "-i", "{img}"], {"DOCVEC_RERANK_MODEL": "{rr}"}, "the query is empty"),
        (["-q", "x", "--instruction", " ", "-i", "{img}", "-m", "{rr}"], {}, "the instruction"),
        (
            ["-q", "x", "-i", "{img}", "-i", "{tmp}/nope.png", "-m", "{rr}"],
            {},
            "item 1 {tmp}/nope.png: no such file",
        ),
        (["-q", "x", "-i", "{tmp}/bad.png", "-m", "{rr}"], {}, "item 0 {tmp}/bad.png: not an image file"),
        (["-q", "x", "-i", "{img}", "-m", "{tmp}/no-model"], {}, "{tmp}/no-model: no such file or folder"),
    ],
)
def test_rerank_errors_are_one_line_naming_the_input(
    args: list[str],
    env: dict[str, str],
    message: str,
    reranker_dir: Path,
    images: list[Path],
    tmp_path: Path,
) -> None:
    (tmp_path / "bad.png").write_bytes(b"\x89PNG not really")
    values = {"img": images[0], "rr": reranker_dir, "tmp": tmp_path}
    full: dict[str, str | None] = {"DOCVEC_RERANK_MODEL": None, "DOCVEC_RERANK": None, "COLUMNS": "300"}
    full.update({k: v.format(**values) for k, v in env.items()})
    r = runner.invoke(app, ["rerank", *(a.format(**values) for a in args)], env=full)
    assert r.exit_code == 2, r.output
    assert message.format(**values) in _one_line_error(r.output)


@pytest.mark.parametrize(
    ("model", "message"),
    [
        ("tiny_dir", "no reranker profile for a 'qwen2vl' language model"),  # jina-v4's architecture
        ("qwen3vl_dir", "is not a reranker"),  # a reranker's architecture, converted as an embedder
    ],
)
def test_rerank_with_an_embedding_model_says_it_is_not_a_reranker(
    model: str, message: str, images: list[Path], request: pytest.FixtureRequest
) -> None:
    folder: Path = request.getfixturevalue(model)
    r = runner.invoke(
        app, ["rerank", "-m", str(folder), "-q", "x", "-i", str(images[0])], env={"COLUMNS": "300"}
    )
    assert r.exit_code == 2, r.output
    said = _one_line_error(r.output)
    assert message in said and str(folder) in said


# -- docvec search --rerank ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def small(tiny_files: ModelFiles) -> Iterator[Embedder]:
    with Embedder(tiny_files, EmbedSettings(max_pixels=SMALL, threads=2)) as emb:
        yield emb


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory, tiny_dir: Path, small: Embedder) -> Settings:
    """Four one-page images indexed with the tiny model; the index is closed again (the CLI opens it)."""
    root = tmp_path_factory.mktemp("rerank-search")
    docs = root / "docs"
    docs.mkdir()
    for seed in range(4):
        page_image(150 + 20 * seed, 200, seed=40 + seed).save(docs / f"p{seed}.png")
    s = Settings(
        data_dir=root / "data",
        model=str(tiny_dir),
        embed=EmbedSettings(max_pixels=SMALL, threads=2),
        render=RenderSettings(workers=1),
    )
    with Index.open(s, embedder=small) as ix:
        assert ix.add([docs]).pages_indexed == 4
    return s


def _env(s: Settings, **more: str | None) -> dict[str, str | None]:
    base: dict[str, str | None] = {
        **docvec_env(s.data_dir, s.model or "", max_pixels=SMALL, threads=2),
        "DOCVEC_RERANK_MODEL": None,
        "DOCVEC_RERANK": None,
        "COLUMNS": "300",
    }
    return base | more


def test_search_rerank_orders_the_first_stages_best_by_the_rerankers_scores(
    indexed: Settings, reranker_dir: Path, reranker: Reranker, small: Embedder
) -> None:
    env = _env(indexed, DOCVEC_RERANK_MODEL=str(reranker_dir))
    first = runner.invoke(app, ["search", QUERY, "-k", "3", "--json"], env=env)
    assert first.exit_code == 0, first.output
    assert all(h["rerank_score"] is None for h in json.loads(first.stdout))  # DOCVEC_RERANK: 0, off
    r = runner.invoke(app, ["search", QUERY, "-k", "2", "--rerank", "3", "--json"], env=env)
    assert r.exit_code == 0, r.output
    hits = json.loads(r.stdout)
    assert len(hits) == 2
    scores = [h["rerank_score"] for h in hits]
    assert scores == sorted(scores, reverse=True) and all(0 < x < 1 for x in scores)
    # the reranker's two best of the first stage's three, each scored on its stored page image
    candidates = json.loads(first.stdout)
    with Index.open(indexed, embedder=small) as ix:
        pages = [ix.page_file(h["doc_id"], h["page"]) for h in candidates]
    expected = reranker.score(QUERY, pages)
    best = np.argsort(-expected)[:2]
    assert [h["doc_id"] for h in hits] == [candidates[i]["doc_id"] for i in best]
    np.testing.assert_allclose(scores, expected[best], atol=2e-6)  # the JSON's 6 decimals
    assert [h["score"] for h in hits] == [candidates[i]["score"] for i in best]  # the first stage's


@pytest.mark.parametrize(
    ("args", "model", "message"),
    [
        (["-k", "3", "--rerank", "2"], True, "rerank (2) is below k (3)"),
        (["--rerank", "101"], True, "rerank must be from 0 (off) to 100 pages, not 101"),
        (["--rerank", "5"], False, "this index has no reranker: set DOCVEC_RERANK_MODEL"),
    ],
)
def test_search_rerank_errors_are_one_line(
    args: list[str], model: bool, message: str, indexed: Settings, reranker_dir: Path
) -> None:
    env = _env(indexed, DOCVEC_RERANK_MODEL=str(reranker_dir) if model else None)
    r = runner.invoke(app, ["search", QUERY, *args], env=env)
    assert r.exit_code == 2, r.output
    assert message in _one_line_error(r.output)


# -- docvec serve with a reranker ------------------------------------------------------------------------


def test_serve_names_its_reranker_and_commands_rerank_through_it(
    indexed: Settings, reranker_dir: Path, tmp_path: Path
) -> None:
    """The banner's reranker line; `docvec search` sent to the server reranks there (its DOCVEC_RERANK by
    default, --rerank N or 0 when given), the table with the reranker's column."""
    env = {k: v for k, v in _env(indexed).items() if v is not None}
    env |= {"DOCVEC_RERANK_MODEL": str(reranker_dir), "DOCVEC_RERANK": "3"}
    gguf = next(reranker_dir.glob("tiny-*.gguf"))
    mb = (gguf.stat().st_size + next(reranker_dir.glob("mmproj-*.gguf")).stat().st_size) / 2**20
    with served(env, tmp_path / "serve.log") as server:
        client = {**env, "DOCVEC_RERANK_MODEL": str(tmp_path / "never-loaded")}  # the server's reranks
        table = docvec("search", QUERY, "-k", "2", env=client)
        assert table.returncode == 0 and f"sending this to {server.url}" in table.stderr, table.stderr
        header = next(ln for ln in table.stdout.splitlines() if "rank" in ln)
        assert [c.strip() for c in header.strip("┃ ").split("┃")][:3] == ["rank", "rerank", "score"]
        plain = docvec("search", QUERY, "-k", "2", "--rerank", "0", "--json", env=client)
        assert plain.returncode == 0 and [h["rerank_score"] for h in json.loads(plain.stdout)] == [None] * 2
        deeper = docvec("search", QUERY, "-k", "2", "--rerank", "4", "--json", env=client)
        assert deeper.returncode == 0, deeper.stderr
        assert all(0 < h["rerank_score"] < 1 for h in json.loads(deeper.stdout))
        banner = " ".join(server.tail(20_000).split())
    size = f"{mb:.1f} MB" if mb < 10 else f"{int(mb)} MB"
    assert (
        f"reranker {reranker_dir} ({gguf.name}): {size} of weights (memory-mapped), 3 pages a search by "
        "default, k when it asks for more (DOCVEC_RERANK)"
    ) in banner, banner
