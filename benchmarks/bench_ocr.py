"""OCR engines measured on held pages: accuracy against the pages' own text layers, seconds per page, weight.

    .venv/bin/python benchmarks/bench_ocr.py [--dpi 150 200 300] [--pages-per-document 3] [--threads 1]

Held pages are PDF pages with a healthy text layer (at least 100 characters, mostly Latin letters: both
engines' default models read Latin script; the Arabic sample is left out) that is visible (a scan's
invisible layer is an earlier OCR's, not a truth), from ../shared/corpus when it is
there, from tests/data/documents otherwise, at most ``--pages-per-document`` of each file. Each page is
rendered in greyscale with pypdfium2 at each resolution and read by each engine that can run here; what it
reads is compared with the page's text layer as pdfium gives it, both in NFKC with hyphenated line breaks
joined and whitespace collapsed to one space:

- CER: the edit distance (characters) over the length of the layer's text (lower is better; reading-order
  differences count too, so two-column pages score worse than what an eye would say);
- word recall: the share of the layer's words (casefolded, as a multiset) that the engine's text has.

The same pages are measured as scans too (skewed, blurred, noisy, JPEG: :func:`scanned`), and generated pages
of small print (Helvetica at 6 to 8 pt), where the resolution matters most.
The shipped samples (src/docvec/samples: image-only PDFs, text drawn by Pillow at 72 dpi, no text layer)
are measured apart against the text their generator draws: they are the low-resolution scans OCR is for.

Engines: tesseract (its command line, Debian's tesseract-ocr + tesseract-ocr-eng, called as docvec calls it:
``OMP_THREAD_LIMIT`` threads, a PGM on stdin) and rapidocr (``rapidocr-onnxruntime``, its bundled PP-OCRv4
models through onnxruntime with ``--threads`` threads). An engine that is not installed is named with what to
install and left out. Seconds are wall time of the engine's call (not the render), the mean over pages.
Install weight: the Debian packages' installed size (tesseract), or the files of the wheel and of its
dependencies that docvec does not already need (rapidocr).
"""

from __future__ import annotations

import argparse
import ctypes
import importlib.util
import io
import os
import platform
import re
import shutil
import subprocess
import time
import unicodedata
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

import numpy as np
import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c
from PIL import Image, ImageDraw, ImageFilter

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpus"
DOCUMENTS = ROOT / "tests" / "data" / "documents"
SAMPLES = ROOT / "src" / "docvec" / "samples"

#: the Debian packages tesseract needs (the eng model depends on the script-detection model, osd)
TESSERACT_PACKAGES = ("tesseract-ocr", "libtesseract5", "liblept5", "tesseract-ocr-eng", "tesseract-ocr-osd")
RAPIDOCR = "rapidocr-onnxruntime"


# -- engines -------------------------------------------------------------------------------------------


@dataclass
class Engine:
    name: str
    read: Callable[[Image.Image, int], str]  # (greyscale image, its dpi) -> text
    weight_mb: float
    licence: str
    version: str


def tesseract(threads: int) -> Engine | str:
    exe = shutil.which("tesseract")
    if exe is None:
        return "tesseract: not installed (apt-get install tesseract-ocr tesseract-ocr-eng)"
    env = {**os.environ, "OMP_THREAD_LIMIT": str(threads)}

    def read(image: Image.Image, dpi: int) -> str:
        buf = io.BytesIO()
        image.save(buf, "PPM")  # PGM for a greyscale image: no encoding cost
        done = subprocess.run(
            [exe, "stdin", "stdout", "-l", "eng", "--dpi", str(dpi)],
            input=buf.getvalue(),
            capture_output=True,
            env=env,
            timeout=300,
            check=True,
        )
        return done.stdout.decode("utf-8", "replace")

    version = subprocess.run([exe, "--version"], capture_output=True, text=True).stdout.split("\n")[0]
    sizes = _dpkg_sizes(TESSERACT_PACKAGES)
    return Engine(
        "tesseract",
        read,
        sum(sizes.values()) / 1024,
        "Apache-2.0 (tesseract, its models), BSD-2 (leptonica)",
        f"{version} (Debian)",
    )


