"""Which model made a collection: known by its files' contents, not their names; the sizes a model offers
come from the model; a collection's storage format counts; and a model's views die with it."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from docvec import (
    CollectionMismatchError,
    ConfigError,
    Embedder,
    EmbedSettings,
    Index,
    ReindexSpec,
    Settings,
)
from docvec._model._fingerprint import fingerprint
from docvec._model._gguf import read_gguf_info

from .helpers import TINY, docvec_env
from .processes import docvec, served


def _env(data: Path, model: Path) -> dict[str, str]:
    return docvec_env(data, model, max_pixels=TINY)


def _settings(data: Path, model: Path, **embed: object) -> Settings:
    return Settings(data_dir=data, model=str(model), embed=EmbedSettings(max_pixels=TINY, threads=1, **embed))  # type: ignore[arg-type]


# -- fingerprints --------------------------------------------------------------------------------------


def test_files_of_the_same_names_with_other_weights_have_other_fingerprints(
    tiny_dir: Path, tiny_other_dir: Path
) -> None:
    names = sorted(p.name for p in tiny_dir.glob("*.gguf"))
    assert names == sorted(p.name for p in tiny_other_dir.glob("*.gguf"))  # the same names...
    for name in names:
        mine, theirs = read_gguf_info(tiny_dir / name), read_gguf_info(tiny_other_dir / name)
        assert fingerprint(mine) == fingerprint(read_gguf_info(tiny_dir / name))  # stable
        assert fingerprint(mine) != fingerprint(theirs), name  # ...other weights


def test_one_changed_tensor_changes_the_fingerprint(tiny_dir: Path, tmp_path: Path) -> None:
    lm = next(p for p in tiny_dir.glob("tiny-*.gguf"))
    info = read_gguf_info(lm)
    copy = tmp_path / lm.name
    data = bytearray(lm.read_bytes())
    offset, size = info.tensors[len(info.tensors) // 2]  # one tensor in the middle of the file
    data[info.data_start + offset + size // 2] ^= 0xFF  # one byte of its middle sample
    copy.write_bytes(bytes(data))
    assert fingerprint(read_gguf_info(copy)) != fingerprint(info)


def test_search_with_another_model_of_the_same_names_is_refused(
    tmp_path: Path, documents: Path, tiny_dir: Path, tiny_other_dir: Path
) -> None:
    data = tmp_path / "data"
    with Index.open(_settings(data, tiny_dir)) as index:
        index.add([documents / "pysamples__smile.png"])
        recorded = index.versions()
    assert len(recorded) == 1
    with (
        Index.open(_settings(data, tiny_other_dir)) as other,
        pytest.raises(
            CollectionMismatchError,
            # named as the user named them, told apart by their contents (the files' names are the same)
            match=(
                rf"made with the model '{tiny_dir}': tiny-qwen25vl-F16.gguf \[[0-9a-f]+\] "
                rf"\(jina-embeddings-v4 family, 64-d\); the model setting names '{tiny_other_dir}': "
                rf"tiny-qwen25vl-F16.gguf \[[0-9a-f]+\].*"
                rf"Unset the model setting \(DOCVEC_MODEL.*or set it to '{tiny_dir}'; to move the collection "
                rf"to '{tiny_other_dir}' instead: `docvec reindex --model {tiny_other_dir}`\.$"
            ),
        ),
    ):
        other.search("a smiling face", 1)
    # the command line says the same, in one line
    r = docvec("search", "a smiling face", "-m", str(tiny_other_dir), env=_env(data, tiny_dir))
    assert r.returncode == 2 and f"made with the model '{tiny_dir}'" in r.stderr, r.stderr
    with (
        Index.open(_settings(data, tiny_other_dir)) as other,
        pytest.raises(CollectionMismatchError, match=r"^collection 'docvec' at .* holds vectors of"),
    ):
        other.add([documents / "pysamples__grayscale-image.pdf"])  # named as users know it, not docvec.v1


def test_reindex_to_another_model_of_the_same_names_rebuilds(
    tmp_path: Path, documents: Path, tiny_dir: Path, tiny_other_dir: Path
) -> None:
    data = tmp_path / "data"
    env = _env(data, tiny_dir)
    assert docvec("ingest", str(documents / "pysamples__smile.png"), env=env).returncode == 0
    r = docvec("reindex", "--model", str(tiny_other_dir), "--json", env=env)
    assert r.returncode == 0, r.stderr
    made = json.loads(r.stdout)
    assert made["switched"] and made["pages_embedded"] == 1, made
    # this shell's DOCVEC_MODEL still names the old model: the command says what to do about it
    said = " ".join(r.stderr.split())
    assert f"still names '{tiny_dir}'" in said and f"set DOCVEC_MODEL={tiny_other_dir}" in said, said
    assert "unset DOCVEC_MODEL" in said
    # the same again: now it was made with these files, and nothing is rebuilt
    again = json.loads(docvec("reindex", "--model", str(tiny_other_dir), "--json", env=env).stdout)
    assert not again["switched"] and "already" in again["note"]
    # and through a running server (which opens the collection with the model it records), back to the
    # first model
    recorded = {k: v for k, v in env.items() if k != "DOCVEC_MODEL"}
    with served(recorded, tmp_path / "serve.log"):
        r = docvec("reindex", "--model", str(tiny_dir), "--json", env=env)
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["switched"]
        assert "sending this to http://127.0.0.1" in r.stderr


# -- the sizes a model offers -------------------------------------------------------------------------


def test_the_tiny_model_offers_its_own_sizes(tmp_path: Path, documents: Path, tiny_dir: Path) -> None:
    with Embedder.open(tiny_dir, EmbedSettings(threads=1)) as emb:
        assert emb.profile.dims(emb.hidden_size) == (4, 8, 16, 32, 64)
        assert emb.embed_queries(["x"], dim=16).shape == (1, 16)
        with pytest.raises(ConfigError, match=r"dim must be one of 4, 8, 16, 32, 64 .*64 wide.*not 512"):
            emb.embed_queries(["x"], dim=512)
    env = _env(tmp_path / "data", tiny_dir)
    assert docvec("ingest", str(documents / "pysamples__smile.png"), env=env).returncode == 0
    r = docvec("reindex", "--dim", "512", env=env)
    assert r.returncode == 2 and "dim must be one of 4, 8, 16, 32, 64" in r.stderr, r.stderr
    r = docvec("reindex", "--dim", "32", "--json", env=env)
    assert r.returncode == 0 and json.loads(r.stdout)["switched"], r.stderr
    r = docvec("collections", "list", "--json", env=env)
    assert [v["dim"] for v in json.loads(r.stdout) if v["live"]] == [32]


# -- the storage format ------------------------------------------------------------------------------


def test_a_collection_of_an_older_format_is_rebuilt_with_unchanged_settings(
    tmp_path: Path, documents: Path, tiny_dir: Path
) -> None:
    settings = _settings(tmp_path / "data", tiny_dir).model_copy(update={"multivector": True})
    with Index.open(settings) as index:
        index.add([documents / "pysamples__smile.png"])
        refused = index.reindex()
        assert not refused.switched and "already" in str(refused.note)
        # the record of a version made before docvec recorded formats (multi-vector: no int8 token copy)
        store = index._store
        live = store.live("docvec")
        assert live is not None
        record = store.record(live)
        assert record is not None and record["store_format"] == 3
        store.set_record(live, {k: v for k, v in record.items() if k != "store_format"})
        rebuilt = index.reindex()
        # the vectors are provably what this model makes: carried into the new layout, none embedded again
        assert rebuilt.switched and (rebuilt.pages_embedded, rebuilt.pages_carried) == (0, 1)
        assert rebuilt.vanished == []
        new = store.record(rebuilt.new_version or "")
        assert new is not None and new["store_format"] == 3


# -- a model and its views -----------------------------------------------------------------------------


def test_a_view_dies_with_its_model(tiny_dir: Path) -> None:
    # in a process of its own: without the fix, the view's call ends that process with SIGSEGV
    code = (
        "import sys\n"
        "from docvec import Embedder, EmbedSettings, ModelError\n"
        f"emb = Embedder.open({str(tiny_dir)!r}, EmbedSettings(threads=1))\n"
        "view = emb.with_dim(32)\n"
        "assert view.embed_queries(['x']).shape == (1, 32)\n"
        "emb.close()\n"
        "calls = (lambda: view.embed_queries(['x']), lambda: view.text_states('x'))\n"
        "for call in calls:\n"
        "    try:\n"
        "        call()\n"
        "    except ModelError as e:\n"
        "        assert 'was closed' in str(e), e\n"
        "    else:\n"
        "        sys.exit('no ModelError')\n"
        "view.close()\n"
        "print('ok')\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", (r.returncode, r.stderr[-2000:])


def test_searches_during_a_model_swap_finish_or_retry(
    tmp_path: Path, documents: Path, tiny_dir: Path, tiny_other_dir: Path
) -> None:
    # a collection at a truncated size (the index's model is a view), reindexed to another model while
    # threads search it: every search is answered, by the old model or the new one
    with Index.open(_settings(tmp_path / "data", tiny_dir)) as index:
        index.add([documents / "pysamples__smile.png", documents / "pysamples__minimal-document.pdf"])
        assert index.reindex(ReindexSpec(dim=32)).switched
        assert index.embedder.is_view  # the 64-d model, giving 32-d vectors
        errors: list[BaseException] = []
        answered: list[int] = []
        stop = threading.Event()

        def keep_searching() -> None:
            while not stop.is_set():
                try:
                    answered.append(len(index.search("a smiling face", 2)))
                except BaseException as e:
                    errors.append(e)

        threads = [threading.Thread(target=keep_searching) for _ in range(2)]
        for t in threads:
            t.start()
        try:
            made = index.reindex(ReindexSpec(model=str(tiny_other_dir)))
            after = len(answered)
            while len(answered) < after + 4 and not errors:  # searches on the new model too
                threading.Event().wait(0.05)
        finally:
            stop.set()
            for t in threads:
                t.join(timeout=60)
        assert made.switched and not errors, errors[:3]
        assert answered and set(answered) == {2}
        assert index.embedder.files.language_model.parent == tiny_other_dir and index.embedder.dim == 32
