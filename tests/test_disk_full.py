"""A disk that fills up under docvec: a clear error naming the folder and the room, the run's partial
report, nothing lost, and no SIGBUS (the embedded store's files are memory-mapped: touching a page of one
on a full disk kills the process); and reading goes on on the full disk.

The real tests run on a small tmpfs they mount (as root, as CI runs); where mounting is not allowed they
are skipped, saying so, and the injected tests below still run everywhere: they make the free space a
disk reports small, which drives the same checks. What could kill a process with SIGBUS runs in a process
of its own, never in pytest's.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from docvec import DiskFullError, Index, IngestReport, Settings
from docvec._store import Dense, Point, open_store, point_id

from .helpers import SMALL, docvec_env, index_settings, page_image
from .processes import DOCVEC

MB = 1 << 20


@pytest.fixture()
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 192 MB tmpfs: the worst case of a full disk, since a mapping that only reads a file's holes
    takes their room there too."""
    folder = tmp_path / "disk"
    folder.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=192m", "tmpfs", str(folder)], capture_output=True)
    if r.returncode != 0:
        pytest.skip(
            f"cannot mount a tmpfs here ({r.stderr.decode().strip()}): the injected tests cover the checks"
        )
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def _fill(folder: Path, leave: int) -> Path:
    """Another program's file, grown until the disk has ``leave`` bytes free (or less; 0: to the last
    byte)."""
    filler = folder / "filler"
    with open(filler, "ab", buffering=0) as f:
        while (free := shutil.disk_usage(folder).free) > leave:
            try:
                f.write(b"\0" * min(MB, free - leave))
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    raise
                break
    return filler


def _env(data: Path, tiny_dir: Path, reserve_mb: int = 0) -> dict[str, str]:
    return {
        **os.environ,
        **docvec_env(data, tiny_dir, max_pixels=SMALL, threads=2),
        # 0: only the store's own growth steps are kept free, the tightest case
        "DOCVEC_STORE_RESERVE_MB": str(reserve_mb),
    }