def rapidocr(threads: int) -> Engine | str:
    try:
        from rapidocr_onnxruntime import RapidOCR
    except ImportError:
        return f"rapidocr: not installed here (pip install {RAPIDOCR}==1.4.4)"
    ocr = RapidOCR(intra_op_num_threads=threads, inter_op_num_threads=1)

    def read(image: Image.Image, dpi: int) -> str:
        result, _ = ocr(np.asarray(image.convert("RGB")))
        return "\n".join(line[1] for line in result or [])  # its own reading order (top to bottom)

    return Engine(
        "rapidocr",
        read,
        _wheel_weight_mb(RAPIDOCR),
        "Apache-2.0 (RapidOCR, PaddleOCR models), MIT (onnxruntime), Apache-2.0 (OpenCV)",
        f"{RAPIDOCR} {metadata.version(RAPIDOCR)}",
    )


def _dpkg_sizes(packages: tuple[str, ...]) -> dict[str, int]:
    """Installed-Size (KiB) of each package that is installed."""
    sizes = {}
    for package in packages:
        done = subprocess.run(
            ["dpkg-query", "-W", "-f=${Installed-Size}", package], capture_output=True, text=True
        )
        if done.returncode == 0 and done.stdout.strip().isdigit():
            sizes[package] = int(done.stdout)
    return sizes


def _requirements(name: str) -> set[str]:
    """``name`` and the installed distributions it needs, transitively (markers for extras skipped)."""
    seen: set[str] = set()
    todo = [name]
    while todo:
        current = re.sub(r"[-_.]+", "-", todo.pop()).lower()
        if current in seen:
            continue
        try:
            dist = metadata.distribution(current)
        except metadata.PackageNotFoundError:
            continue
        seen.add(current)
        for requirement in dist.requires or []:
            if "extra ==" in requirement:
                continue
            match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement)
            if match:
                todo.append(match.group(0))
    return seen


def _wheel_weight_mb(name: str) -> float:
    """MB on disk of ``name`` and its dependencies that docvec itself does not already install."""
    ours = _requirements("docvec") if _installed("docvec") else {"numpy", "pillow", "pypdfium2"}
    total = 0
    for dist_name in _requirements(name) - ours:
        for file in metadata.distribution(dist_name).files or []:
            path = Path(str(file.locate()))
            if path.is_file():
                total += path.stat().st_size
    return total / 1e6


def _installed(name: str) -> bool:
    try:
        metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return False
    return True


# -- held pages ----------------------------------------------------------------------------------------


@dataclass
class Held:
    name: str
    truth: str
    render: Callable[[int], Image.Image]  # dpi -> greyscale image
    scores: dict[tuple[str, int], tuple[float, float, float]] = field(default_factory=dict)


def layer_pages(folder: Path, per_document: int) -> list[Held]:
    held = []
    for path in sorted(folder.glob("*.pdf")):
        try:
            pdf = pdfium.PdfDocument(path)
        except pdfium.PdfiumError:
            continue  # encrypted, corrupt, empty: not held pages
        taken = 0
        for index in range(len(pdf)):
            if taken == per_document:
                break
            try:
                text = pdf[index].get_textpage().get_text_bounded()
            except pdfium.PdfiumError:
                continue
            if not _healthy(text) or _invisible(pdf[index]):
                continue
            taken += 1
            held.append(Held(f"{path.name[:32]} p{index + 1}", text, _pdf_renderer(path, index)))
    return held


def _healthy(text: str) -> bool:
    letters = [c for c in text if c.isalpha()]
    latin = [c for c in letters if "LATIN" in unicodedata.name(c, "")]
    return len("".join(text.split())) >= 100 and len(latin) >= 0.9 * len(letters)


def _invisible(page: pdfium.PdfPage) -> bool:
    """Whether the page's text is mostly invisible: a scan with an earlier OCR's layer, not a truth."""
    modes = [
        pdfium_c.FPDFTextObj_GetTextRenderMode(obj.raw)
        for obj in page.get_objects(filter=[pdfium_c.FPDF_PAGEOBJ_TEXT])
    ]
    return bool(sum(m == pdfium_c.FPDF_TEXTRENDERMODE_INVISIBLE for m in modes) > len(modes) / 2)


def _pdf_renderer(path: Path, index: int) -> Callable[[int], Image.Image]:
    def render(dpi: int) -> Image.Image:
        pdf = pdfium.PdfDocument(path)
        try:
            image: Image.Image = (
                pdf[index].render(scale=dpi / 72, grayscale=True, may_draw_forms=True).to_pil()
            )
            return image
        finally:
            pdf.close()

    return render


