"""What runs inside a render worker process: every PDFium and Pillow decode happens here, never in the parent.

PDFium is not thread-safe, not even across documents, so each worker is a process with one thread that
touches PDFium; a second thread only writes finished pages to the parent, so that the renderer can work a
few pages ahead while the parent is busy (embedding, say).

The protocol is a few picklable tuples. Parent to worker: :class:`OpenTask`, :class:`RenderTask`,
:class:`Cancel`, :class:`Stop`. Worker to parent: :class:`Ready` once, then for an open task one
:class:`Info` or :class:`Failed`; for a render task any number of :class:`Page` (each followed by one
``send_bytes`` with the packed RGB pixels) and :class:`PageFailed`, or one :class:`Failed`, and always a
closing :class:`End`. A render task's ``text`` (a :class:`TextSpec`: the OCR setting and the most
characters kept) asks for each page's text too: it comes in the page's :class:`Page` as a
:class:`TextResult`; with ``image`` false no page is rendered for the model, and each page comes as one
:class:`Text` (no pixels follow) instead of a :class:`Page`.

A page's text is its PDF text layer (pdfium's text page, in pdfium's reading order), normalised by
:func:`clean_text`, unless that layer is missing or broken (:func:`layer_problem`); then, as the OCR setting
says, OCR's (:mod:`docvec._render._ocr`), read from the page rendered again at the OCR resolution (an image
file's frame decoded again at the OCR size), never from the small image the model sees.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import queue
import re
import signal
import threading
import time
import unicodedata
from multiprocessing.connection import Connection
from typing import Any, NamedTuple

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from .._decoding import bomb_reason, decode_refusal, to_rgb
from . import _ocr

# Pages a worker may hold finished but not yet taken by the parent (besides the one being sent).
PREFETCH = 2
# PDFium keeps what it parsed of a document's pages until the document is closed: over a 2,000-page PDF a
# worker grew by hundreds of MB. Reopening the document every so many pages keeps its memory flat.
REOPEN_EVERY = 64
# What a worker takes for itself (Python, Pillow, PDFium, numpy) on top of the decoding budget.
OWN_MEMORY = 256 << 20

# A PDF text layer is broken, and treated as missing, when any of these holds (layer_problem). Measured on
# the real-world files kept with the tests and in ../shared/corpus (226 pages with text in 15 files: LaTeX,
# Word, LibreOffice, Google Docs and PowerPoint exports, a 117-page book with Type3 fonts, a scan's OCR
# layer): no page has more than 2.6% of its characters unmapped or 0.3% odd ones, and letters and digits
# make at least 68% of every page (a page of formulas), once a run of one repeated mark (the dot leaders of
# a table of contents: 50% without) counts once. The one odd sample, an Arabic page one of whose fonts has
# no usable map, has 5 of its 24 characters unmapped (21%) and keeps its layer. A third of a page
# unreadable is far worse than what OCR reads (about 2% of characters wrong, see docvec._render._ocr).
#: the share of a layer's characters that pdfium cannot map to unicode (no /ToUnicode, unknown glyph names)
MAP_ERROR_SHARE = 1 / 3
#: the share of U+FFFD, private-use, unassigned and control characters (a /ToUnicode that maps to garbage)
ODD_SHARE = 1 / 3
#: the least share of letters, marks and digits, in any script, of a layer of LETTERS_JUDGED characters or
#: more (a shorter one is broken only if it has none)
LETTER_SHARE = 0.5
LETTERS_JUDGED = 10


class OpenTask(NamedTuple):
    job: int
    path: str
    kind: str


class TextSpec(NamedTuple):
    """The text a render task asks for: ``ocr`` is "off", "auto" (pages without a usable text layer) or "on"
    (every page); ``limit`` is the most characters kept of a page; ``unavailable``: OCR is off because it
    cannot run, and a page it would read (no usable text layer) is answered "unread"."""

    ocr: str
    limit: int
    unavailable: bool = False


class RenderTask(NamedTuple):
    """Render pages ``start``, ``start + step``, ... (1-based) of one document; with ``text``, read their
    text too; without ``image``, only read it (one :class:`Text` a page, nothing rendered for the model)."""

    job: int
    path: str
    kind: str
    start: int
    step: int
    target_pixels: int
    max_pixels: int
    text: TextSpec | None = None
    image: bool = True


class Cancel(NamedTuple):
    job: int


class Stop(NamedTuple):
    pass


class Ready(NamedTuple):
    pid: int


class Info(NamedTuple):
    job: int
    page_count: int


class Failed(NamedTuple):
    """The whole document failed; ``reason`` is for a user."""

    job: int
    reason: str


class TextResult(NamedTuple):
    """A page's text: ``source`` is "pdf" or "ocr" (``None`` with no text; "unread" when OCR would read
    the page but cannot run); ``ocr_s`` the seconds OCR took
    (not charged to the document's time limit: the engine has its own); ``problem``, for a user, why OCR
    gave nothing (``None`` when it did not fail)."""

    text: str | None
    source: str | None
    ocr_s: float = 0.0
    problem: str | None = None


class Page(NamedTuple):
    job: int
    number: int
    width: int
    height: int
    size_pt: tuple[float, float] | None
    rotation: int
    text: TextResult | None = None


class Text(NamedTuple):
    """A page's text, for a task without ``image``."""

    job: int
    number: int
    result: TextResult


class PageFailed(NamedTuple):
    job: int
    number: int
    reason: str


class End(NamedTuple):
    job: int


class _DocumentFailure(Exception):
    """Inside the worker: the document cannot be opened (the message is the user-facing reason)."""


class _PageFailure(Exception):
    """Inside the worker: one page cannot be rendered (the message is the user-facing reason)."""


Outgoing = tuple[Any, Any]  # (message, pixel buffer or None)


def page_scale(width_pt: float, height_pt: float, target_pixels: int, max_pixels: int) -> float:
    """Pixels per point that put a page near ``target_pixels`` and surely within ``max_pixels``.

    PDFium's bitmap is ``ceil(w * s) x ceil(h * s)``; the cap solves ``(w*s + 1) * (h*s + 1) <= max_pixels``
    so that rounding up never crosses it, whatever the page size (a 2^31 pt page included).
    """
    if not (math.isfinite(width_pt) and math.isfinite(height_pt)) or width_pt <= 0 or height_pt <= 0:
        raise _PageFailure(f"the page has no visible area ({width_pt:g} x {height_pt:g} pt)")
    area, perimeter = width_pt * height_pt, width_pt + height_pt
    scale = math.sqrt(target_pixels / area)
    cap = (-perimeter + math.sqrt(perimeter * perimeter + 4 * area * (max_pixels - 1))) / (2 * area)
    scale = min(scale, cap)
    # Float rounding can still land one row over the cap; step down until it does not.
    while math.ceil(width_pt * scale) * math.ceil(height_pt * scale) > max_pixels:
        scale *= 0.999
    return scale


def fit_within(width: int, height: int, max_pixels: int) -> tuple[int, int]:
    """The largest size of the same aspect (each side >= 1 px) that has at most ``max_pixels`` pixels."""
    if width * height <= max_pixels:
        return width, height
    s = math.sqrt(max_pixels / (width * height))
    w, h = max(1, math.floor(width * s)), max(1, math.floor(height * s))
    # A 1-px side of an extreme strip cannot shrink further: cut the other side instead.
    h = min(h, max_pixels // w)
    w = min(w, max_pixels // h)
    return w, h


def serve(tasks: Connection, results: Connection, memory_limit: int) -> None:
    """Worker process entry point: answer tasks until :class:`Stop` or until the parent goes away.

    ``memory_limit`` (bytes) is the most an image's decoding may take: larger ones are refused before
    they are decoded, and the OS holds this process to it (plus its own :data:`OWN_MEMORY`), so that
    anything else that grows past it (a decoder, PDFium) fails one page, not the machine.
    """
    _limit_memory(memory_limit + OWN_MEMORY)
    # pypdfium2's advice on XFA forms (rebuild PDFium) is for its own users; pages render without them
    logging.getLogger("pypdfium2").setLevel(logging.ERROR)
    # Ctrl-C at a terminal reaches the whole process group: the parent decides what stops, and stops us.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    out: queue.Queue[Outgoing | None] = queue.Queue(maxsize=PREFETCH)
    sender = threading.Thread(target=_send_loop, args=(out, results), name="docvec-render-send", daemon=True)
    sender.start()
    out.put((Ready(os.getpid()), None))
    worker = _Worker(tasks, out, memory_limit)
    worker.run()
    out.put(None)
    sender.join()


def _send_loop(out: queue.Queue[Outgoing | None], results: Connection) -> None:
    while (item := out.get()) is not None:
        message, pixels = item
        try:
            results.send(message)
            if pixels is not None:
                results.send_bytes(pixels)
        except OSError:
            # The parent is gone: nothing will read what this process makes.
            os._exit(0)


def _limit_memory(limit: int) -> None:
    try:
        import resource
    except ImportError:  # pragma: no cover - not on POSIX: the decode budget still applies
        return
    # RLIMIT_DATA counts the heap and private mappings: decoded images, PDFium's bitmaps
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (limit, hard))


class _Worker:
    def __init__(self, tasks: Connection, out: queue.Queue[Outgoing | None], memory_limit: int) -> None:
        self.tasks = tasks
        self.out = out
        self.memory_limit = memory_limit
        self.stopping = False

    def run(self) -> None:
        while not self.stopping:
            try:
                task = self.tasks.recv()
            except (EOFError, OSError):
                return  # the parent is gone
            if isinstance(task, Stop):
                return
            if isinstance(task, OpenTask):
                self.out.put((self.open(task), None))
            elif isinstance(task, RenderTask):
                self.render(task)
                self.out.put((End(task.job), None))
            # A Cancel for a job that already ended needs nothing.

    def cancelled(self, job: int) -> bool:
        """Whether the parent has given up on ``job`` (checked between pages)."""
        while self.tasks.poll():
            message = self.tasks.recv()
            if isinstance(message, Stop):
                self.stopping = True
                return True
            if isinstance(message, Cancel) and message.job == job:
                return True
        return False

    def open(self, task: OpenTask) -> Info | Failed:
        try:
            if task.kind == "pdf":
                pdf = _open_pdf(task.path)
                try:
                    return Info(task.job, len(pdf))
                finally:
                    pdf.close()
            with _open_image(task.path) as image:
                return Info(task.job, _frame_count(image))
        except _DocumentFailure as e:
            return Failed(task.job, str(e))
        except Exception as e:  # a decoder's surprise fails this document, not the worker
            return Failed(task.job, f"cannot open: {type(e).__name__}: {e}")

    def render(self, task: RenderTask) -> None:
        try:
            if task.kind == "pdf":
                self._render_pdf(task)
            else:
                self._render_image(task)
        except _DocumentFailure as e:
            self.out.put((Failed(task.job, str(e)), None))
        except Exception as e:  # a decoder's surprise fails this document, not the worker
            self.out.put((Failed(task.job, f"cannot render: {type(e).__name__}: {e}"), None))

    def _render_pdf(self, task: RenderTask) -> None:
        pdf = _open_pdf(task.path)
        try:
            for done, number in enumerate(range(task.start, len(pdf) + 1, task.step), start=1):
                if self.cancelled(task.job):
                    return
                try:
                    self.out.put(_render_pdf_page(pdf, number, task))
                except _PageFailure as e:
                    self.out.put((PageFailed(task.job, number, str(e)), None))
                if done % REOPEN_EVERY == 0:
                    pdf.close()
                    pdf = _open_pdf(task.path)
        finally:
            pdf.close()

    def _render_image(self, task: RenderTask) -> None:
        with _open_image(task.path) as image:
            for number in range(task.start, _frame_count(image) + 1, task.step):
                if self.cancelled(task.job):
                    return
                if not task.image:
                    self.out.put((Text(task.job, number, self._image_text(task, number)), None))
                    continue
                try:
                    rgb = _image_frame(image, number, task.max_pixels, self.memory_limit)
                except _PageFailure as e:
                    self.out.put((PageFailed(task.job, number, str(e)), None))
                    continue
                text = None if task.text is None else self._image_text(task, number)
                page = Page(task.job, number, rgb.width, rgb.height, None, 0, text)
                self.out.put((page, rgb.tobytes()))

    def _image_text(self, task: RenderTask, number: int) -> TextResult:
        """An image file's page has no text layer: its text is OCR's, when OCR is not off."""
        if task.text is None or task.text.ocr == "off":
            return TextResult(None, "unread" if task.text is not None and task.text.unavailable else None)
        return _read_image_frame(task.path, number, task.text.limit, self.memory_limit)


def _open_pdf(path: str) -> Any:
    # Only workers load PDFium; the parent imports this module for its message types.
    import pypdfium2 as pdfium
    import pypdfium2.raw as pdfium_c

    # Opened through the raw API because pypdfium2 reports a zero-page document with FPDF_GetLastError(),
    # which a successful load does not reset: in a long-lived worker, an empty PDF opened after a corrupt
    # one would read "Data format error". (pypdfium2 also leaves that zero-page handle open.)
    raw = pdfium_c.FPDF_LoadDocument(os.fsencode(path), None)
    if not raw:
        raise _DocumentFailure(_open_failure_reason(int(pdfium_c.FPDF_GetLastError())))
    if pdfium_c.FPDF_GetPageCount(raw) < 1:
        pdfium_c.FPDF_CloseDocument(raw)
        raise _DocumentFailure("no pages (the PDF's page tree is empty or unreadable)")
    pdf = pdfium.PdfDocument(raw)
    # Forms must be set up before any page is loaded, or filled-in field values are not drawn; if that
    # fails, pages render without their form layer rather than not at all.
    with contextlib.suppress(pdfium.PdfiumError):
        pdf.init_forms()
    return pdf


# PDFium's FPDF_ERR_* codes for a document that does not load.
_LOAD_ERRORS = {
    2: "cannot read the file",
    4: "encrypted: a user password is required",
    5: "encrypted with an unsupported security handler",
}
_PDFIUM_ERRORS = {1: "unknown error", 3: "data format error", 6: "page not found or content error"}


def _open_failure_reason(code: int) -> str:
    if code in _LOAD_ERRORS:
        return _LOAD_ERRORS[code]
    return f"corrupt or not a PDF: {_PDFIUM_ERRORS.get(code, 'error')} (PDFium error {code})"


def _render_pdf_page(pdf: Any, number: int, task: RenderTask) -> Outgoing:
    import pypdfium2 as pdfium

    try:
        page = pdf[number - 1]
    except pdfium.PdfiumError as e:
        raise _PageFailure(f"cannot load the page: {e}") from None
    try:
        if not task.image:
            return Text(task.job, number, _pdf_text(page, task.text or TextSpec("off", 0))), None
        message, pixels = _model_image(page, number, task)
        if task.text is not None:
            message = message._replace(text=_pdf_text(page, task.text))
        return message, pixels
    finally:
        page.close()


def _model_image(page: Any, number: int, task: RenderTask) -> tuple[Page, bytes]:
    """The page rendered near the model's pixel budget, as a :class:`Page` and its packed RGB pixels."""
    import pypdfium2 as pdfium

    # Sizes are after /Rotate, and render() applies /Rotate itself: a /Rotate 90 page comes out landscape.
    width_pt, height_pt = float(page.get_width()), float(page.get_height())
    try:
        rotation = int(page.get_rotation())
    except (pdfium.PdfiumError, KeyError):
        rotation = 0  # an invalid /Rotate: PDFium draws the page unrotated
    scale = page_scale(width_pt, height_pt, task.target_pixels, task.max_pixels)
    try:
        bitmap = page.render(scale=scale, rev_byteorder=True, may_draw_forms=True)
    except ValueError as e:  # pypdfium2's check of an empty visible area
        raise _PageFailure(f"the page has no visible area: {e}") from None
    except MemoryError:
        raise _PageFailure(f"out of memory rendering {width_pt:g} x {height_pt:g} pt") from None
    except pdfium.PdfiumError as e:
        raise _PageFailure(f"cannot render the page: {e}") from None
    pixels = bitmap.buffer  # packed RGB (native bitmap: stride == 3 * width); outlives bitmap.close()
    if bitmap.n_channels != 3 or bitmap.stride != 3 * bitmap.width:
        raise _PageFailure(f"unexpected bitmap layout ({bitmap.mode}, stride {bitmap.stride})")
    message = Page(task.job, number, bitmap.width, bitmap.height, (width_pt, height_pt), rotation)
    bitmap.close()
    return message, pixels


# -- page text ------------------------------------------------------------------------------------------

# Line breaks of every kind as "\n" (pdfium ends its lines with "\r\n"), then the control characters left
# but "\t" dropped: NULs, pdfium's U+0002 (its mark of a word hyphenated across lines: the word comes out
# joined) and C1 controls.
_BREAKS = re.compile("\r\n|[\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")
_CONTROLS = re.compile("[\x00-\x08\x0e-\x1f\x7f-\x9f]")
_BLANK_RUNS = re.compile("\n{3,}")
# the categories of characters no real text is made of: private use, unassigned, surrogates, controls
_ODD = frozenset({"Co", "Cn", "Cs", "Cc"})
_REPEATS = re.compile(r"([^\w\s])(?:\s*\1)+")


def clean_text(text: str, limit: int) -> str:
    """``text`` (a text layer's or OCR's) as docvec keeps it: NFC, line breaks as "\\n", control characters
    other than "\\t" and "\\n" dropped, no trailing spaces, runs of blank lines as one, and at most ``limit``
    characters (cut at a whitespace near the limit: :func:`cut_text`)."""
    text = _CONTROLS.sub("", _BREAKS.sub("\n", text))
    text = unicodedata.normalize("NFC", text)
    text = "\n".join(line.rstrip() for line in text.split("\n"))
    return cut_text(_BLANK_RUNS.sub("\n\n", text).strip(), limit)


def cut_text(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters: at the last whitespace within the limit when that keeps
    at least nine tenths of it (no word is cut in half), at the limit itself otherwise (one long run)."""
    if len(text) <= limit:
        return text
    head = text[: limit + 1]  # a whitespace right after the limit ends a whole word too
    at = max(head.rfind(" "), head.rfind("\n"), head.rfind("\t"))
    if at >= 0.9 * limit:
        return text[:at].rstrip()
    return text[:limit]


def layer_problem(raw: str, unmapped: int, chars: int) -> str | None:
    """Why a PDF text layer is garbage (to be treated as missing), or ``None`` when it is usable.

    ``raw`` is the layer as pdfium gives it; ``unmapped`` of its ``chars`` characters (spaces and the
    characters pdfium generates not counted) have no unicode mapping (``FPDFText_HasUnicodeMapError``: no
    /ToUnicode and glyph codes that say nothing). Thresholds and why: :data:`MAP_ERROR_SHARE`,
    :data:`ODD_SHARE`, :data:`LETTER_SHARE`.
    """
    if chars and unmapped >= MAP_ERROR_SHARE * chars:
        return f"{unmapped} of {chars} characters have no unicode mapping"
    judged = [c for c in raw if not c.isspace() and c != "\x02"]  # U+0002: pdfium's own hyphen mark
    if not judged:
        return None
    odd = sum(1 for c in judged if c == "\ufffd" or unicodedata.category(c) in _ODD)
    if odd >= ODD_SHARE * len(judged):
        return f"{odd} of {len(judged)} characters are U+FFFD, private-use, unassigned or control characters"
    # a run of one repeated mark (". . . ." leaders, "____" rules) counts once
    marks = [c for c in _REPEATS.sub(r"\1", raw) if not c.isspace() and c != "\x02"]
    letters = sum(1 for c in marks if c.isalnum() or unicodedata.category(c).startswith("M"))
    if len(marks) >= LETTERS_JUDGED and letters < LETTER_SHARE * len(marks):
        return f"only {letters} of {len(marks)} characters are letters or digits"
    if not letters:
        return "no letter or digit"
    return None


def _pdf_text(page: Any, spec: TextSpec) -> TextResult:
    """A PDF page's text as ``spec`` asks: its text layer, or OCR's (see the module's docstring)."""
    try:
        layer = None if spec.ocr == "on" else _text_layer(page, spec.limit)
        if spec.ocr == "off" or (spec.ocr == "auto" and layer is not None):
            if layer is None:
                return TextResult(None, "unread" if spec.unavailable else None)
            return TextResult(layer, "pdf")
        result = _read_pdf_page(page, spec.limit)
        if result.text is None and spec.ocr == "on":
            # OCR failed or saw nothing (white or invisible text): the layer, if usable, rather than nothing
            layer = _text_layer(page, spec.limit)
            if layer is not None:
                return result._replace(text=layer, source="pdf")
        return result
    except Exception as e:  # PDFium's or a decoder's surprise: the page goes on without its text
        return TextResult(None, None, problem=f"cannot read the text: {type(e).__name__}: {e}")


def _text_layer(page: Any, limit: int) -> str | None:
    """The page's text layer in pdfium's reading order, cleaned; ``None`` when it is missing or broken."""
    import pypdfium2 as pdfium

    try:
        textpage = page.get_textpage()
    except pdfium.PdfiumError:
        return None  # pdfium cannot parse the page's text: as good as none
    try:
        raw = textpage.get_text_bounded()  # the text within the page's visible area
        unmapped, chars = _unmapped(textpage)
    finally:
        textpage.close()
    if layer_problem(raw, unmapped, chars) is not None:
        return None
    return clean_text(raw, limit) or None


def _unmapped(textpage: Any) -> tuple[int, int]:
    """(characters without a unicode mapping, characters) of a text page, not counting spaces and the
    characters pdfium generates (line breaks, the spaces it infers between words)."""
    import pypdfium2.raw as pdfium_c

    raw = textpage.raw
    unmapped = chars = 0
    for index in range(pdfium_c.FPDFText_CountChars(raw)):
        if pdfium_c.FPDFText_IsGenerated(raw, index) == 1:
            continue
        code = pdfium_c.FPDFText_GetUnicode(raw, index)
        if code < 0x110000 and chr(code).isspace():
            continue
        chars += 1
        unmapped += pdfium_c.FPDFText_HasUnicodeMapError(raw, index) == 1
    return unmapped, chars


def _read_pdf_page(page: Any, limit: int) -> TextResult:
    """OCR's text of a PDF page, rendered in greyscale at the OCR resolution (within the OCR pixel cap)."""
    import pypdfium2 as pdfium

    start = time.monotonic()
    try:
        width_pt, height_pt = float(page.get_width()), float(page.get_height())
        target = round(width_pt * height_pt * (_ocr.DPI / 72) ** 2) if width_pt * height_pt > 0 else 1
        scale = page_scale(width_pt, height_pt, min(target, _ocr.MAX_PIXELS), _ocr.MAX_PIXELS)
        try:
            bitmap = page.render(scale=scale, grayscale=True, may_draw_forms=True)
        except ValueError as e:  # pypdfium2's check of an empty visible area
            raise _PageFailure(f"the page has no visible area: {e}") from None
        except MemoryError:
            raise _PageFailure("out of memory rendering the page for OCR") from None
        except pdfium.PdfiumError as e:
            raise _PageFailure(f"cannot render the page for OCR: {e}") from None
        try:
            text = clean_text(_ocr.read_text(bitmap.to_pil(), dpi=72 * scale), limit)
        finally:
            bitmap.close()
    except (_PageFailure, _ocr.OcrError) as e:
        return TextResult(None, None, time.monotonic() - start, f"OCR: {e}")
    return TextResult(text or None, "ocr" if text else None, time.monotonic() - start)


def _read_image_frame(path: str, number: int, limit: int, budget: int) -> TextResult:
    """OCR's text of frame ``number`` of an image file, decoded again for the purpose (within the OCR pixel
    cap, not the model's: the model's image is decoded as it would be without OCR)."""
    start = time.monotonic()
    try:
        with _open_image(path) as image:
            frame = _image_frame(image, number, _ocr.MAX_PIXELS, budget)
        # no dpi: an image file's is often absent or a default (72) that says nothing; tesseract measures
        text = clean_text(_ocr.read_text(frame), limit)
    except (_DocumentFailure, _PageFailure, _ocr.OcrError) as e:
        return TextResult(None, None, time.monotonic() - start, f"OCR: {e}")
    return TextResult(text or None, "ocr" if text else None, time.monotonic() - start)


def _open_image(path: str) -> Image.Image:
    try:
        return Image.open(path)
    except UnidentifiedImageError:
        raise _DocumentFailure("not an image Pillow can read") from None
    except Image.DecompressionBombError as e:  # Pillow's guard, as when docvec embeds an image file
        raise _DocumentFailure(bomb_reason(e)) from None
    except (OSError, ValueError, SyntaxError) as e:
        raise _DocumentFailure(f"cannot read the image: {e}") from None
    except Exception as e:  # Pillow's plugins raise odd types (struct.error, IndexError) on damaged files
        raise _DocumentFailure(f"cannot read the image: {type(e).__name__}: {e}") from None


def _frame_count(image: Image.Image) -> int:
    # Only TIFF frames are pages; the other frames Pillow knows are animation (GIF, WebP, APNG) or
    # previews (MPO), for which the first frame stands for the document.
    if image.format == "TIFF":
        return int(getattr(image, "n_frames", 1))
    return 1


def _image_frame(image: Image.Image, number: int, max_pixels: int, budget: int) -> Image.Image:
    """Frame ``number`` (1-based) upright, RGB on white, downscaled to at most ``max_pixels``; refused
    before decoding when that would take more than ``budget`` bytes."""
    try:
        if number > 1:
            image.seek(number - 1)
        width, height = image.size
        if width * height > max_pixels and image.format == "JPEG":
            # JPEG can decode at 1/2, 1/4, 1/8 scale: far less work and memory for a large photo or scan.
            image.draft(None, fit_within(width, height, max_pixels))
        if reason := decode_refusal(image, budget):  # the size as it will be decoded (drafted, if JPEG)
            raise _PageFailure(reason)
        image.load()
        frame = ImageOps.exif_transpose(image)
        if frame.mode.startswith("I;16"):
            # 16-bit greyscale scans: convert("RGB") would clip them to white; keep the high byte instead.
            frame = Image.fromarray((np.asarray(frame) >> 8).astype(np.uint8), "L")
        frame = to_rgb(frame)
        size = fit_within(frame.width, frame.height, max_pixels)
        if size != frame.size:
            frame = frame.resize(size, Image.Resampling.LANCZOS, reducing_gap=3.0)
        return frame
    except _PageFailure:
        raise
    except MemoryError:
        raise _PageFailure("out of memory decoding the image") from None
    except (OSError, ValueError, SyntaxError, EOFError) as e:
        raise _PageFailure(f"cannot decode the image: {e}") from None
    except Exception as e:  # Pillow's plugins raise odd types (struct.error, IndexError) on damaged files
        raise _PageFailure(f"cannot decode the image: {type(e).__name__}: {e}") from None


def main(argv: list[str]) -> None:
    """A worker process's entry point, ``TASKS_FD RESULTS_FD MEMORY_LIMIT``: serve the parent's pipes."""
    tasks_fd, results_fd, memory_limit = (int(a) for a in argv)
    serve(Connection(tasks_fd, writable=False), Connection(results_fd, readable=False), memory_limit)