def _ingest_while_the_disk_fills(
    tmp_path: Path, disk: Path, env: dict[str, str], *, after: str, leave: int
) -> tuple[int, str, str, Path | None]:
    """`docvec ingest` of eight page images in a process of its own; once it reports ``after``
    ("progress: N/8"), another program fills ``disk`` until ``leave`` bytes are free. Its exit code, what
    it printed on stdout and stderr, and that program's file (None if the progress never came)."""
    docs = tmp_path / "docs"
    docs.mkdir()
    for seed in range(8):
        page_image(400, 560, seed=seed).save(docs / f"page{seed}.png")
    proc = subprocess.Popen(
        [DOCVEC, "ingest", str(docs), "--progress-every", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stderr is not None
    filler = None
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if proc.stderr.readline().startswith(after):
            filler = _fill(disk, leave=leave)
            break
    out, errs = proc.communicate(timeout=300)
    return proc.returncode, out, errs, filler


def _search(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [DOCVEC, "search", "x", *args], capture_output=True, text=True, env=env, timeout=300
    )


def test_a_disk_filling_up_mid_run_stops_it_cleanly_and_a_rerun_finishes(
    small_disk: Path, tmp_path: Path, tiny_dir: Path
) -> None:
    data = small_disk / "data"
    env = _env(data, tiny_dir, reserve_mb=30)
    # another program fills the disk once the first page is in: under the reserve and a growth step of the
    # store
    code, out, errs, filler = _ingest_while_the_disk_fills(
        tmp_path, small_disk, env, after="progress: 1/8", leave=50 * MB
    )
    assert code == 2, (out, errs[-3000:])  # an error, not SIGBUS (-7) or a traceback
    assert "Traceback" not in errs
    assert f"not enough free space in {data}" in errs and "docvec keeps 30 MB free" in errs, errs[-2000:]
    stopped = next(line for line in out.splitlines() if line.startswith("stopped: "))
    assert stopped.startswith("stopped: indexed ") and not stopped.startswith("stopped: indexed 0 ")

    # reading takes no room: on the full disk, the search and the listing answer with what was indexed
    indexed = int(stopped.split()[2])
    r = _search(env, "-k", "8", "--json")
    assert r.returncode == 0 and r.stdout.count('"doc_id"') == indexed, r.stderr[-2000:]
    r = subprocess.run([DOCVEC, "documents", "--json"], capture_output=True, text=True, env=env)
    assert r.returncode == 0 and r.stdout.count('"doc_id"') == indexed, r.stderr[-2000:]

    assert filler is not None
    filler.unlink()  # room again: the same command finishes the job, and nothing before was lost
    r = subprocess.run(
        [DOCVEC, "ingest", str(tmp_path / "docs"), "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    again = IngestReport.model_validate_json(r.stdout)
    assert again.documents_skipped >= 1 and again.documents_indexed + again.documents_skipped == 8
    r = _search(env, "-k", "8", "--json")
    assert r.returncode == 0 and r.stdout.count('"doc_id"') == 8, r.stderr[-2000:]


def test_a_disk_filled_to_the_last_byte_mid_run_keeps_every_document_the_run_reported(
    small_disk: Path, tmp_path: Path, tiny_dir: Path
) -> None:
    data = small_disk / "data"
    env = _env(data, tiny_dir)
    # with no reserve, another program takes every byte left
    code, out, errs, filler = _ingest_while_the_disk_fills(
        tmp_path, small_disk, env, after="progress: 2/8", leave=0
    )
    # an error that says why, not SIGBUS (-7) when the store is closed, nor qdrant-edge's own words
    assert code == 2, (out, errs[-3000:])
    assert "Traceback" not in errs
    error = next(line for line in errs.splitlines() if line.startswith("error: "))
    assert error.startswith(f"error: not enough free space in {data}"), errs[-2000:]
    stopped = next(line for line in out.splitlines() if line.startswith("stopped: "))
    indexed = int(stopped.split()[2])
    assert indexed >= 2, stopped

    # not a byte left: a reader cannot load the store (qdrant-edge rewrites a file as it loads), and
    # says so without crashing
    _fill(small_disk, leave=0)
    r = _search(env)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert f"not enough free space in {data}" in r.stderr, r.stderr[-2000:]

    assert filler is not None
    filler.unlink()  # room again: every document the run reported indexed is there and found
    r = _search(env, "-k", "8", "--json")
    assert r.returncode == 0 and r.stdout.count('"doc_id"') == indexed, r.stderr[-2000:]


def _python(code: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a Python of its own (a SIGBUS there fails the test instead of killing pytest)."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120
    )


_STORE = """
    import errno, shutil
    import numpy as np
    from pathlib import Path
    from docvec import DiskFullError
    from docvec._store import Dense, Point, open_store, point_id

    disk = Path({disk!r})
    store_dir = disk / "store"

    def points(first, n):
        rng = np.random.default_rng(first)
        return [
            Point(point_id(i), rng.random(64, dtype=np.float32), {{"doc_id": f"d{{i}}"}})
            for i in range(first, first + n)
        ]

    def fill_up():  # another program takes the last byte
        with open(disk / "filler", "ab", buffering=0) as f:
            while shutil.disk_usage(disk).free:
                try:
                    f.write(bytes(min(1 << 20, shutil.disk_usage(disk).free)))
                except OSError as e:
                    assert e.errno == errno.ENOSPC
                    break
"""


def _store_script(disk: Path, body: str) -> str:
    return textwrap.dedent(_STORE.format(disk=str(disk))) + textwrap.dedent(body)


_READ = """
    try:
        with open_store(path=store_dir) as store:
            print(store.count("c"), len(store.search("c", Dense(np.ones(64)), 5)))
    except DiskFullError as e:
        print("refused:", e)
"""


def test_a_store_is_read_on_a_full_disk_unless_loading_it_takes_room(small_disk: Path) -> None:
    with open_store(path=small_disk / "store") as store:
        store.ensure_collection("c", 64, text=True)
        store.upsert(
            "c", [Point(point_id(i), np.ones(64, np.float32), {"doc_id": f"d{i}"}) for i in range(40)]
        )
    # a run's first vectors went to a new chunk, mostly holes, which loading reads whole: on tmpfs, that
    # takes their room, which is not there (tried in a child process, the reader is told, not killed)
    filler = _fill(small_disk, leave=2 * MB)
    r = _python(_store_script(small_disk, _READ))
    assert r.returncode == 0, r.stderr[-3000:]
    refused = f"refused: not enough free space in {small_disk / 'store'} to open collection 'c.v1'"
    assert r.stdout.startswith(refused), r.stdout
    filler.unlink()

    with open_store(path=small_disk / "store") as store:  # loaded once with room: nothing is left to take
        assert store.count("c") == 40
    filler = _fill(small_disk, leave=2 * MB)
    r = _python(_store_script(small_disk, _READ))
    assert r.returncode == 0 and r.stdout.split() == ["40", "5"], (r.stdout, r.stderr[-3000:])
    filler.unlink()


def test_closing_a_store_on_a_full_disk_keeps_its_writes_for_the_next_open(small_disk: Path) -> None:
    r = _python(
        _store_script(
            small_disk,
            """
        store = open_store(path=store_dir)
        store.ensure_collection("c", 64)
        store.upsert("c", points(0, 200))  # acknowledged: in the write-ahead log, not written out yet
        fill_up()
        try:
            store.close()
        except DiskFullError as e:
            print("close:", e)
    """,
        )
    )
    assert r.returncode == 0, r.stderr[-3000:]  # not SIGBUS (-7) as the process ends
    assert r.stdout.startswith("close: not enough free space in"), r.stdout
    (small_disk / "filler").unlink()
    with open_store(path=small_disk / "store") as store:  # the next open replays what was not written out
        assert store.count("c") == 200


def _settings(data: Path, tiny_dir: Path) -> Settings:
    return index_settings(data, tiny_dir, store_reserve_mb=100)


def _report_free(monkeypatch: pytest.MonkeyPatch, free: int) -> None:
    """From now on, every disk docvec asks about has ``free`` bytes free (the injected disk-full)."""
    real = shutil.disk_usage

    def usage(path: object) -> object:
        total, used, _ = real(path)  # type: ignore[arg-type]
        return type(real(path))(total, used, free)  # type: ignore[arg-type]

    monkeypatch.setattr("docvec._fileio.shutil.disk_usage", usage)


def test_injected_full_disk_stops_an_ingest_with_its_partial_report(
    tmp_path: Path, tiny_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for seed in range(3):
        page_image(300, 400, seed=seed).save(docs / f"p{seed}.png")
    with Index.open(_settings(tmp_path / "data", tiny_dir)) as index:
        seen = []

        def progress(p: object) -> None:
            seen.append(p)
            if len(seen) == 3:  # the first document is in: the disk fills up
                _report_free(monkeypatch, 120 * MB)

        with pytest.raises(DiskFullError) as info:
            index.add([docs], progress=progress)
        e = info.value
        assert e.partial.documents_indexed == 1 and e.free == 120 * MB and e.needed > 0
        assert str(tmp_path / "data") in str(e) and "DOCVEC_STORE_RESERVE_MB" in str(e)
        monkeypatch.undo()  # room again
        assert index.count() == 1  # what was written is there
        again = index.add([docs])
        assert (again.documents_skipped, again.documents_indexed) == (1, 2)


def test_a_full_disk_does_not_stop_a_store_from_opening(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the owner record is a courtesy to the next process: it may not be writable on a full disk
    with open_store(path=tmp_path / "s") as store:
        store.ensure_collection("c", 4)
        store.upsert("c", [Point(point_id(1), np.ones(4, np.float32), {"doc_id": "d"})])

    def no_room(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("docvec._store._edge.write_json_atomic", no_room)
    with open_store(path=tmp_path / "s") as store:
        assert store.count("c") == 1 and store.search("c", Dense(np.ones(4)), 1)[0].payload == {"doc_id": "d"}


def test_no_room_for_a_page_image_is_a_disk_full_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from docvec._store._pages import PageStore

    store = PageStore(tmp_path / "pages", reserve=0)
    real_save = type(page_image(10, 10)).save

    def enospc(self: object, fp: object, *args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(type(page_image(10, 10)), "save", enospc)
    with pytest.raises(DiskFullError, match=r"the disk of the page store .* is full"):
        store.put(page_image(50, 60))
    assert not [p for p in (tmp_path / "pages").rglob("*") if p.is_file()]  # no half-written file
    monkeypatch.setattr(type(page_image(10, 10)), "save", real_save)
    assert (tmp_path / "pages" / store.put(page_image(50, 60)).image).is_file()
