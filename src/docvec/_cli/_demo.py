"""The offline demo: the tiny test model, the sample documents shipped with docvec, one search."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from rich.console import Console
from rich.table import Table

from .._config import Settings
from .._index import Index
from .._model._embedder import Embedder
from .._model._registry import find_tiny_model
from .._records import IngestReport, SearchResult
from .._tools._tiny import build_tiny_model
from ._common import marked

__all__ = ["QUERY", "run_demo", "sample_documents"]

QUERY = "total amount due on the invoice"


#: What to try next, as the README's quick start has it (tests/test_readme.py holds them equal): the
#: demo prints them with this machine's program, model, data folder and samples.
NEXT_COMMANDS = (
    "export DOCVEC_MODEL={model} DOCVEC_DATA_DIR={data}",
    '{docvec} search "total amount due" -k 3',
    "{docvec} documents",
    "{docvec} ingest {samples}/revenue-chart.png --tag team=finance",
    '{docvec} search "revenue by quarter" --filter tag=team=finance --json',
    "{docvec} serve --port 8000   # the search page at http://127.0.0.1:8000/; Ctrl-C stops it",
)


def sample_documents() -> Path:
    """The folder of sample documents shipped with docvec (our own, licence-clean)."""
    return Path(str(resources.files("docvec") / "samples"))


def run_demo(settings: Settings, *, model_dir: Path, console: Console) -> tuple[IngestReport, SearchResult]:
    """Build (once) the tiny model, ingest the samples into ``settings.data_dir``, run one search, and say
    what this run could and could not show. ``settings.model`` is what the index records as the model
    (``tiny``, or ``model_dir``): later commands load it from there."""
    if find_tiny_model(model_dir) is None:
        console.print(f"building the offline test model in {model_dir} (once) ...")
    else:
        console.print(f"the offline test model: {model_dir}")
    files = build_tiny_model(model_dir, cache_dir=settings.cache_dir)
    with Embedder(files, settings.embed) as emb, Index.open(settings, embedder=emb) as index:
        report = index.add([sample_documents()])
        console.print(
            f"indexed {report.documents_indexed} documents ({report.pages_indexed} pages), "
            f"skipped {report.documents_skipped} unchanged, into {settings.data_dir}"
        )
        hits = index.search(QUERY, k=3)
        unread = sorted(
            d.name
            for d in index.documents().documents
            if any(p.text_from == "unread" for p in index.pages_of(d.doc_id))
        )
    table = Table(title=f"search: {QUERY!r}", title_justify="left")
    for col in ("score", "document", "page"):
        table.add_column(col)
    for h in hits:
        table.add_row(f"{h.score:+.4f}", Path(h.source).name, str(h.page))
    console.print(table)
    for rank, h in enumerate(hits, start=1):
        if h.snippet is not None:  # the page's text around the query's words (docs/text.md)
            console.print(f"{rank}. ", marked(h.snippet), sep="", highlight=False)
    default = Settings.model_fields["model"].default  # what docvec uses when DOCVEC_MODEL names no model
    console.print(
        f"[yellow]{files.language_model.name}: the test model's weights are random, so the pages' look (the "
        "visual half of this ranking) means nothing here; the words found in the pages' text (the snippets) "
        f"are real. Real models: `docvec models pull {default}`.[/]"
    )
    if unread:
        console.print(
            f"[yellow]{', '.join(unread)}: an image, whose words only OCR reads, and OCR could not run "
            "here: tesseract is not installed (Debian: apt-get install tesseract-ocr tesseract-ocr-eng). "
            "Once it is, `docvec reindex --text` reads them, without embedding any page again.[/]"
        )
    return report, hits
