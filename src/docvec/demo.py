"""The offline demo: the tiny test model, two page images, two queries, their similarity matrix."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw
from rich.console import Console
from rich.table import Table

from .config import EmbedSettings
from .embed import Embedder
from .models import build_tiny_model

__all__ = ["demo_pages", "run_demo"]

QUERIES = ("total amount due on the invoice", "quarterly revenue bar chart")


def demo_pages() -> dict[str, Image.Image]:
    """Two synthetic A4-shaped pages (595x842 px): an invoice of text lines and a bar chart."""
    invoice = Image.new("RGB", (595, 842), "white")
    d = ImageDraw.Draw(invoice)
    d.text((60, 60), "INVOICE  No. 2026-114", fill="black")
    for i, (item, price) in enumerate(
        [("Consulting", "1,200.00"), ("Hosting", "240.00"), ("Support", "90.00")]
    ):
        d.text((60, 140 + 30 * i), item, fill="black")
        d.text((440, 140 + 30 * i), price, fill="black")
    d.line((60, 250, 535, 250), fill="black", width=2)
    d.text((60, 265), "TOTAL DUE", fill="black")
    d.text((440, 265), "1,530.00", fill="black")
    chart = Image.new("RGB", (595, 842), "white")
    d = ImageDraw.Draw(chart)
    d.text((60, 60), "Revenue by quarter", fill="black")
    for i, h in enumerate((220, 310, 270, 400)):
        x = 90 + 110 * i
        d.rectangle((x, 700 - h, x + 70, 700), fill=(40, 90, 200))
        d.text((x + 20, 715), f"Q{i + 1}", fill="black")
    d.line((70, 700, 540, 700), fill="black", width=2)
    return {"invoice": invoice, "chart": chart}


def run_demo(model_dir: Path, *, cache_dir: Path, console: Console) -> np.ndarray:
    """Build (once) the tiny model in ``model_dir``, embed the demo pages and queries, print the scores."""
    console.print(f"building the offline test model in {model_dir} (once) ...")
    files = build_tiny_model(model_dir, cache_dir=cache_dir)
    pages = demo_pages()
    with Embedder(files, EmbedSettings()) as emb:
        q = emb.embed_queries(list(QUERIES))
        p = emb.embed_images(list(pages.values()))
    scores = q @ p.T
    table = Table(title="cosine similarity: queries x page images", title_justify="left")
    table.add_column("query")
    for name in pages:
        table.add_column(name, justify="right")
    for text, row in zip(QUERIES, scores, strict=True):
        table.add_row(text, *(f"{s:+.4f}" for s in row))
    console.print(table)
    console.print(
        f"[yellow]{files.language_model.name}: the test model's weights are random, so these scores test the "
        "machinery and mean nothing. Real models: `docvec models pull jina-v4`.[/]"
    )
    return scores
