"""The `docvec` command line, run as users run it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from pydantic import TypeAdapter
from typer.testing import CliRunner

from docvec import Embedder, ModelFiles
from docvec._cli import app
from docvec._model._registry import REGISTRY
from docvec._records import EmbeddingRecord

from .fakehub import fill_cache
from .helpers import page_image

runner = CliRunner()


def _docvec(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The installed console script in a fresh process."""
    exe = Path(sys.executable).with_name("docvec")
    return subprocess.run(
        [str(exe), *args], capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=300
    )


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
    args = ["embed", "--model", str(model_dir), "-q", "invoice total", "-p", "a passage", "-i", str(img)]
    r = runner.invoke(app, [*args, "--json"])
    assert r.exit_code == 0, r.output
    rows = TypeAdapter(list[EmbeddingRecord]).validate_json(r.stdout)
    assert [(x.kind, x.input) for x in rows] == [
        ("query", "invoice total"),
        ("passage", "a passage"),
        ("image", str(img)),
    ]
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
    r = _docvec("models", "pull", "jina-v4", env={"HF_HUB_CACHE": str(tmp_path), "HF_HUB_OFFLINE": "1"})
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
    pulled = _docvec("models", "pull", "jina-v4", "--no-head", env=env)  # the GGUFs only, offline
    assert pulled.returncode == 0, pulled.stderr
    assert m.lm_files[m.default_quant] in pulled.stdout.replace("\n", "")
    listed = _docvec("models", "list", env=env)
    assert listed.returncode == 0 and re.search(r"jina-v4 .*│ Q8_0 ", listed.stdout), listed.stdout
    out = _docvec("embed", "-q", "hello", "--json", env={**env, "DOCVEC_MODEL": "jina-v4"})
    assert out.returncode == 0, out.stderr
    assert len(json.loads(out.stdout)[0]["vector"]) == 64


def test_demo_indexes_the_samples_and_searches(
    tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {"DOCVEC_DATA_DIR": str(tmp_path / "data")}
    r = runner.invoke(app, ["demo", "--model-dir", str(tmp_path / "tiny")], env=env)
    assert r.exit_code == 0, r.output
    out = " ".join(r.stdout.split())
    assert "indexed 3 documents (4 pages)" in out and "total amount due on the invoice" in out
    assert "weights are random" in out and out.count(".pdf") + out.count(".png") >= 3
    assert "docvec models pull jina-v4" in out  # a real model to try: the default one
    # the data folder named in .env, as any other setting there: the same index, not the cache's demo one
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text(f"DOCVEC_DATA_DIR={tmp_path / 'data'}\n")
    again = runner.invoke(app, ["demo", "--model-dir", str(tmp_path / "tiny")], env={"DOCVEC_DATA_DIR": None})
    assert again.exit_code == 0, again.output
    said = " ".join(again.stdout.split())
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
