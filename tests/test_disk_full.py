"""A disk that fills up under docvec: a clear error naming the folder and the room, the run's partial
report, nothing lost, and no SIGBUS (the embedded store's files are memory-mapped: touching a page of one
on a full disk kills the process).

The real test runs on a small tmpfs it mounts (as root, as CI runs); where mounting is not allowed it is
skipped, saying so, and the injected tests below still run everywhere: they make the free space a disk
reports small, which drives the same checks.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from docvec import DiskFullError, EmbedSettings, Index, IngestReport, RenderSettings, Settings
from docvec._store import Point, open_store, point_id

from .helpers import docvec_env, page_image

SMALL = 28 * 28 * 64
MB = 1 << 20


@pytest.fixture()
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 192 MB tmpfs (no sparse files: every byte a file maps is taken at once, as on a full disk)."""
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
    """Write a filler file until the disk has ``leave`` bytes free (or less)."""
    filler = folder / "filler"
    block = b"\0" * MB
    with open(filler, "ab") as f:
        while shutil.disk_usage(folder).free > leave:
            try:
                f.write(block)
                f.flush()
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    raise
                break
    return filler


def _env(data: Path, tiny_dir: Path) -> dict[str, str]:
    return {
        **os.environ,
        **docvec_env(data, tiny_dir, max_pixels=SMALL, threads=2),
        "DOCVEC_STORE_RESERVE_MB": "0",  # only the store's own growth steps are kept free: the tightest case
    }


def test_a_disk_filling_up_mid_run_stops_it_cleanly_and_a_rerun_finishes(
    small_disk: Path, tmp_path: Path, tiny_dir: Path
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for seed in range(8):
        page_image(400, 560, seed=seed).save(docs / f"page{seed}.png")
    data = small_disk / "data"
    exe = Path(sys.executable).with_name("docvec")
    env = _env(data, tiny_dir)
    proc = subprocess.Popen(
        [str(exe), "ingest", str(docs), "--progress-every", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stderr is not None
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:  # another program fills the disk once the first page is in
        if proc.stderr.readline().startswith("progress: 1/8"):
            filler = _fill(small_disk, leave=8 * MB)
            break
    out, errs = proc.communicate(timeout=300)
    assert proc.returncode == 2, (out, errs[-3000:])  # an error, not SIGBUS (-7) or a traceback
    assert "Traceback" not in errs
    assert f"not enough free space in {data}" in errs and "MB is free" in errs, errs[-2000:]
    stopped = next(line for line in out.splitlines() if line.startswith("stopped: "))
    assert stopped.startswith("stopped: indexed ") and not stopped.startswith("stopped: indexed 0 ")

    # too full to open the collection (loading it maps working files): refused, not a crash
    r = subprocess.run([str(exe), "search", "x"], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 2 and "not enough free space" in r.stderr and "Traceback" not in r.stderr

    filler.unlink()  # room again: the same command finishes the job, and nothing before was lost
    r = subprocess.run(
        [str(exe), "ingest", str(docs), "--json"], capture_output=True, text=True, env=env, timeout=600
    )
    assert r.returncode == 0, r.stderr[-2000:]
    again = IngestReport.model_validate_json(r.stdout)
    assert again.documents_skipped >= 1 and again.documents_indexed + again.documents_skipped == 8
    r = subprocess.run(
        [str(exe), "search", "x", "-k", "8", "--json"], capture_output=True, text=True, env=env
    )
    assert r.returncode == 0 and r.stdout.count('"doc_id"') == 8, r.stderr[-2000:]


def _settings(data: Path, tiny_dir: Path) -> Settings:
    return Settings(
        data_dir=data,
        model=str(tiny_dir),
        embed=EmbedSettings(max_pixels=SMALL, threads=2),
        render=RenderSettings(workers=1),
        store_reserve_mb=100,
    )


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
        assert store.count("c") == 1 and store.search("c", np.ones(4), 1)[0].payload == {"doc_id": "d"}


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
