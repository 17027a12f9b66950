"""Search with filters, `docvec search` (reranked too: the tiny random-weight reranker's scores are checked
against the library's :class:`~docvec.Reranker` on the same stored pages), what `docvec serve` says of its
reranker, and the batch query flow through the Prefect engine."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from docvec import Embedder, EmbedSettings, Index, InputError, ModelFiles, Reranker, SearchFilter, Settings
from docvec._cli import app

from .documents import RARE, filler_pdfs
from .helpers import ROOT, SMALL, TINY, index_settings, load_flow, one_line_error, page_image, rerank_env
from .processes import docvec, served

runner = CliRunner()
#: the query of the reranked searches
QUERY = "the total amount due"


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory, tiny_dir: Path, small_embedder: Embedder) -> Settings:
    """Five one-page images in two folders with tags; the index is closed again (the CLI opens it)."""
    root = tmp_path_factory.mktemp("search")
    s = index_settings(root / "data", tiny_dir)
    for folder, seeds, tags in (
        ("legal", (1, 2), ["team=legal", "year=2024"]),
        ("ops", (3, 4, 5), ["team=ops"]),
    ):
        (root / "docs" / folder).mkdir(parents=True)
        for seed in seeds:
            page_image(200 + 10 * seed, 280, seed=seed).save(root / "docs" / folder / f"p{seed}.png")
        with Index.open(s, embedder=small_embedder) as ix:
            assert ix.add([root / "docs" / folder], tags=tags).pages_indexed == len(seeds)
    # a folder whose name extends another's: a source filter must not take it for the shorter one
    (root / "docs" / "legalese").mkdir()
    page_image(260, 280, seed=6).save(root / "docs" / "legalese" / "p6.png")
    with Index.open(s, embedder=small_embedder) as ix:
        ix.add([root / "docs" / "legalese"])
    return s


def test_parse_filters() -> None:
    doc = "0123456789abcdef" * 2
    f = SearchFilter.parse([f"doc_id={doc}", "source=/x/y", "tag=team = legal", "tag=year=2024"])
    assert f == SearchFilter(doc_id=doc, source="/x/y", tags={"team": "legal", "year": "2024"})
    assert f.tag_list == ("team=legal", "year=2024")
    assert SearchFilter.parse([]).is_empty
    with pytest.raises(InputError, match="filter doc_id: a document id is 32 hex digits"):
        SearchFilter.parse(["doc_id=not-an-id"])
    # an unknown key is an error, not a tag (as it was before `tag=`)
    with pytest.raises(InputError, match=r"unknown key 'team' \(known: doc_id=.*source=.*tag="):
        SearchFilter.parse(["team=legal"])
    # stored sources are absolute: a relative one is made absolute
    assert SearchFilter.parse(["source=docs/"]).source == str(Path.cwd() / "docs")
    assert SearchFilter.parse(["source=~/p"]).source == str(Path.home() / "p")
    for bad in (["tag=team"], ["=x"], ["tag="], ["doc_id=a", "doc_id=b"], ["tag=team=a", "tag=team=b"]):
        with pytest.raises(InputError):
            SearchFilter.parse(bad)


def _names(hits: list[object]) -> set[str]:
    return {Path(h.source).name for h in hits}  # type: ignore[attr-defined]


def test_filters_narrow_the_results(indexed: Settings, small_embedder: Embedder) -> None:
    docs = indexed.data_dir.parent / "docs"
    with Index.open(indexed, embedder=small_embedder) as index:
        run = lambda flt: index.search("invoice total", 10, filter=flt)  # noqa: E731
        everything = run(None)
        assert len(everything) == 6 and [h.score for h in everything] == sorted(
            (h.score for h in everything), reverse=True
        )
        assert _names(run(SearchFilter(tags={"team": "ops"}))) == {"p3.png", "p4.png", "p5.png"}
        assert _names(run(SearchFilter(tags={"team": "legal", "year": "2024"}))) == {"p1.png", "p2.png"}
        assert run(SearchFilter(tags={"team": "ops", "year": "2024"})) == []  # all tags must hold
        # a folder at path boundaries: legal/, not legalese/; with or without the trailing separator
        assert _names(run(SearchFilter(source=str(docs / "legal")))) == {"p1.png", "p2.png"}
        assert _names(run(SearchFilter(source=str(docs / "legal") + "/"))) == {"p1.png", "p2.png"}
        assert _names(run(SearchFilter(source=str(docs / "legal" / "p1.png")))) == {"p1.png"}
        assert run(SearchFilter(source="/nowhere")) == []
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
    r = runner.invoke(
        app, ["search", "invoice total", "--json", "--filter", "tag=team=ops"], env=_env(indexed)
    )
    assert r.exit_code == 0, r.output
    hits = json.loads(r.stdout)
    assert len(hits) == 3 and all(h["tags"] == {"team": "ops"} for h in hits)
    # a hit as every JSON output has it (snippet and text: null on pages without text)
    fields = {"doc_id", "source", "name", "page", "score", "tags", "snippet", "text", "rerank_score"}
    assert set(hits[0]) == fields and hits[0]["page"] == 1


def test_search_at_80_columns_breaks_no_name_and_no_id(
    tmp_path: Path, tiny_dir: Path, small_embedder: Embedder
) -> None:
    """A file name too long to sit beside the id (a pipe is 80 columns): each hit a record, its name and
    id whole; a short one: the table, its names and ids whole."""
    s = index_settings(tmp_path / "data", tiny_dir)
    long = "northwind-consulting-quarterly-report-2024-final.png"
    page_image(200, 280, seed=1).save(tmp_path / long)
    page_image(210, 280, seed=2).save(tmp_path / "p2.png")
    with Index.open(s, embedder=small_embedder) as ix:
        ix.add([tmp_path / long, tmp_path / "p2.png"])
    env = {**_env(s), "COLUMNS": "80"}
    ids = {
        h["name"]: h["doc_id"]
        for h in json.loads(runner.invoke(app, ["search", "page", "--json"], env=env).stdout)
    }
    r = runner.invoke(app, ["search", "page"], env=env)
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert max(map(len, lines)) <= 80, r.stdout
    for name, doc_id in ids.items():
        assert any(name in ln for ln in lines) and any(doc_id in ln for ln in lines), r.stdout
    r = runner.invoke(app, ["search", "page", "--filter", f"doc_id={ids['p2.png']}"], env=env)
    assert re.search(rf"^1 +│ .*│ p2\.png +│ 1 +│ {ids['p2.png']}$", r.stdout, re.M), r.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["search", "x", "-k", "0"], "k must be between 1 and 100, not 0"),
        (["search", "x", "-k", "101"], "k must be between 1 and 100, not 101"),
        (["search", "  "], "the query is empty"),
        (["search", "x", "--filter", "nokey"], "is not of the form key=value"),
        (["search", "x", "--filter", "colour=red"], "unknown key 'colour'"),
    ],
)
def test_cli_search_errors_are_one_clear_line(args: list[str], message: str, indexed: Settings) -> None:
    r = runner.invoke(app, args, env=_env(indexed))
    assert r.exit_code == 2
    assert message in " ".join(r.output.split()) and "Traceback" not in r.output


def test_the_command_line_shows_snippets_and_eval_scores_keyword_modes(
    tmp_path: Path, tiny_dir: Path
) -> None:
    env = {
        "DOCVEC_DATA_DIR": str(tmp_path / "data"),
        "DOCVEC_MODEL": str(tiny_dir),
        "DOCVEC_EMBED__MAX_PIXELS": str(SMALL),
        "DOCVEC_OCR": "off",
        "COLUMNS": "120",
    }
    corpus = tmp_path / "ds" / "corpus"
    filler_pdfs(corpus, rare_on=4)
    r = runner.invoke(app, ["ingest", str(corpus)], env=env)
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["search", f"code {RARE}", "-k", "2", "--mode", "text"], env=env)
    assert r.exit_code == 0, r.output
    assert "doc-04.pdf" in r.stdout and f"Part code {RARE} is listed here." in " ".join(r.stdout.split())
    r = runner.invoke(app, ["search", RARE, "-k", "1", "--json", "--with-text"], env=env)
    assert r.exit_code == 0, r.output
    (hit,) = json.loads(r.stdout)
    assert hit["name"] == "doc-04.pdf" and RARE in hit["text"]
    assert [hit["snippet"]["text"][a:b] for a, b in hit["snippet"]["marks"]] == [RARE]

    # a dataset whose queries are words on its pages: keywords find each one's page first
    queries = {"q1": f"part {RARE}", "q2": "spare parts delivery", "q3": "letter to the shareholders"}
    (tmp_path / "ds" / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in queries.items())
    )
    (tmp_path / "ds" / "qrels.tsv").write_text("q1\tdoc-04\t1\nq2\tdoc-05\t1\nq3\tdoc-10\t1\n")
    args = ["eval", str(tmp_path / "ds"), "-k", "3", "--mode", "dense", "--mode", "text", "--mode", "auto"]
    r = runner.invoke(app, [*args, "--json"], env=env)
    assert r.exit_code == 0, r.output
    modes = json.loads(r.stdout)["modes"]
    assert set(modes) == {"dense", "text", "dense+text"}
    assert modes["text"]["ndcg@5"] == pytest.approx(1.0)
    assert modes["dense+text"]["recall@3"] == pytest.approx(1.0)  # found by keywords, kept by the fusion


def test_query_flow_writes_json_lines(
    prefect_harness: None, indexed: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in _env(indexed).items():
        monkeypatch.setenv(key, value)
    module = load_flow("query")
    queries = tmp_path / "queries.txt"
    queries.write_text('invoice total\n\n{"query": "signature page", "k": 2}\nbalance sheet\n')
    out = tmp_path / "hits.jsonl"

    assert module.query_flow(str(queries), str(out), k=4) == 3
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["query"], r["k"], r["mode"], r["rerank"], len(r["hits"])) for r in rows] == [
        ("invoice total", 4, "dense+text", 0, 4),
        ("signature page", 2, "dense+text", 0, 2),
        ("balance sheet", 4, "dense+text", 0, 4),
    ]
    assert {"doc_id", "source", "name", "page", "score", "tags", "snippet", "text", "rerank_score"} == set(
        rows[0]["hits"][0]
    )


def test_cli_search_before_anything_is_indexed(indexed: Settings, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()  # a data folder, with nothing indexed in it
    env = {**_env(indexed), "DOCVEC_DATA_DIR": str(tmp_path / "empty")}
    r = runner.invoke(app, ["search", "x"], env=env)
    assert r.exit_code == 2 and "run `docvec ingest` first" in " ".join(r.output.split()), r.output
    # one that is not there (a typo) is named, and not made
    env["DOCVEC_DATA_DIR"] = str(tmp_path / "emtpy")
    r = runner.invoke(app, ["search", "x"], env=env)
    assert r.exit_code == 2 and f"no docvec data folder at {tmp_path / 'emtpy'}" in " ".join(r.output.split())
    assert not (tmp_path / "emtpy").exists()


def test_query_file_lines_are_checked_first(tmp_path: Path) -> None:
    read_queries = load_flow("_queries").read_queries

    good = tmp_path / "good.txt"
    good.write_text('  invoice total \n\n{"query": "signature page", "k": 2}\n')
    assert [(s.query, s.k) for s in read_queries(good, k=5)] == [("invoice total", 5), ("signature page", 2)]
    # a line is a search: any of its fields, the options the default for what it leaves unsaid
    line = {"query": "x", "k": 2, "mode": "text", "rerank": 0}
    good.write_text(json.dumps(line) + "\n")
    (search,) = read_queries(good, k=5, with_text=True)
    assert (search.k, search.mode, search.rerank, search.with_text) == (2, "text", 0, True)
    for line, reason in (
        ('{"query": "x", "k": 500}', "line 2: k must be between 1 and 100"),
        ('{"k": 3}', "line 2: expected a query"),
        ('{"query": "  "}', "line 2: the query is empty"),
        ("{not json", "line 2: expected a query"),
    ):
        bad = tmp_path / "bad.txt"
        bad.write_text("fine\n" + line + "\n")
        with pytest.raises(InputError, match=reason) as info:
            read_queries(bad, k=5)
        assert str(bad) in str(info.value)


def test_query_flow_script_reports_a_bad_line_in_one_line(indexed: Settings, tmp_path: Path) -> None:
    import subprocess
    import sys

    queries = tmp_path / "q.txt"
    queries.write_text("first\n{broken\n")
    env = {**os.environ, **_env(indexed), "DOCVEC_MODEL": str(tmp_path / "no-model")}  # never loaded
    r = subprocess.run(
        [sys.executable, str(ROOT / "flows" / "query.py"), str(queries), str(tmp_path / "out.jsonl")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert r.returncode == 1
    assert r.stderr.strip() == (
        f"error: {queries}: line 2: expected a query, or a search as JSON ({{'query': ..., 'k': ...}})"
    )
    assert not (tmp_path / "out.jsonl").exists()


# -- docvec search --rerank ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_pages(tiny_files: ModelFiles) -> Iterator[Embedder]:
    """The tiny model at 16 image tokens a page (about 12 for the embedder, 16 for the reranker): the
    reranked searches' pages are small, fast, and the same path."""
    with Embedder(tiny_files, EmbedSettings(max_pixels=TINY, threads=2)) as emb:
        yield emb


