"""Regenerates the sample documents shipped with docvec (our own work, Apache-2.0 like the code).

python -m docvec.samples.make_samples
"""

from __future__ import annotations

from pathlib import Path

from PIL import Image, ImageDraw

HERE = Path(__file__).parent


def _page() -> tuple[Image.Image, ImageDraw.ImageDraw]:
    img = Image.new("RGB", (595, 842), "white")  # A4 at 72 dpi
    return img, ImageDraw.Draw(img)


def invoice() -> Image.Image:
    img, d = _page()
    d.text((60, 60), "INVOICE  No. 2026-114", fill="black")
    d.text((60, 90), "Northwind Consulting, 12 Harbour Street", fill="black")
    for i, (item, price) in enumerate(
        [("Consulting", "1,200.00"), ("Hosting", "240.00"), ("Support", "90.00")]
    ):
        d.text((60, 160 + 30 * i), item, fill="black")
        d.text((440, 160 + 30 * i), price, fill="black")
    d.line((60, 260, 535, 260), fill="black", width=2)
    d.text((60, 275), "TOTAL DUE (EUR)", fill="black")
    d.text((440, 275), "1,530.00", fill="black")
    return img


def report_text() -> Image.Image:
    img, d = _page()
    d.text((60, 60), "Quarterly report: operations", fill="black")
    for i in range(30):
        d.text(
            (60, 110 + 22 * i),
            f"{i + 1}. The cooling system ran at {60 + i % 7}% load in week {i + 1}.",
            fill="black",
        )
    return img


def report_chart() -> Image.Image:
    img, d = _page()
    d.text((60, 60), "Revenue by quarter (kEUR)", fill="black")
    for i, h in enumerate((220, 310, 270, 400)):
        x = 90 + 110 * i
        d.rectangle((x, 700 - h, x + 70, 700), fill=(40, 90, 200))
        d.text((x + 20, 715), f"Q{i + 1}", fill="black")
    d.line((70, 700, 540, 700), fill="black", width=2)
    return img


def main() -> None:
    invoice().save(HERE / "invoice.pdf", resolution=72)
    first, *rest = report_text(), report_chart()
    first.save(HERE / "quarterly-report.pdf", save_all=True, append_images=rest, resolution=72)
    report_chart().resize((800, 600)).save(HERE / "revenue-chart.png", optimize=True)


if __name__ == "__main__":
    main()