def sample_pages() -> list[Held]:
    """The shipped samples' text pages, their truth the strings their generator draws (in drawing order)."""
    # loaded from its file, not through docvec's package (which this script does not need installed)
    spec = importlib.util.spec_from_file_location("make_samples", SAMPLES / "make_samples.py")
    if spec is None or spec.loader is None:
        return []
    make_samples = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_samples)
    held = []
    for name, make in (("sample invoice", make_samples.invoice), ("sample report", make_samples.report_text)):
        page, drawn = _drawn_by(make)
        held.append(Held(name, "\n".join(drawn), _image_renderer(page)))
    return held


def _drawn_by(make: Callable[[], Image.Image]) -> tuple[Image.Image, list[str]]:
    """What ``make`` returns, and the strings it drew with ImageDraw.text, in order."""
    drawn: list[str] = []
    original = ImageDraw.ImageDraw.text

    def record(self: ImageDraw.ImageDraw, xy: object, text: str, *args: object, **kwargs: object) -> None:
        drawn.append(text)
        original(self, xy, text, *args, **kwargs)  # type: ignore[arg-type]

    ImageDraw.ImageDraw.text = record  # type: ignore[method-assign,assignment]
    try:
        return make(), drawn
    finally:
        ImageDraw.ImageDraw.text = original  # type: ignore[method-assign]


#: words the small-print pages are made of (common English, so that no engine's dictionary is tested)
_WORDS = " ".join(
    [
        "the of and to in is that for it as was with be by on not he this are or his from at which",
        "but have an they you were her she there been one all we their has would when if so no will",
        "more out other into time only new some could these two may first then do any like my now over",
        "such our man me even most made after also did many before must through back years where much",
        "your way well down should because each just those people how too little state good very make",
        "world still own see men work long get here between both life being under never day same",
        "another know while last might us great old year off come since against go came right used",
        "take three report revenue quarter invoice total amount due page",
    ]
).split(" ")


def small_print_pages() -> list[Held]:
    """Generated pages of Helvetica at 6, 7 and 8 pt (footnotes, tables, contracts): where the resolution
    matters most."""
    import random

    held = []
    for size in (6, 7, 8):
        rng = random.Random(size)
        lines = [" ".join(rng.choice(_WORDS) for _ in range(int(100 / size))) for _ in range(30)]
        held.append(Held(f"small print {size} pt", "\n".join(lines), _helvetica_renderer(lines, size)))
    return held


def _helvetica_renderer(lines: list[str], size: int) -> Callable[[int], Image.Image]:
    def render(dpi: int) -> Image.Image:
        pdf = pdfium.PdfDocument.new()
        try:
            page = pdf.new_page(595, 842)
            font = pdfium_c.FPDFText_LoadStandardFont(pdf.raw, b"Helvetica")
            for number, line in enumerate(lines):
                obj = pdfium_c.FPDFPageObj_NewTextObj(pdf.raw, b"Helvetica", float(size))
                text = (line + "\0").encode("utf-16-le")
                pdfium_c.FPDFText_SetText(obj, ctypes.cast(ctypes.c_char_p(text), pdfium_c.FPDF_WIDESTRING))
                pdfium_c.FPDFPageObj_Transform(obj, 1, 0, 0, 1, 56, 780 - number * size * 1.4)
                pdfium_c.FPDFPage_InsertObject(page.raw, obj)
            del font
            pdfium_c.FPDFPage_GenerateContent(page.raw)
            image: Image.Image = page.render(scale=dpi / 72, grayscale=True).to_pil()
            return image.copy()
        finally:
            pdf.close()

    return render


def scanned(pages: list[Held]) -> list[Held]:
    """The same pages as a cheap office scanner gives them: skewed by half a degree, a little blurred,
    speckled with noise, JPEG at quality 50."""
    return [Held(f"{page.name} (scan)", page.truth, _scanner(page.render)) for page in pages]


def _scanner(render: Callable[[int], Image.Image]) -> Callable[[int], Image.Image]:
    def scan(dpi: int) -> Image.Image:
        image = render(dpi).rotate(0.5, Image.Resampling.BICUBIC, expand=True, fillcolor=255)
        image = image.filter(ImageFilter.GaussianBlur(0.4 * dpi / 200))
        noise = np.random.default_rng(dpi).normal(0, 12, (image.height, image.width))
        image = Image.fromarray(np.clip(np.asarray(image, dtype=np.float64) + noise, 0, 255).astype(np.uint8))
        buffer = io.BytesIO()
        image.save(buffer, "JPEG", quality=50)
        return Image.open(buffer).convert("L")

    return scan


