"""The search page in a real browser: Debian's chromium, headless, on a served index.

`make test` installs chromium when it is missing; without it these tests fail rather than pass unseen.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

import pytest
import uvicorn

from docvec import EmbedSettings, Index, RenderSettings, Settings
from docvec.api import create_app

from .test_api import SMALL, _free_port

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.usefixtures("require_chromium")


@pytest.fixture(scope="module")
def require_chromium() -> None:
    if CHROMIUM is None:
        pytest.fail("chromium is not installed: run `make browser` (Debian's chromium package)")


@pytest.fixture(scope="module")
def server(documents: Path, tiny_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    settings = Settings(
        data_dir=tmp_path_factory.mktemp("web-data"),
        model=str(tiny_dir),
        embed=EmbedSettings(max_pixels=SMALL, threads=2),
        render=RenderSettings(workers=1, timeout_s=120),
    )
    with Index.open(settings) as ix:
        assert ix.add([documents / "pysamples__minimal-document.pdf", documents / "pysamples__smile.png"]).ok
    port = _free_port()
    srv = uvicorn.Server(uvicorn.Config(create_app(settings), port=port, log_level="warning"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not srv.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the server did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}/"
    srv.should_exit = True
    thread.join(30)


def _dom(url: str, profile: Path) -> str:
    """The page's DOM after its scripts ran (virtual time waits for the fetches)."""
    assert CHROMIUM is not None
    run = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",  # tests run as root in containers
            "--disable-gpu",
            f"--user-data-dir={profile}",
            "--virtual-time-budget=15000",
            "--dump-dom",
            url,
        ],
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    return run.stdout


def test_search_page_shows_thumbnails(server: str, tmp_path: Path) -> None:
    dom = _dom(server + "?" + urlencode({"q": "a smiling face", "k": 2}), tmp_path / "profile")
    figures = re.findall(r"<figure>.*?</figure>", dom, re.S)
    assert len(figures) == 2, dom[-3000:]
    names = set()
    for fig in figures:
        assert re.search(r'<img[^>]*src="blob:', fig), fig  # the thumbnail was fetched and shown
        assert re.search(r"page \d+ · score -?\d\.\d{3}", fig)
        assert 'data-full="documents/' in fig and "/image" in fig
        names.update(re.findall(r'class="name"[^>]*>([^<]+)<', fig))
    assert names <= {"pysamples__minimal-document.pdf", "pysamples__smile.png"} and names
    assert "2 pages" in dom


def test_search_page_without_results_and_errors(server: str, tmp_path: Path) -> None:
    dom = _dom(server + "?" + urlencode({"q": "x" * 1001}), tmp_path / "profile")
    assert "<figure>" not in dom
    assert 'class="error"' in dom  # the API's 422 message is shown


def test_screenshot_shows_the_results(server: str, tmp_path: Path) -> None:
    """What a person sees: the results grid is drawn (thumbnails are not blank), the empty page is not."""
    from PIL import Image, ImageStat

    assert CHROMIUM is not None
    shots = {}
    for name, query in (("results", {"q": "a smiling face", "k": 2}), ("empty", {})):
        out = tmp_path / f"{name}.png"
        run = subprocess.run(
            [
                CHROMIUM,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                f"--user-data-dir={tmp_path / name}",
                "--virtual-time-budget=15000",
                "--window-size=1200,900",
                "--hide-scrollbars",
                f"--screenshot={out}",
                server + ("?" + urlencode(query) if query else ""),
            ],
            capture_output=True,
            text=True,
            timeout=90,
        )
        assert run.returncode == 0 and out.is_file(), run.stderr[-2000:]
        shots[name] = Image.open(out).convert("L")
    # below the search box: the results grid holds thumbnails (varied pixels), the empty page does not
    lower = (0, 200, 1200, 900)
    varied = ImageStat.Stat(shots["results"].crop(lower)).stddev[0]
    blank = ImageStat.Stat(shots["empty"].crop(lower)).stddev[0]
    assert varied > 10 and varied > 3 * blank, (varied, blank)
