"""The search page in a real browser: Debian's chromium, headless, driven by Playwright, on a served index.

`make test` installs chromium when it is missing; without it these tests fail rather than pass unseen.
"""

from __future__ import annotations

import functools
import http.server
import io
import re
import shutil
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from PIL import Image, ImageStat, PngImagePlugin
from playwright.sync_api import Browser, Page, expect, sync_playwright

from docvec import EmbedSettings, Index, RenderSettings, Settings
from docvec.api import create_app

from .helpers import page_image
from .processes import free_port

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# what a machine with no network and a fresh profile needs (see the env notes: background fetches fail)
CHROMIUM_ARGS = [
    "--no-sandbox",  # tests run as root in containers
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]

SMALL = 28 * 28 * 64  # pages of 64 image tokens: fast on 2 cores


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if CHROMIUM is None:
        pytest.fail("chromium is not installed: run `make browser` (Debian's chromium package)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


def _settings(data_dir: Path, tiny_dir: Path, **extra: Any) -> Settings:
    return Settings(
        data_dir=data_dir,
        model=str(tiny_dir),
        embed=EmbedSettings(max_pixels=SMALL, threads=2),
        render=RenderSettings(workers=1, timeout_s=120),
        **extra,
    )


@contextmanager
def _serve(settings: Settings) -> Iterator[str]:
    port = free_port()
    srv = uvicorn.Server(uvicorn.Config(create_app(settings), port=port, log_level="warning"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not srv.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the server did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        srv.should_exit = True
        thread.join(30)


@pytest.fixture(scope="module")
def server(documents: Path, tiny_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    settings = _settings(tmp_path_factory.mktemp("web-data"), tiny_dir)
    with Index.open(settings) as ix:
        assert ix.add([documents / "pysamples__minimal-document.pdf"], tags=["team=legal"]).ok
        assert ix.add([documents / "pysamples__smile.png"], tags=["team=art"]).ok
    with _serve(settings) as url:
        yield url


@pytest.fixture()
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    yield context.new_page()
    context.close()


def _png(seed: int, size: tuple[int, int] = (300, 400)) -> bytes:
    buf = io.BytesIO()
    page_image(*size, seed=seed).save(buf, "PNG")
    return buf.getvalue()


def test_hits_show_thumbnails_names_and_links(server: str, page: Page) -> None:
    page.goto(server + "?q=a+smiling+face&k=2")
    figures = page.locator("figure")
    expect(figures).to_have_count(2)
    expect(page.locator("#status")).to_have_text("2 pages")
    for i in range(2):
        expect(figures.nth(i).locator("img")).to_have_attribute("src", re.compile("/thumbnail$"))
    names = sorted(figures.locator(".name").all_inner_texts())
    assert names == ["pysamples__minimal-document.pdf", "pysamples__smile.png"]
    assert set(figures.locator(".tags").all_inner_texts()) == {"team=legal", "team=art"}
    # the name opens the original file in a tab of its own, the page link the page image
    with page.expect_popup() as popup:
        figures.filter(has_text="pysamples__smile.png").locator(".name").click()
    assert re.search(r"/documents/[0-9a-f]{32}/file$", popup.value.url), popup.value.url
    figures.first.get_by_text("page image").click()
    expect(page.locator("#lightbox")).to_have_class("open")
    expect(page.locator("#lightbox img")).to_have_attribute("src", re.compile("/image$"))


def test_a_hit_shows_its_snippet_with_the_query_words_marked(server: str, page: Page, tmp_path: Path) -> None:
    page.goto(server + "?q=dolor+magna&k=2")
    figures = page.locator("figure")
    expect(figures).to_have_count(2)
    text = figures.filter(has_text="pysamples__minimal-document.pdf")
    marks = text.locator(".snippet mark")
    expect(marks.first).to_be_visible()
    marked = {m.lower() for m in marks.all_inner_texts()}
    # the words and the words of the same stem (dolore, dolores): as the keyword search matches them
    assert {"dolor", "magna"} <= marked and all(m.startswith(("dolor", "magna")) for m in marked), marked
    assert "ipsum dolor sit amet" in text.locator(".snippet").inner_text()
    # the image has no text: no snippet
    expect(figures.filter(has_text="pysamples__smile.png").locator(".snippet")).to_have_count(0)
    page.screenshot(path=str(tmp_path / "snippet.png"))


def test_filters_narrow_the_search(server: str, page: Page) -> None:
    page.goto(server)
    expect(page.locator("#doc option")).to_have_count(3)  # "all" and the two documents, by name
    page.locator("#doc").select_option(label="pysamples__smile.png")
    page.locator("#q").fill("anything")
    page.locator("#k").fill("10")
    page.get_by_role("button", name="Search").click()
    expect(page.locator("figure")).to_have_count(1)
    expect(page.locator("figure .name")).to_have_text("pysamples__smile.png")
    page.locator("#doc").select_option(value="")
    page.locator("#tag").fill("team=legal")
    page.get_by_role("button", name="Search").click()
    expect(page.locator("figure .name")).to_have_text("pysamples__minimal-document.pdf")
    page.locator("#tag").fill("team=nobody")
    page.get_by_role("button", name="Search").click()
    expect(page.locator("#status")).to_have_text("Nothing found.")
    expect(page.locator("figure")).to_have_count(0)


def test_a_too_long_query_shows_the_servers_reason(server: str, page: Page) -> None:
    page.goto(server + "?q=" + "x" * 1001)
    expect(page.locator("#status")).to_have_class("error")
    expect(page.locator("#status")).to_contain_text("query")


def test_drop_a_file_to_upload_it_then_delete_it(server: str, page: Page) -> None:
    page.goto(server)
    expect(page.locator("#docs li")).to_have_count(2)
    # a drop, as a person's drag from the desktop arrives: a DataTransfer holding the file
    data = list(_png(21))
    transfer = page.evaluate_handle(
        """(bytes) => {
             const t = new DataTransfer();
             t.items.add(new File([new Uint8Array(bytes)], "dropped scan.png", {type: "image/png"}));
             return t;
           }""",
        data,
    )
    page.dispatch_event("#drop", "drop", {"dataTransfer": transfer})
    expect(page.locator("#uploads")).to_contain_text("dropped scan.png: indexed, 1 pages")
    expect(page.locator("#docs li")).to_have_count(3)
    row = page.locator("#docs li", has_text="dropped scan.png")
    expect(row).to_contain_text("1 page")
    page.once("dialog", lambda dialog: dialog.accept())
    row.get_by_role("button", name="delete").click()
    expect(page.locator("#docs li")).to_have_count(2)
    expect(page.locator("#status")).to_contain_text("Removed dropped scan.png (1 pages)")


def test_a_large_upload_follows_its_job(tiny_dir: Path, tmp_path: Path, page: Page) -> None:
    # every upload over 0 MB goes to a job: the page follows it to the end
    with _serve(_settings(tmp_path / "data", tiny_dir, sync_upload_mb=0)) as url:
        page.goto(url)
        expect(page.locator(".hint")).to_contain_text("Nothing is indexed yet")  # the empty state
        page.locator("#file").set_input_files(
            [{"name": "report.png", "mimeType": "image/png", "buffer": _png(22, (600, 800))}]
        )
        expect(page.locator("#uploads")).to_contain_text("report.png: indexed, 1 pages", timeout=60_000)
        expect(page.locator("#docs li")).to_have_count(1)
        expect(page.locator(".hint")).to_contain_text("1 documents are indexed")


def test_an_api_key_signs_the_page_in_and_no_script_can_read_it(
    tiny_dir: Path, tmp_path: Path, page: Page
) -> None:
    with _serve(_settings(tmp_path / "data", tiny_dir, api_key="s3cret")) as url:
        page.goto(url)
        expect(page.locator("#key")).to_be_visible()
        expect(page.locator("#status")).to_contain_text("needs an API key")
        page.locator("#key").fill("wrong")
        page.get_by_role("button", name="Sign in").click()
        expect(page.locator("#status")).to_contain_text("wrong key")
        page.locator("#key").fill("s3cret")
        page.get_by_role("button", name="Sign in").click()
        expect(page.locator("#status")).to_have_text("Signed in.")
        expect(page.locator("#key")).to_be_hidden()
        page.locator("#q").fill("anything")
        page.get_by_role("button", name="Search").click()
        expect(page.locator("#status")).to_have_text("Nothing found.")
        # the page keeps no key: its session is a cookie the page's scripts cannot read
        assert page.evaluate("[localStorage.length, sessionStorage.length, document.cookie]") == [0, 0, ""]
        assert any(c["httpOnly"] and c["sameSite"] == "Strict" for c in page.context.cookies())
        page.reload()  # the session lasts: no key asked again
        expect(page.get_by_role("button", name="Sign out")).to_be_visible()
        expect(page.locator("#key")).to_be_hidden()
        page.get_by_role("button", name="Sign out").click()
        expect(page.locator("#key")).to_be_visible()


def _stored_script_png() -> bytes:
    """The tester's reproduction: a valid PNG whose text chunk is a page with a script that, run in the
    server's origin, reads what a page can and acts on the server (gc, an operator's endpoint)."""
    script = (
        "<html><body><script>document.title='ran';"
        "fetch('/gc',{method:'POST'});fetch('/search?q=stolen-'+encodeURIComponent(document.cookie+localStorage.length))"
        "</script></body></html>"
    )
    info = PngImagePlugin.PngInfo()
    info.add_text("Comment", script)
    buf = io.BytesIO()
    page_image(64, 64, seed=5).save(buf, "PNG", pnginfo=info)
    return buf.getvalue()


def test_a_stored_file_named_html_runs_no_script(tiny_dir: Path, tmp_path: Path, browser: Browser) -> None:
    context = browser.new_context(viewport={"width": 1000, "height": 800})
    asked: list[str] = []
    context.on("request", lambda r: asked.append(f"{r.method} {r.url}"))
    page = context.new_page()
    try:
        with _serve(_settings(tmp_path / "data", tiny_dir)) as url:  # no key, from this machine's browser
            page.goto(url)
            page.locator("#file").set_input_files(
                [{"name": "x.html", "mimeType": "text/html", "buffer": _stored_script_png()}]
            )
            expect(page.locator("#uploads")).to_contain_text("x.html: indexed, 1 pages", timeout=60_000)
            with page.expect_popup() as opened:
                page.locator("#docs .name", has_text="x.html").click()
            shown = opened.value
            shown.wait_for_load_state()
            served = httpx.get(shown.url, timeout=30)  # what the tab was given: the image, by its bytes' type
            assert served.headers["content-type"] == "image/png", served.headers
            assert "sandbox" in served.headers["content-security-policy"]
            assert shown.title() != "ran"
            shown.screenshot(path=str(tmp_path / "file.png"))
            time.sleep(1)  # what the script would have sent, it would have sent by now
    finally:
        context.close()
    assert not [a for a in asked if a.startswith("POST") and a.endswith("/gc")], asked
    assert not [a for a in asked if "stolen-" in a], asked


def test_another_sites_page_cannot_upload(server: str, page: Page, tmp_path: Path) -> None:
    """A form on a page another server of this machine serves, posting a file to docvec as a browser lets
    any site do: refused, and nothing indexed."""
    before = httpx.get(server + "documents", timeout=30).json()["total"]
    site = tmp_path / "site"
    site.mkdir()
    (site / "index.html").write_text(
        f"""<form id=f method=post enctype=multipart/form-data action="{server}documents?wait=true">
        <input type=file name=file id=file></form>"""
    )
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as other:
        threading.Thread(target=other.serve_forever, daemon=True).start()
        page.goto(f"http://127.0.0.1:{other.server_address[1]}/index.html")
        page.locator("#file").set_input_files(
            [{"name": "a.png", "mimeType": "image/png", "buffer": _png(40)}]
        )
        with page.expect_navigation():
            page.evaluate("document.getElementById('f').submit()")
        assert "another site" in page.content()
        other.shutdown()
    assert httpx.get(server + "documents", timeout=30).json()["total"] == before


def test_screenshot_shows_the_results(server: str, page: Page, tmp_path: Path) -> None:
    """What a person sees: the results grid is drawn (thumbnails are not blank), the empty page is not."""
    shots = {}
    for name, query in (("results", "?q=a+smiling+face&k=2"), ("empty", "")):
        page.goto(server + query)
        if query:
            expect(page.locator("figure img[src$='/thumbnail']")).to_have_count(2)
            page.wait_for_function(
                "[...document.querySelectorAll('figure img')].every(i => i.complete && i.naturalWidth > 0)"
            )
        else:
            expect(page.locator(".hint")).to_be_visible()
        out = tmp_path / f"{name}.png"
        page.screenshot(path=str(out))
        shots[name] = Image.open(out).convert("L")
    # the results column under the search box: thumbnails (varied pixels) against the hint (mostly blank)
    results = (0, 200, 800, 900)
    varied = ImageStat.Stat(shots["results"].crop(results)).stddev[0]
    blank = ImageStat.Stat(shots["empty"].crop(results)).stddev[0]
    assert varied > 10 and varied > 2 * blank, (varied, blank)


def test_the_api_page_renders_with_no_request_leaving_the_server(server: str, page: Page) -> None:
    # Swagger UI comes from docvec's own process: a machine without a network sees it whole
    asked: list[str] = []
    page.on("request", lambda r: asked.append(r.url))
    page.goto(server + "docs")
    operations = page.locator(".swagger-ui .opblock")
    expect(operations.first).to_be_visible(timeout=30_000)
    assert operations.count() >= 16  # every operation is there
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("docvec")
    elsewhere = [u for u in asked if not u.startswith(server) and not u.startswith(("data:", "blob:"))]
    assert not elsewhere and any(u.endswith("swagger-ui-bundle.js") for u in asked), asked