def _image_renderer(page: Image.Image) -> Callable[[int], Image.Image]:
    # The samples are PDFs of a 72-dpi image: a render at a higher resolution only scales that image up.
    def render(dpi: int) -> Image.Image:
        size = (round(page.width * dpi / 72), round(page.height * dpi / 72))
        return page.convert("L").resize(size, Image.Resampling.BICUBIC)

    return render


# -- scores --------------------------------------------------------------------------------------------


def comparable(text: str) -> str:
    text = unicodedata.normalize("NFKC", text.replace("\x02", ""))  # pdfium's mark of a joined hyphenation
    text = re.sub(r"(\w)[-\u2010]\s*\n\s*(\w)", r"\1\2", text)
    return " ".join(text.split())


def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance, one row at a time in numpy (the insertions of a row by a running minimum)."""
    if not a or not b:
        return max(len(a), len(b))
    codes_b = np.frombuffer(b.encode("utf-32-le"), dtype=np.uint32)
    columns = np.arange(len(b) + 1)
    row = columns.copy()
    for i, char in enumerate(a, start=1):
        cost = (codes_b != ord(char)).astype(np.int64)
        best = np.empty_like(row)
        best[0] = i
        best[1:] = np.minimum(row[1:] + 1, row[:-1] + cost)
        row = np.minimum.accumulate(best - columns) + columns
    return int(row[-1])


def words(text: str) -> Counter[str]:
    return Counter(re.findall(r"\w+", text.casefold()))


def score(truth: str, read: str) -> tuple[float, float]:
    truth, read = comparable(truth), comparable(read)
    cer = edit_distance(truth, read) / max(len(truth), 1)
    expected, found = words(truth), words(read)
    recall = sum((expected & found).values()) / max(sum(expected.values()), 1)
    return cer, recall


# -- the run -------------------------------------------------------------------------------------------


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dpi", type=int, nargs="+", default=[150, 200, 300])
    ap.add_argument("--pages-per-document", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1, help="threads each engine may use (docvec: 1)")
    ap.add_argument("--engines", nargs="+", default=["tesseract", "rapidocr"])
    ap.add_argument("--verbose", action="store_true", help="one line per page")
    args = ap.parse_args()

    folder = CORPUS if (CORPUS / "MANIFEST.tsv").is_file() else DOCUMENTS
    held = layer_pages(folder, args.pages_per_document)
    groups = {f"layer ({folder.relative_to(ROOT.parent)})": held, "the same, scanned": scanned(held)}
    small = small_print_pages()
    groups["small print (generated)"] = small
    groups["small print, scanned"] = scanned(small)
    groups["samples (72-dpi images)"] = sample_pages()
    makers = {"tesseract": tesseract, "rapidocr": rapidocr}
    engines = []
    for name in args.engines:
        made = makers[name](args.threads)
        if isinstance(made, str):
            print(made)
        else:
            engines.append(made)
    cpu = _cpu()
    print(f"CPU: {cpu}; {os.cpu_count()} cores; engine threads: {args.threads}")
    for group, pages in groups.items():
        print(f"{group}: {len(pages)} pages")

    rows = []
    for group, pages in groups.items():
        for engine in engines:
            for dpi in args.dpi:
                cers, recalls, seconds = [], [], []
                for page in pages:
                    image = page.render(dpi)
                    start = time.perf_counter()
                    text = engine.read(image, dpi)
                    spent = time.perf_counter() - start
                    cer, recall = score(page.truth, text)
                    cers.append(cer)
                    recalls.append(recall)
                    seconds.append(spent)
                    if args.verbose:
                        print(
                            f"  {engine.name:9} {dpi:3} {page.name:40} CER {cer:6.3f} recall {recall:6.3f}"
                            f" {spent:6.2f} s"
                        )
                if pages:
                    rows.append((group, engine, dpi, cers, recalls, seconds))

    print()
    header = f"{'pages':28} {'engine':9} {'dpi':>4} {'CER mean':>8} {'median':>7} {'recall':>7} {'s/page':>7}"
    print(header)
    print("-" * len(header))
    for group, engine, dpi, cers, recalls, seconds in rows:
        print(
            f"{group[:28]:28} {engine.name:9} {dpi:4} {np.mean(cers):8.3f} {np.median(cers):7.3f}"
            f" {np.mean(recalls):7.3f} {np.mean(seconds):7.2f}"
        )
    print()
    for engine in engines:
        print(f"{engine.name}: {engine.version}; install {engine.weight_mb:.0f} MB; licence {engine.licence}")


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


if __name__ == "__main__":
    main()