@pytest.fixture(scope="module")
def rerank_indexed(
    tmp_path_factory: pytest.TempPathFactory, tiny_dir: Path, tiny_pages: Embedder
) -> Settings:
    """Four one-page images indexed with the tiny model; the index is closed again (the CLI opens it)."""
    root = tmp_path_factory.mktemp("rerank-search")
    docs = root / "docs"
    docs.mkdir()
    for seed in range(4):
        page_image(150 + 20 * seed, 200, seed=40 + seed).save(docs / f"p{seed}.png")
    s = index_settings(root / "data", tiny_dir, max_pixels=TINY)
    with Index.open(s, embedder=tiny_pages) as ix:
        assert ix.add([docs]).pages_indexed == 4
    return s


def _rerank_env(s: Settings, **more: str | None) -> dict[str, str | None]:
    return rerank_env(s.data_dir, s.model or "", **more)


def test_search_rerank_orders_the_first_stages_best_by_the_rerankers_scores(
    rerank_indexed: Settings, reranker_dir: Path, reranker: Reranker, tiny_pages: Embedder
) -> None:
    env = _rerank_env(rerank_indexed, DOCVEC_RERANK_MODEL=str(reranker_dir))
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
    with Index.open(rerank_indexed, embedder=tiny_pages) as ix:
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
    args: list[str], model: bool, message: str, rerank_indexed: Settings, reranker_dir: Path
) -> None:
    env = _rerank_env(rerank_indexed, DOCVEC_RERANK_MODEL=str(reranker_dir) if model else None)
    r = runner.invoke(app, ["search", QUERY, *args], env=env)
    assert r.exit_code == 2, r.output
    assert message in one_line_error(r.output)


# -- docvec serve with a reranker ------------------------------------------------------------------------


def test_serve_names_its_reranker_and_commands_rerank_through_it(
    rerank_indexed: Settings, reranker_dir: Path, tmp_path: Path
) -> None:
    """The banner's reranker line; `docvec search` sent to the server reranks there (its DOCVEC_RERANK by
    default, --rerank N or 0 when given), the table with the reranker's column."""
    env = {k: v for k, v in _rerank_env(rerank_indexed).items() if v is not None}
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
