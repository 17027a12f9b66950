"""Search with filters, `docvec search`, and the batch query flow through the Prefect engine."""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from docvec import (
    Embedder,
    EmbedSettings,
    Index,
    InputError,
    ModelFiles,
    RenderSettings,
    SearchFilter,
    Settings,
)
from docvec._cli import app

from .conftest import page_image

ROOT = Path(__file__).resolve().parents[1]
SMALL = 28 * 28 * 64
runner = CliRunner()


@pytest.fixture(scope="module")
def small(tiny_files: ModelFiles) -> Iterator[Embedder]:
    with Embedder(tiny_files, EmbedSettings(max_pixels=SMALL, threads=2)) as emb:
        yield emb


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory, tiny_dir: Path, small: Embedder) -> Settings:
    """Five one-page images in two folders with tags; the index is closed again (the CLI opens it)."""
    root = tmp_path_factory.mktemp("search")
    s = Settings(
        data_dir=root / "data",
        model=str(tiny_dir),
        embed=EmbedSettings(max_pixels=SMALL, threads=2),
        render=RenderSettings(workers=1),
    )
    for folder, seeds, tags in (
        ("legal", (1, 2), ["team=legal", "year=2024"]),
        ("ops", (3, 4, 5), ["team=ops"]),
    ):
        (root / "docs" / folder).mkdir(parents=True)
        for seed in seeds:
            page_image(200 + 10 * seed, 280, seed=seed).save(root / "docs" / folder / f"p{seed}.png")
        with Index.open(s, embedder=small) as ix:
            assert ix.add([root / "docs" / folder], tags=tags).pages_indexed == len(seeds)
    # a folder whose name extends another's: a prefix must match it, a doc_id/tag filter must not
    (root / "docs" / "legalese").mkdir()
    page_image(260, 280, seed=6).save(root / "docs" / "legalese" / "p6.png")
    with Index.open(s, embedder=small) as ix:
        ix.add([root / "docs" / "legalese"])
    return s


def test_parse_filters() -> None:
    doc = "0123456789abcdef" * 2
    f = SearchFilter.parse([f"doc_id={doc}", "source=/x/y", "team = legal", "year=2024"])
    assert f == SearchFilter(doc_id=doc, source_prefix="/x/y", tags={"team": "legal", "year": "2024"})
    assert f.tag_list == ("team=legal", "year=2024")
    assert SearchFilter.parse([]).is_empty
    with pytest.raises(InputError, match="filter doc_id: String should match pattern"):
        SearchFilter.parse(["doc_id=not-an-id"])
    # stored sources are absolute: a relative prefix is made absolute, keeping a trailing separator
    assert SearchFilter.parse(["source=docs/"]).source_prefix == str(Path.cwd() / "docs") + os.sep
    assert SearchFilter.parse(["source=~/p"]).source_prefix == str(Path.home() / "p")
    for bad in (["team"], ["=x"], ["team="], ["doc_id=a", "doc_id=b"], ["team=a", "team=b"]):
        with pytest.raises(InputError):
            SearchFilter.parse(bad)


def _names(hits: list[object]) -> set[str]:
    return {Path(h.source).name for h in hits}  # type: ignore[attr-defined]


def test_filters_narrow_the_results(indexed: Settings, small: Embedder) -> None:
    docs = indexed.data_dir.parent / "docs"
    with Index.open(indexed, embedder=small) as index:
        run = lambda flt: index.search("invoice total", 10, flt)  # noqa: E731
        everything = run(None)
        assert len(everything) == 6 and [h.score for h in everything] == sorted(
            (h.score for h in everything), reverse=True
        )
        assert _names(run(SearchFilter(tags={"team": "ops"}))) == {"p3.png", "p4.png", "p5.png"}
        assert _names(run(SearchFilter(tags={"team": "legal", "year": "2024"}))) == {"p1.png", "p2.png"}
        assert run(SearchFilter(tags={"team": "ops", "year": "2024"})) == []  # all tags must hold
        assert _names(run(SearchFilter(source_prefix=str(docs / "legal")))) == {"p1.png", "p2.png", "p6.png"}
        assert _names(run(SearchFilter(source_prefix=str(docs / "legal") + "/"))) == {"p1.png", "p2.png"}
        assert run(SearchFilter(source_prefix="/nowhere")) == []
        one = everything[3]
        assert [h.doc_id for h in run(SearchFilter(doc_id=one.doc_id))] == [one.doc_id]
        both = SearchFilter(doc_id=one.doc_id, tags={"team": "ops", "year": "2024"})
        assert run(both) == []
        with pytest.raises(InputError):
            index.search("   ", 3)
        with pytest.raises(InputError):
            index.search("x", 101)


def _env(s: Settings) -> dict[str, str]:
    return {
        "DOCVEC_DATA_DIR": str(s.data_dir),
        "DOCVEC_MODEL": s.model,
        "DOCVEC_EMBED__MAX_PIXELS": str(SMALL),
    }


def test_cli_search_table_and_json(indexed: Settings) -> None:
    r = runner.invoke(app, ["search", "invoice total", "-k", "3"], env=_env(indexed))
    assert r.exit_code == 0, r.output
    assert "rank" in r.stdout and ".png" in r.stdout
    r = runner.invoke(app, ["search", "invoice total", "--json", "--filter", "team=ops"], env=_env(indexed))
    assert r.exit_code == 0, r.output
    hits = json.loads(r.stdout)
    assert len(hits) == 3 and all(h["tags"] == ["team=ops"] for h in hits)
    assert set(hits[0]) == {"doc_id", "source", "page", "score", "tags"} and hits[0]["page"] == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["search", "x", "-k", "0"], "k must be between 1 and 100, not 0"),
        (["search", "x", "-k", "101"], "k must be between 1 and 100, not 101"),
        (["search", "  "], "the query is empty"),
        (["search", "x", "--filter", "nokey"], "is not of the form key=value"),
    ],
)
def test_cli_search_errors_are_one_clear_line(args: list[str], message: str, indexed: Settings) -> None:
    r = runner.invoke(app, args, env=_env(indexed))
    assert r.exit_code == 2
    assert message in " ".join(r.output.split()) and "Traceback" not in r.output


def test_query_flow_writes_json_lines(
    prefect_harness: None, indexed: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in _env(indexed).items():
        monkeypatch.setenv(key, value)
    spec = importlib.util.spec_from_file_location("docvec_flow_query", ROOT / "flows" / "query.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    queries = tmp_path / "queries.txt"
    queries.write_text('invoice total\n\n{"query": "signature page", "k": 2}\nbalance sheet\n')
    out = tmp_path / "hits.jsonl"

    assert module.query_flow(str(queries), str(out), k=4) == 3
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["query"], r["k"], len(r["hits"])) for r in rows] == [
        ("invoice total", 4, 4),
        ("signature page", 2, 2),
        ("balance sheet", 4, 4),
    ]
    assert {"doc_id", "source", "page", "score", "tags"} == set(rows[0]["hits"][0])


def test_cli_search_before_anything_is_indexed(indexed: Settings, tmp_path: Path) -> None:
    env = {**_env(indexed), "DOCVEC_DATA_DIR": str(tmp_path / "empty")}
    r = runner.invoke(app, ["search", "x"], env=env)
    assert r.exit_code == 2 and "run `docvec ingest` first" in " ".join(r.output.split())
