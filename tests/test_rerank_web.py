"""The search page's rerank switch in a real browser (Debian's chromium, headless, driven by Playwright):
shown only by a server with a reranker, and each reranked hit showing its rerank score."""

from __future__ import annotations

import re
import shutil
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
import uvicorn
from playwright.sync_api import Browser, Page, expect, sync_playwright

from docvec import EmbedSettings, Index, RenderSettings, Settings
from docvec.api import create_app

from .processes import free_port

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# what a machine with no network and a fresh profile needs (as tests/test_web.py starts it)
CHROMIUM_ARGS = [
    "--no-sandbox",
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
    deadline = time.monotonic() + 120
    while not srv.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the server did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        srv.should_exit = True
        thread.join(30)


def _index(settings: Settings, documents: Path) -> Settings:
    with Index.open(settings) as ix:
        assert ix.add([documents / "pysamples__minimal-document.pdf"], tags=["team=legal"]).ok
        assert ix.add([documents / "pysamples__smile.png"], tags=["team=art"]).ok
    return settings


@pytest.fixture(scope="module")
def server(
    documents: Path, tiny_dir: Path, reranker_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """A server with the tiny reranker, reranking nothing unless asked."""
    data = tmp_path_factory.mktemp("rerank-web-data")
    with _serve(_index(_settings(data, tiny_dir, rerank_model=str(reranker_dir)), documents)) as url:
        yield url


@pytest.fixture()
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    yield context.new_page()
    context.close()


def _shown_scores(page: Page) -> list[str]:
    return page.locator("figure .rerank-score").all_inner_texts()


def test_the_switch_reranks_and_each_hit_shows_its_rerank_score(
    server: str, page: Page, tmp_path: Path
) -> None:
    page.goto(server + "?q=a+smiling+face&k=2")
    figures = page.locator("figure")
    expect(figures).to_have_count(2)
    expect(page.locator("#status")).to_have_text("2 pages")
    switch = page.get_by_label("Rerank")
    expect(switch).to_be_visible()
    expect(switch).not_to_be_checked()  # the server's default: DOCVEC_RERANK, 0
    expect(page.locator("figure .rerank-score")).to_have_count(0)
    assert parse_qs(urlsplit(page.url).query)["rerank"] == ["0"]

    switch.check()
    page.get_by_role("button", name="Search").click()
    expect(page.locator("#status")).to_have_text("2 pages, reranked")
    expect(page.locator("figure .rerank-score")).to_have_count(2)
    # the page asked for the best max(10, k) pages reranked: what the API answers for the same search
    assert parse_qs(urlsplit(page.url).query)["rerank"] == ["10"]
    answer = httpx.post(server + "search", json={"query": "a smiling face", "k": 2, "rerank": 10}).json()
    expected = [f"rerank {h['rerank_score']:.3f}" for h in answer["hits"]]
    assert _shown_scores(page) == expected
    assert figures.locator(".name").all_inner_texts() == [h["name"] for h in answer["hits"]]
    # the first stage's score is still there, beside it
    expect(figures.first.locator(".meta")).to_contain_text("score ")
    page.screenshot(path=str(tmp_path / "reranked.png"))

    # the address bar holds it: a reload reranks again, the switch on
    page.reload()
    expect(page.locator("#status")).to_have_text("2 pages, reranked")
    expect(page.get_by_label("Rerank")).to_be_checked()
    assert _shown_scores(page) == expected

    # off again: the first stage's hits, without rerank scores
    page.get_by_label("Rerank").uncheck()
    page.get_by_role("button", name="Search").click()
    expect(page.locator("#status")).to_have_text("2 pages")
    expect(page.locator("figure .rerank-score")).to_have_count(0)


def test_a_reranked_search_keeps_the_filters(server: str, page: Page) -> None:
    page.goto(server)
    page.get_by_label("Rerank").check()
    page.locator("#tag").fill("team=art")
    page.locator("#q").fill("anything")
    page.locator("#k").fill("12")
    page.get_by_role("button", name="Search").click()
    expect(page.locator("#status")).to_have_text("1 pages, reranked")
    expect(page.locator("figure .name")).to_have_text("pysamples__smile.png")
    # a rerank score, from 0 to 1, as the page prints it
    expect(page.locator("figure .rerank-score")).to_have_text(re.compile(r"^rerank [01]\.\d{3}$"))
    assert parse_qs(urlsplit(page.url).query)["rerank"] == ["12"]  # k over 10: k pages


def test_no_switch_without_a_reranker(documents: Path, tiny_dir: Path, tmp_path: Path, page: Page) -> None:
    with _serve(_index(_settings(tmp_path / "data", tiny_dir), documents)) as url:
        page.goto(url + "?q=a+smiling+face&k=2")
        expect(page.locator("figure")).to_have_count(2)
        expect(page.locator("#status")).to_have_text("2 pages")
        expect(page.locator("#rerank-switch")).to_be_hidden()
        expect(page.locator("figure .rerank-score")).to_have_count(0)
        # the searches the page sends say nothing of rerank: a link asks for none
        assert "rerank" not in parse_qs(urlsplit(page.url).query)
        # a link made on a server with a reranker still works here: the page leaves rerank out
        page.goto(url + "?q=a+smiling+face&k=2&rerank=10")
        expect(page.locator("#status")).to_have_text("2 pages")
        expect(page.locator("#rerank-switch")).to_be_hidden()
