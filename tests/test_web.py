"""The search page in a real browser: Debian's chromium, headless, driven by Playwright (the session's
``browser``), on a served index; and its rerank switch, shown only by a server with a reranker, each
reranked hit showing its rerank score.

`make test` installs chromium when it is missing; without it these tests fail rather than pass unseen.
"""

from __future__ import annotations

import functools
import http.server
import io
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from PIL import Image, ImageStat, PngImagePlugin
from playwright.sync_api import Browser, Page, expect

from docvec import Index, Settings

from .helpers import index_settings, page_image
from .processes import serve_in_thread


def _indexed(settings: Settings, documents: Path) -> Settings:
    """``settings``' index holding a one-page PDF with text (team=legal) and an image (team=art)."""
    with Index.open(settings) as ix:
        assert ix.add([documents / "pysamples__minimal-document.pdf"], tags=["team=legal"]).ok
        assert ix.add([documents / "pysamples__smile.png"], tags=["team=art"]).ok
    return settings


@pytest.fixture(scope="module")
def server(documents: Path, tiny_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    settings = index_settings(tmp_path_factory.mktemp("web-data"), tiny_dir)
    with serve_in_thread(_indexed(settings, documents)) as url:
        yield url


@pytest.fixture(scope="module")
def rerank_server(
    documents: Path, tiny_dir: Path, reranker_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """A server with the tiny reranker, reranking nothing unless asked."""
    data = tmp_path_factory.mktemp("rerank-web-data")
    with serve_in_thread(
        _indexed(index_settings(data, tiny_dir, rerank_model=str(reranker_dir)), documents)
    ) as url:
        yield url


def _png(seed: int, size: tuple[int, int] = (300, 400)) -> bytes:
    buf = io.BytesIO()
    page_image(*size, seed=seed).save(buf, "PNG")
    return buf.getvalue()


def test_hits_show_thumbnails_names_and_links(server: str, page: Page) -> None:
    page.goto(server + "?q=a+smiling+face&k=2")
    figures = page.locator("figure")
    expect(figures).to_have_count(2)
    expect(page.locator("#status")).to_have_text("2 pages · dense+text")
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


def test_the_page_offers_the_collections_modes_and_says_what_a_score_means(
    server: str, page: Page, tmp_path: Path
) -> None:
    page.goto(server)
    # a single-vector collection with text: auto (the server's choice, named), the fused and plain modes
    options = page.locator("#mode option")
    expect(options).to_have_count(4)
    assert options.all_inner_texts() == ["auto (dense+text)", "dense+text", "dense", "text"]
    page.locator("#mode").select_option("text")
    page.locator("#q").fill("dolor magna")
    page.get_by_role("button", name="Search").click()
    # keywords only: the image, which has no text, is not found
    expect(page.locator("#status")).to_have_text("1 page · text")
    expect(page.locator("figure .score")).to_have_text(re.compile(r"^BM25 \d+\.\d{3}$"))
    expect(page.locator("#scoring")).to_contain_text("Score (BM25)")
    expect(page.locator("#scoring")).to_contain_text("no probability")
    assert parse_qs(urlsplit(page.url).query)["mode"] == ["text"]
    page.reload()  # the address bar holds the mode too
    expect(page.locator("#status")).to_have_text("1 page · text")
    expect(page.locator("#mode")).to_have_value("text")

    # the fused mode's score is a rank fusion, and the page says so, with its constant
    page.locator("#mode").select_option("")
    page.get_by_role("button", name="Search").click()
    expect(page.locator("#status")).to_have_text("2 pages · dense+text")
    scores = page.locator("figure .score")
    expect(scores.first).to_have_text(re.compile(r"^rank fusion \d\.\d{3}$"))
    assert "1/(1 + the page's place)" in (scores.first.get_attribute("title") or "")
    expect(page.locator("#scoring")).to_contain_text("0.5 is first in one ranking")
    assert "mode" not in parse_qs(urlsplit(page.url).query)
    for width in (1280, 420):
        page.set_viewport_size({"width": width, "height": 900})
        page.screenshot(path=str(tmp_path / f"modes-{width}.png"), full_page=True)
        # nothing wider than the window: the filters wrap
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"), width


def test_the_page_says_when_the_model_is_the_test_model_and_pages_have_no_text(
    server: str, tiny_dir: Path, tmp_path: Path, page: Page
) -> None:
    page.goto(server)
    expect(page.locator("#test-model")).to_contain_text("random")
    expect(page.locator("#no-text")).to_have_count(0)  # this collection keeps its pages' text
    settings = index_settings(tmp_path / "data", tiny_dir, text=False)
    with Index.open(settings) as ix:
        assert ix.add([page_image_file(tmp_path / "scan.png")]).ok
    with serve_in_thread(settings) as url:
        page.goto(url + "?q=anything")
        expect(page.locator("#status")).to_have_text("1 page · dense")
        expect(page.locator("#no-text")).to_contain_text("keeps no page text")
        expect(page.locator("#no-text")).to_contain_text("docvec reindex --text")
        expect(page.locator("#test-model")).to_be_visible()
        # no keyword or fused mode to offer
        assert page.locator("#mode option").all_inner_texts() == ["auto (dense)", "dense"]
        expect(page.locator("figure .score")).to_have_text(re.compile(r"^cosine -?\d\.\d{3}$"))
        for width in (1280, 420):
            page.set_viewport_size({"width": width, "height": 900})
            page.screenshot(path=str(tmp_path / f"notices-{width}.png"), full_page=True)
            assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"), width


def page_image_file(path: Path) -> Path:
    page_image(300, 400, seed=8).save(path)
    return path


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
    expect(page.locator("#uploads")).to_contain_text("dropped scan.png: indexed, 1 page")
    expect(page.locator("#docs li")).to_have_count(3)
    row = page.locator("#docs li", has_text="dropped scan.png")
    expect(row).to_contain_text("1 page")
    page.once("dialog", lambda dialog: dialog.accept())
    row.get_by_role("button", name="delete").click()
    expect(page.locator("#docs li")).to_have_count(2)
    expect(page.locator("#status")).to_contain_text("Removed dropped scan.png (1 page)")


def test_a_large_upload_follows_its_job(tiny_dir: Path, tmp_path: Path, page: Page) -> None:
    # every upload over 0 MB goes to a job: the page follows it to the end
    with serve_in_thread(index_settings(tmp_path / "data", tiny_dir, sync_upload_mb=0)) as url:
        page.goto(url)
        expect(page.locator(".hint")).to_contain_text("Nothing is indexed yet")  # the empty state
        page.locator("#file").set_input_files(
            [{"name": "report.png", "mimeType": "image/png", "buffer": _png(22, (600, 800))}]
        )
        expect(page.locator("#uploads")).to_contain_text("report.png: indexed, 1 page", timeout=60_000)
        expect(page.locator("#docs li")).to_have_count(1)
        expect(page.locator(".hint")).to_contain_text("1 documents are indexed")


def test_an_api_key_signs_the_page_in_and_no_script_can_read_it(
    tiny_dir: Path, tmp_path: Path, page: Page
) -> None:
    with serve_in_thread(index_settings(tmp_path / "data", tiny_dir, api_key="s3cret")) as url:
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
        with serve_in_thread(
            index_settings(tmp_path / "data", tiny_dir)
        ) as url:  # no key, from this machine's browser
            page.goto(url)
            page.locator("#file").set_input_files(
                [{"name": "x.html", "mimeType": "text/html", "buffer": _stored_script_png()}]
            )
            expect(page.locator("#uploads")).to_contain_text("x.html: indexed, 1 page", timeout=60_000)
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
            # polled from here: wait_for_function's own polling evaluates a string in the page, which the
            # page's Content-Security-Policy (no 'unsafe-eval') refuses once the first look fails
            loaded = "imgs => imgs.every(i => i.complete && i.naturalWidth > 0)"
            deadline = time.monotonic() + 30
            while not page.locator("figure img").evaluate_all(loaded):
                assert time.monotonic() < deadline, "the thumbnails did not load"
                time.sleep(0.1)
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


# -- the rerank switch ------------------------------------------------------------------------------------


def _shown_scores(page: Page) -> list[str]:
    return page.locator("figure .rerank-score").all_inner_texts()


def test_the_switch_reranks_and_each_hit_shows_its_rerank_score(
    rerank_server: str, page: Page, tmp_path: Path
) -> None:
    page.goto(rerank_server + "?q=a+smiling+face&k=2")
    figures = page.locator("figure")
    expect(figures).to_have_count(2)
    expect(page.locator("#status")).to_have_text("2 pages · dense+text")
    switch = page.get_by_label("Rerank")
    expect(switch).to_be_visible()
    expect(switch).not_to_be_checked()  # the server's default: DOCVEC_RERANK, 0
    expect(page.locator("figure .rerank-score")).to_have_count(0)
    assert parse_qs(urlsplit(page.url).query)["rerank"] == ["0"]

    switch.check()
    page.get_by_role("button", name="Search").click()
    expect(page.locator("#status")).to_have_text("2 pages · dense+text, reranked")
    expect(page.locator("figure .rerank-score")).to_have_count(2)
    # the page asked for the best max(10, k) pages reranked: what the API answers for the same search
    assert parse_qs(urlsplit(page.url).query)["rerank"] == ["10"]
    answer = httpx.post(
        rerank_server + "search", json={"query": "a smiling face", "k": 2, "rerank": 10}
    ).json()
    expected = [f"rerank {h['rerank_score']:.3f}" for h in answer["hits"]]
    assert _shown_scores(page) == expected
    assert figures.locator(".name").all_inner_texts() == [h["name"] for h in answer["hits"]]
    # the first stage's score is still there, beside it
    expect(figures.first.locator(".score")).to_have_text(re.compile(r"^rank fusion \d\.\d{3}$"))
    page.screenshot(path=str(tmp_path / "reranked.png"))

    # the address bar holds it: a reload reranks again, the switch on
    page.reload()
    expect(page.locator("#status")).to_have_text("2 pages · dense+text, reranked")
    expect(page.get_by_label("Rerank")).to_be_checked()
    assert _shown_scores(page) == expected

    # off again: the first stage's hits, without rerank scores
    page.get_by_label("Rerank").uncheck()
    page.get_by_role("button", name="Search").click()
    expect(page.locator("#status")).to_have_text("2 pages · dense+text")
    expect(page.locator("figure .rerank-score")).to_have_count(0)


def test_a_reranked_search_keeps_the_filters(rerank_server: str, page: Page) -> None:
    page.goto(rerank_server)
    page.get_by_label("Rerank").check()
    page.locator("#tag").fill("team=art")
    page.locator("#q").fill("anything")
    page.locator("#k").fill("12")
    page.get_by_role("button", name="Search").click()
    expect(page.locator("#status")).to_have_text("1 page · dense+text, reranked")
    expect(page.locator("figure .name")).to_have_text("pysamples__smile.png")
    # a rerank score, from 0 to 1, as the page prints it
    expect(page.locator("figure .rerank-score")).to_have_text(re.compile(r"^rerank [01]\.\d{3}$"))
    assert parse_qs(urlsplit(page.url).query)["rerank"] == ["12"]  # k over 10: k pages


def test_no_switch_without_a_reranker(server: str, page: Page) -> None:
    # the same documents as the reranking server's, served without a reranker
    page.goto(server + "?q=a+smiling+face&k=2")
    expect(page.locator("figure")).to_have_count(2)
    expect(page.locator("#status")).to_have_text("2 pages · dense+text")
    expect(page.locator("#rerank-switch")).to_be_hidden()
    expect(page.locator("figure .rerank-score")).to_have_count(0)
    # the searches the page sends say nothing of rerank: a link asks for none
    assert "rerank" not in parse_qs(urlsplit(page.url).query)
    # a link made on a server with a reranker still works here: the page leaves rerank out
    page.goto(server + "?q=a+smiling+face&k=2&rerank=10")
    expect(page.locator("#status")).to_have_text("2 pages · dense+text")
    expect(page.locator("#rerank-switch")).to_be_hidden()
