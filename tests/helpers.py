"""What several test modules share: the page budgets and the settings they index with, generated images and
inputs, the parity shapes, an eval dataset, and the numbers a run reports at its end. Tests import these
from here, never from each other (fixtures live in conftest.py; processes and documents in processes.py and
documents.py)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

import numpy as np
from PIL import Image, ImageDraw

from docvec import Embedder, EmbedSettings, ModelFiles, RenderSettings, Settings
from docvec._records import EmbeddingRecord

ROOT = Path(__file__).resolve().parents[1]

# The page budgets (pixels a page) the tests index with: a few image tokens of 28 x 28 pixels a page, fast on
# 2 cores, and the same code path as a real model's budget.
#: 64 image tokens a page (8 x 8)
SMALL = 28 * 28 * 64
#: 16 image tokens a page (4 x 4): where a test runs several models or many searches
TINY = 28 * 28 * 16
#: 4 image tokens a page (2 x 2): a few hundred pages take seconds
MINIMAL = 28 * 28 * 4
#: pages of the generated book (the ``book`` fixture)
BOOK_PAGES = 117

#: texts the parity tests embed: a question, a sentence, unicode, one character, more than a decode batch
TEXTS = [
    "what is the total amount due?",
    "Quarterly revenue grew 12% year over year, driven by the EMEA region.",
    "Ünïcödé, 中文, emoji 🚀 and numbers 3.14159",
    "a",
    " ".join(f"token{i}" for i in range(300)),  # longer than one decode batch of 256
]

#: the largest MaxSim difference from a reference per query token allowed in the parity tests (a score sums
#: one best match per query token, so its error grows with the query): measured 1.1e-3 for a whole score of
#: a 9-token query on an Intel AMX CPU (jina-embeddings-v4's head), under 1e-3 on AMD Zen 4
MAXSIM_TOLERANCE = 2.5e-4

#: the six image shapes parity is measured on: square, wide, tall, tiny, an A4 page, a side that rounds at .5
SHAPES = {
    "square-448": (448, 448),
    "wide-900x300": (900, 300),
    "tall-300x900": (300, 900),
    "tiny-60x50": (60, 50),
    "a4-page-1240x1754": (1240, 1754),
    "half-350x238": (350, 238),
}


def page_image(width: int, height: int, seed: int = 0) -> Image.Image:
    """A deterministic image with structure (gradients, blocks, text-like strokes), not flat colour."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    base = np.stack(
        [(x * 255 // max(width - 1, 1)), (y * 255 // max(height - 1, 1)), ((x + y) * 3) % 256], axis=-1
    ).astype(np.uint8)
    for _ in range(12):
        x0, y0 = int(rng.integers(0, width)), int(rng.integers(0, height))
        base[y0 : y0 + max(height // 20, 1), x0 : x0 + max(width // 5, 1)] = rng.integers(0, 256, 3)
    return Image.fromarray(base, "RGB")


def a4_page() -> Image.Image:
    """An A4 page at 150 dpi with text-like lines, a table and a chart: the shape docvec embeds most."""
    img = Image.new("RGB", (1240, 1754), "white")
    d = ImageDraw.Draw(img)
    for i in range(40):
        d.text((100, 120 + 22 * i), f"Line {i}: lorem ipsum dolor sit amet {i * 7919 % 1000}", fill="black")
    for r in range(6):
        for c in range(4):
            d.rectangle((100 + 250 * c, 1050 + 40 * r, 340 + 250 * c, 1085 + 40 * r), outline="black")
    for i, h in enumerate((120, 200, 160, 260)):
        d.rectangle((200 + 180 * i, 1650 - h, 300 + 180 * i, 1650), fill=(30, 90, 200))
    return img


def shape_image(name: str) -> Image.Image:
    """The image of one of :data:`SHAPES`."""
    if name.startswith("a4"):
        return a4_page()
    w, h = SHAPES[name]
    return page_image(w, h, seed=len(name))


#: pages of three sizes that the batching tests send through the vision encoder in one pass
MIXED_PAGES = ("wide-900x300", "tall-300x900", "half-350x238")

T = TypeVar("T")


def in_one_batch(
    files: ModelFiles, settings: EmbedSettings, embed: Callable[[Embedder, list[Image.Image]], T]
) -> tuple[list[Image.Image], T]:
    """The :data:`MIXED_PAGES` and ``embed(embedder, pages)`` with ``vision_batch`` set to take them all in
    one vision-encoder pass (llama.cpp patch 0008) and their prompts as sequences of one language-model
    batch (in as many llama.cpp calls as ``decode_batch`` takes), which it checks."""
    images = [shape_image(name) for name in MIXED_PAGES]
    with Embedder(files, settings.model_copy(update={"vision_batch": len(images)})) as batched:
        session = batched._session
        assert session.pages is not None
        before = session.vision.passes, session.pages.calls, session.context.calls
        got = embed(batched, images)
        assert session.vision.passes - before[0] == 1
        assert session.pages.calls - before[1] >= 1 and session.context.calls == before[2]
    return images, got


def eval_dataset(root: Path) -> Path:
    """A dataset for `docvec eval`, written under ``root``: 6 pages (four images and a two-page PDF), 4
    judged queries and one without judgements."""
    corpus = root / "corpus"
    corpus.mkdir(parents=True)
    for i, name in enumerate(("alpha", "beta", "gamma", "delta")):
        page_image(220 + 20 * i, 300, seed=10 + i).save(corpus / f"{name}.png")
    first, second = page_image(300, 400, seed=20), page_image(300, 400, seed=21)
    first.save(corpus / "report.pdf", save_all=True, append_images=[second])
    queries = [("q1", "alpha chart"), ("q2", "beta table"), ("q3", "report summary"), ("q4", "mixed")]
    queries.append(("q5", "nobody judged this"))
    (root / "queries.jsonl").write_text("".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in queries))
    qrels = ["query-id\tcorpus-id\tscore", "q1\talpha\t1", "q2\tbeta\t2", "q2\tgamma\t1"]
    qrels += ["q3\treport#2\t1", "q4\treport#1\t2", "q4\tdelta\t1", "q4\tgamma\t0", "q5\talpha\t0"]
    (root / "qrels.tsv").write_text("\n".join(qrels) + "\n")
    return root


def stored_page(doc_id: str, source: str, page: int = 1, **fields: object) -> dict[str, object]:
    """A stored page's payload as docvec writes one (:class:`docvec.PagePayload`), for tests that put
    points into a store by hand; ``fields`` replace its own."""
    from docvec import PagePayload

    info = {"profile": "test", "model": "m.gguf", "mmproj": "mm.gguf", "dim": 4, "min_pixels": 1}
    payload = PagePayload.model_validate(
        {
            "doc_id": doc_id,
            "source": source,
            "page": page,
            "page_count": page,
            "pages_indexed": page,
            "content_sha256": "0" * 64,
            "kind": "image",
            "width": 1,
            "height": 1,
            "image": f"{doc_id}-{page}.png",
            "thumbnail": f"{doc_id}-{page}.jpg",
            "embedding": {**info, "max_pixels": 1, "key": "k"},
            "ingested_at": "2026-01-01T00:00:00Z",
            **fields,
        }
    )
    return payload.model_dump(mode="json")


def index_settings(
    data_dir: Path, model: Path | str, *, max_pixels: int = SMALL, threads: int = 2, **extra: Any
) -> Settings:
    """The settings of an index the tests open: its data folder, its model, its page budget and threads, one
    render worker with a 120 s limit; ``extra``, any other setting."""
    return Settings(
        data_dir=data_dir,
        model=str(model),
        embed=EmbedSettings(max_pixels=max_pixels, threads=threads),
        render=RenderSettings(workers=1, timeout_s=120),
        **extra,
    )


def one_line_error(output: str) -> str:
    """The one line a command printed on a refusal (``error: ...``, no traceback); fails if it said more."""
    lines = [ln for ln in output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), output
    assert "Traceback" not in output
    return lines[0]


def docvec_env(data: Path, model: Path | str, *, max_pixels: int, threads: int = 1) -> dict[str, str]:
    """The ``DOCVEC_*`` variables of a docvec command or server the tests start: its data folder, its
    model, its page budget and its threads."""
    return {
        "DOCVEC_DATA_DIR": str(data),
        "DOCVEC_MODEL": str(model),
        "DOCVEC_EMBED__MAX_PIXELS": str(max_pixels),
        "DOCVEC_EMBED__THREADS": str(threads),
    }


def rerank_env(data: Path, model: Path | str, **more: str | None) -> dict[str, str | None]:
    """The environment of a command the rerank tests run (CliRunner's ``env``: ``None`` unsets): 16 image
    tokens a page, two threads, no reranker or rerank depth from the caller's environment unless ``more``
    names them, and wide columns."""
    env: dict[str, str | None] = {
        **docvec_env(data, model, max_pixels=TINY, threads=2),
        "DOCVEC_RERANK_MODEL": None,
        "DOCVEC_RERANK": None,
        "COLUMNS": "300",
    }
    return env | more


def embed_json(model: Path | str, image: Path, *flags: str) -> list[EmbeddingRecord]:
    """What ``docvec embed --model MODEL -q "invoice total" -p "a passage" -i IMAGE --json FLAGS`` prints,
    checked to be one record an input, in the order given."""
    from pydantic import TypeAdapter
    from typer.testing import CliRunner

    from docvec._cli import app

    args = ["embed", "--model", str(model), "-q", "invoice total", "-p", "a passage", "-i", str(image)]
    r = CliRunner().invoke(app, [*args, "--json", *flags])
    assert r.exit_code == 0, r.output
    rows = TypeAdapter(list[EmbeddingRecord]).validate_json(r.stdout)
    assert [(x.kind, x.input) for x in rows] == [
        ("query", "invoice total"),
        ("passage", "a passage"),
        ("image", str(image)),
    ]
    return rows


def load_flow(name: str) -> ModuleType:
    """``flows/<name>.py``, loaded as a Prefect deployment loads its entrypoint (Prefect puts the file's
    folder on ``sys.path``, where the flows' own modules are)."""
    from prefect.utilities.importtools import load_script_as_module

    return load_script_as_module(str(ROOT / "flows" / f"{name}.py"))


def copy_documents(documents: Path, folder: Path, names: Iterable[str]) -> Path:
    """``folder`` (created) holding copies of the named files of ``documents``."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        shutil.copy(documents / name, folder / name)
    return folder


#: numbers the tests measured (parity cosines, timings), printed at the end of the run
REPORTED: list[tuple[str, float]] = []


def report(what: str, value: float) -> None:
    """Record a measured number; the run prints them all at the end."""
    REPORTED.append((what, value))


def tomoro_layout(colqwen3_dir: Path, out: Path) -> Path:
    """The tiny ColQwen3 saved as tomoro-colqwen3-embed's checkpoints are (vLLM's ColQwen3 loader reads these
    names and this config): the model under ``vlm.`` (``vlm.model.language_model.*``, ``vlm.model.visual.*``),
    the head as ``embedding_proj_layer``, a Qwen3-VL config of ``model_type`` ``colqwen3`` with the head's
    size as ``embed_dim`` and its own remote code named in ``auto_map``."""
    from safetensors.torch import load_file, save_file

    hf = colqwen3_dir / "hf"
    out.mkdir(parents=True)
    for f in hf.iterdir():
        if f.name not in ("config.json", "model.safetensors"):
            (out / f.name).symlink_to(f)
    config = json.loads((hf / "config.json").read_text())
    config |= {
        "architectures": ["ColQwen3"],
        "model_type": "colqwen3",
        "embed_dim": 320,
        "auto_map": {"AutoModel": "modeling_colqwen3.ColQwen3"},
    }
    (out / "config.json").write_text(json.dumps(config))
    tensors = load_file(hf / "model.safetensors")
    renamed = {
        k.replace("custom_text_proj", "embedding_proj_layer")
        if k.startswith("custom_text_proj")
        else f"vlm.{k}": v
        for k, v in tensors.items()
    }
    save_file(renamed, out / "model.safetensors", metadata={"format": "pt"})
    return out
