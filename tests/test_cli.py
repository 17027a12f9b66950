"""The `docvec` command line, run as users run it: embed, rerank (checked against the library's
:class:`~docvec.Reranker` on the same inputs: the tiny reranker's weights are random, its scores its own),
models, the demo, the help pages."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import get_args

import numpy as np
import pytest
from PIL import Image
from rich.console import Console
from typer.testing import CliRunner

from docvec import Embedder, IngestProgress, IngestReport, ModelFiles, Reranker
from docvec._cli import app
from docvec._cli._progress import IngestDisplay
from docvec._model._profiles import PROFILES, RERANKER_PROFILES
from docvec._model._registry import REGISTRY
from docvec._records import ModeChoice

from .fakehub import fill_cache
from .helpers import embed_json, one_line_error, page_image
from .processes import docvec

runner = CliRunner()
#: the query the rerank command scores pages for
QUERY = "the total amount due"


@pytest.mark.parametrize(
    ("model", "library"), [("tiny_dir", "embedder"), ("qwen3vl_dir", "qwen3vl_embedder")]
)
def test_embed_json_matches_the_library(
    model: str, library: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """`docvec embed --model OUT ... --json` gives the library's vectors, on both families' tiny models."""
    model_dir: Path = request.getfixturevalue(model)
    embedder: Embedder = request.getfixturevalue(library)
    img = tmp_path / "page.png"
    page_image(300, 420).save(img)  # under both families' page budgets: the fixtures' tokens
    rows = embed_json(model_dir, img)
    np.testing.assert_allclose(rows[0].vector, embedder.embed_queries(["invoice total"])[0], atol=1e-6)
    np.testing.assert_allclose(rows[1].vector, embedder.embed_passages(["a passage"])[0], atol=1e-6)
    np.testing.assert_allclose(rows[2].vector, embedder.embed_images([img])[0], atol=1e-6)


def test_embed_table(tiny_dir: Path) -> None:
    r = runner.invoke(app, ["embed", "--model", str(tiny_dir), "-q", "hello"])
    assert r.exit_code == 0, r.output
    assert "query" in r.stdout and "hello" in r.stdout and "64" in r.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["embed", "--model", "/no/such/model", "-q", "x"], "/no/such/model: no such file or folder"),
        # a name docvec does not know: the registry's are listed, no pull is offered
        (["embed", "-q", "x", "--model", "never-pulled"], "nor a registry model (those are jina-v4,"),
        (["embed", "-q", "x", "--dim", "300", "--model", "{tiny}"], "dim must be one of"),
        (["embed", "-q", "x", "--dim", "0"], "dim"),
        (["embed"], "give at least one --query, --passage or --image"),
    ],
)
def test_embed_errors_are_one_clear_line(args: list[str], message: str, tiny_dir: Path) -> None:
    r = runner.invoke(app, [a.format(tiny=tiny_dir) for a in args])
    assert r.exit_code == 2
    assert message in " ".join(r.output.split()) and "Traceback" not in r.output


def test_embed_bad_image_names_the_file(tiny_dir: Path, tmp_path: Path) -> None:
    bad = tmp_path / "scan.jpg"
    bad.write_bytes(b"\xff\xd8\xff\xe0 not really a jpeg")
    good = tmp_path / "ok.png"
    Image.new("RGB", (64, 64), "white").save(good)
    r = runner.invoke(app, ["embed", "--model", str(tiny_dir), "-i", str(good), "-i", str(bad)])
    assert r.exit_code == 2
    assert "item 1" in r.output and "scan.jpg" in r.output


# -- docvec rerank ---------------------------------------------------------------------------------------


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
    assert message.format(**values) in one_line_error(r.output)


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
    said = one_line_error(r.output)
    assert message in said and str(folder) in said


# -- models ----------------------------------------------------------------------------------------------


def test_convert_with_quantization_makes_complete_model_folders(tiny_dir: Path, tmp_path: Path) -> None:
    r = runner.invoke(
        app,
        [
            "models",
            "convert",
            str(tiny_dir / "hf"),
            str(tmp_path),
            "--outtype",
            "f16",
            "--quantize",
            "Q8_0",
            "--name",
            "m",
        ],
    )
    assert r.exit_code == 0, r.output
    # each folder a complete model: the language model, the vision encoder and the multi-vector head
    head = "multivector-head.gguf"
    assert sorted(p.name for p in tmp_path.glob("*.gguf")) == ["m-F16.gguf", "mmproj-m-F16.gguf", head]
    assert sorted(p.name for p in (tmp_path / "Q8_0").glob("*.gguf")) == [
        "m-Q8_0.gguf",
        "mmproj-m-F16.gguf",
        head,
    ]
    with Embedder.open(tmp_path / "Q8_0") as emb:
        assert emb.embed_queries(["ok"]).shape == (1, 64)


def test_convert_errors(tmp_path: Path) -> None:
    r = runner.invoke(app, ["models", "convert", str(tmp_path), str(tmp_path / "out")])
    assert r.exit_code == 2 and "not a Hugging Face checkpoint folder" in r.output


def test_pull_offline_says_what_to_do(tmp_path: Path) -> None:
    r = docvec("models", "pull", "jina-v4", env={"HF_HUB_CACHE": str(tmp_path), "HF_HUB_OFFLINE": "1"})
    assert r.returncode == 2, r.stderr
    assert "CC BY-NC 4.0" in r.stderr  # the licence is shown before anything is fetched
    assert "jinaai/jina-embeddings-v4-text-retrieval-GGUF" in r.stderr and "Traceback" not in r.stderr


def test_pulled_registry_model_is_used_by_name(tiny_files: ModelFiles, tmp_path: Path) -> None:
    """A pre-filled Hugging Face cache stands in for the download: pull, list and embed by name, offline."""
    m = REGISTRY["jina-v4"]
    fill_cache(
        tmp_path,
        m.lm_repo,
        {
            m.lm_files[m.default_quant]: tiny_files.language_model.read_bytes(),
            m.mmproj_file: tiny_files.mmproj.read_bytes(),
        },
    )
    env = {"HF_HUB_CACHE": str(tmp_path), "HF_HUB_OFFLINE": "1"}
    pulled = docvec("models", "pull", "jina-v4", "--no-head", env=env)  # the GGUFs only, offline
    assert pulled.returncode == 0, pulled.stderr
    assert m.lm_files[m.default_quant] in pulled.stdout.replace("\n", "")
    listed = docvec("models", "list", env=env)
    assert listed.returncode == 0 and re.search(r"^jina-v4 .*│ Q8_0\s*$", listed.stdout, re.M), listed.stdout
    out = docvec("embed", "-q", "hello", "--json", env={**env, "DOCVEC_MODEL": "jina-v4"})
    assert out.returncode == 0, out.stderr
    assert len(json.loads(out.stdout)[0]["vector"]) == 64


def test_demo_indexes_the_samples_and_searches(
    tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {"DOCVEC_DATA_DIR": str(tmp_path / "data")}
    # a machine with only what the README lists: no tesseract
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    r = runner.invoke(app, ["demo", "--model-dir", str(tmp_path / "tiny")], env=env)
    assert r.exit_code == 0, r.output
    out = " ".join(r.stdout.split())
    assert "building the offline test model" in out
    assert "indexed 3 documents (4 pages)" in out and "total amount due on the invoice" in out
    assert "weights are random" in out and out.count(".pdf") + out.count(".png") >= 3
    assert "docvec models pull jina-v4" in out  # a real model to try: the default one
    # the samples' words are a text layer: the invoice is found by them, its snippet shown, OCR or not
    first = next(ln for ln in r.stdout.splitlines() if "│ +" in ln)
    assert "invoice.pdf" in first, r.stdout
    assert "Total amount due" in out
    # ...and the run says what it could not do: the image's words need OCR
    assert "revenue-chart.png: an image, whose words only OCR reads" in out
    assert "tesseract is not installed" in out and "docvec reindex --text" in out
    # the index records the model that made it: a shell that names none finds it there
    listed = runner.invoke(app, ["collections", "list", "--json"], env={**env, "DOCVEC_MODEL": None})
    assert [v["model"] for v in json.loads(listed.stdout)] == [str((tmp_path / "tiny").resolve())]
    monkeypatch.undo()
    # the data folder named in .env, as any other setting there: the same index, not the cache's demo one
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text(f"DOCVEC_DATA_DIR={tmp_path / 'data'}\n")
    again = runner.invoke(app, ["demo", "--model-dir", str(tmp_path / "tiny")], env={"DOCVEC_DATA_DIR": None})
    assert again.exit_code == 0, again.output
    said = " ".join(again.stdout.split())
    assert "building" not in said and f"the offline test model: {tmp_path / 'tiny'}" in said
    assert "skipped 3 unchanged" in said and f"unchanged,into{tmp_path / 'data'}" in "".join(said.split())


def _command_paths() -> list[list[str]]:
    import typer.main

    def walk(cmd: object, path: list[str]) -> list[list[str]]:
        found = [path]
        for name, sub in sorted(getattr(cmd, "commands", {}).items()):
            found += walk(sub, [*path, name])
        return found

    return walk(typer.main.get_command(app), [])


@pytest.mark.parametrize("command", _command_paths(), ids=lambda c: " ".join(c) or "docvec")
def test_help_pages_speak_the_command_line_not_python(command: list[str]) -> None:
    r = runner.invoke(app, [*command, "--help"], env={"COLUMNS": "80"})
    assert r.exit_code == 0, r.output
    for python in ("<str>", "<int>", "<bool>", "<path>", "list[", "described below"):
        assert python not in r.stdout, f"{python!r} in `docvec {' '.join(command)} --help`:\n{r.stdout}"
    usage = next(ln for ln in r.stdout.splitlines() if "Usage:" in ln)
    assert "{" not in usage and "}" not in usage, usage


@pytest.mark.parametrize("flow", ["ingest", "query", "reindex"])
def test_every_flow_option_has_help(flow: str) -> None:
    root = Path(__file__).resolve().parents[1]
    r = subprocess.run(
        [sys.executable, str(root / "flows" / f"{flow}.py"), "--help"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    # argparse prints an option or argument with no help text as its name alone on its line, with no help
    # line below it either
    lines = r.stdout.splitlines()
    section = r.stdout.split("\n\n", 2)[-1]  # past the usage lines
    bare = [
        ln
        for i, ln in enumerate(lines)
        if ln in section
        and re.fullmatch(r"  (-[\w-]+( [A-Z_=]+)?(, )?)+|  [a-z_]+", ln)
        and not (i + 1 < len(lines) and lines[i + 1].startswith(" " * 10))
    ]
    assert not bare, f"options without help in flows/{flow}.py:\n{r.stdout}"


def test_progress_eta_weighs_pages_not_documents() -> None:
    """Three documents of 1, 2 and 40 pages, a page a second: at page 37 of the last, 3 pages (3 s) are
    left, not a 40th of a document; and so when the records carry no report (a server's job, followed by
    a client), from the pages the display saw go by."""
    total = 3
    report = IngestReport(documents_indexed=2, pages_indexed=3)
    at = IngestProgress(total, 2, "/docs/c.pdf", 37, 40, report)
    expected = "progress: 2/3 documents, 40 pages, 1.00 pages/s, ETA 3s"
    assert IngestDisplay(Console(file=io.StringIO()), quiet=True).line(at, 40.0) == expected
    followed = IngestDisplay(Console(file=io.StringIO()), quiet=True)
    seen = [(0, "/docs/a.pdf", 1, 1), (1, None, 0, 0), (1, "/docs/b.pdf", 1, 2), (1, "/docs/b.pdf", 2, 2)]
    seen += [(2, "/docs/c.pdf", page, 40) for page in range(1, 38)]
    for done, current, page, count in seen:
        followed(IngestProgress(total, done, current, page, count, IngestReport()))
    assert followed.line(IngestProgress(total, 2, "/docs/c.pdf", 37, 40, IngestReport()), 40.0) == expected
    # documents not opened yet count as the mean of those read: 2 of 4 read, 10 pages each, 20 to go
    early = IngestProgress(4, 2, None, 0, 0, IngestReport(documents_indexed=2, pages_indexed=20))
    assert IngestDisplay(Console(file=io.StringIO()), quiet=True).line(early, 20.0).endswith("ETA 20s")


def test_models_list_reads_well_at_80_columns(tmp_path: Path) -> None:
    """In a pipe (80 columns): every name whole on its line, no line wider, a few lines a model; the
    sources' addresses whole, one a line."""
    r = runner.invoke(app, ["models", "list"], env={"COLUMNS": "80", "DOCVEC_CACHE_DIR": str(tmp_path)})
    assert r.exit_code == 0, r.output
    table, _, sources = r.stdout.partition("scores as their authors published them:")
    lines = table.rstrip("\n").splitlines()
    assert max(map(len, lines)) <= 80, table
    names = [*REGISTRY, "tiny"]
    firsts = [ln.split()[0] for ln in lines]
    assert all(n in firsts for n in names), table
    assert len(lines) <= 3 * len(names), f"{len(lines)} lines for {len(names)} models:\n{table}"
    assert all(ln.strip().startswith("https://") for ln in sources.strip().splitlines()), sources


@pytest.mark.parametrize("command", [["search"], ["eval"]])
def test_help_choices_wrap_between_words_at_80_columns(command: list[str]) -> None:
    r = runner.invoke(app, [*command, "--help"], env={"COLUMNS": "80"})
    assert r.exit_code == 0, r.output
    words = set(re.split(r"[\s|\[\](),;:.`]+", r.stdout))
    modes = set(get_args(ModeChoice))
    assert modes <= words, sorted(modes - words)
    # and no piece of one: "hybrid+t" and "ext" where "hybrid+text" broke
    pieces = {m[:i] for m in modes for i in range(3, len(m))} | {
        m[i:] for m in modes for i in range(1, len(m) - 2)
    }
    assert not (words & (pieces - modes)), sorted(words & (pieces - modes))


def test_the_top_line_names_every_family() -> None:
    r = runner.invoke(app, ["--help"], env={"COLUMNS": "80"})
    summary = " ".join(r.stdout.split("╭", 1)[0].split())  # the usage line and the summary
    assert all(p.name in summary for p in (*PROFILES, *RERANKER_PROFILES)), summary
    assert "docvec models list" in summary
