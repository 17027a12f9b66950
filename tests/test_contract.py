"""One contract, local or served: every test here runs against an :class:`Index` in this process and
against a :class:`RemoteIndex` of a running ``docvec serve`` (the command, in a process of its own), and
asks the same of both: the same answers, the same error classes with the same messages."""

from __future__ import annotations

import io
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from docvec import (
    ConflictError,
    DocvecError,
    Index,
    IndexLike,
    IngestError,
    InputError,
    NotFoundError,
    ReindexSpec,
    RemoteIndex,
    RenderError,
    SearchFilter,
    Settings,
    connect,
)

from .helpers import TINY, copy_documents, docvec_env
from .processes import served

DOCUMENTS = ("pysamples__smile.png", "pysamples__minimal-document.pdf", "pysamples__pdflatex-4-pages.pdf")
LIMIT = 10 << 20


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory, documents: Path) -> Path:
    return copy_documents(documents, tmp_path_factory.mktemp("contract-corpus"), DOCUMENTS)


@pytest.fixture(scope="module", params=["local", "served"])
def index(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, tiny_dir: Path, corpus: Path
) -> Iterator[IndexLike]:
    """The corpus indexed, then the index as this test's face of it: local, or served."""
    data = tmp_path_factory.mktemp(f"contract-{request.param}")
    settings = Settings(data_dir=data, model=str(tiny_dir), embed={"max_pixels": TINY, "threads": 1})
    if request.param == "local":
        with Index.open(settings) as local:
            local.add([corpus])
            yield local
        return
    with Index.open(settings) as local:  # the server then starts with the corpus there
        local.add([corpus])
    log = data.parent / f"{data.name}.log"
    # the served face as its owner's programs meet it: connect() finds the server holding the store, and
    # the token that makes this user its owner (any path it can read, as without the server)
    with served(docvec_env(data, tiny_dir, max_pixels=TINY), log), connect(settings) as remote:
        assert isinstance(remote, RemoteIndex)
        yield remote


def _raised(
    cls: type[DocvecError], message: str, call: Callable[..., object], *args: object, **kwargs: object
) -> DocvecError:
    """The error ``call(*args, **kwargs)`` raises: of exactly ``cls`` (not a relative), with ``message``
    (or matching it, as a regular expression)."""
    with pytest.raises(DocvecError) as caught:
        call(*args, **kwargs)
    assert type(caught.value) is cls, f"{type(caught.value).__name__}: {caught.value}"
    assert str(caught.value) == message or re.fullmatch(message, str(caught.value)), str(caught.value)
    return caught.value


# -- what is indexed -----------------------------------------------------------------------------------


def test_documents_and_counts(index: IndexLike, corpus: Path) -> None:
    listed = index.documents()
    assert {d.name for d in listed.documents} == set(DOCUMENTS) and listed.total == 3
    assert index.count() == sum(d.pages_indexed for d in listed.documents) == 1 + 1 + 4
    assert index.documents(offset=1, limit=1).documents == listed.documents[1:2]
    book = next(d for d in listed.documents if d.name == "pysamples__pdflatex-4-pages.pdf")
    pages = index.pages_of(book.doc_id)
    assert [(p.doc_id, p.page) for p in pages] == [(book.doc_id, n) for n in (1, 2, 3, 4)]
    assert all(p.width > 0 and p.height > 0 and p.text_from == "pdf" for p in pages)


def test_files_of_a_page_and_a_document(index: IndexLike, corpus: Path) -> None:
    doc = next(d for d in index.documents().documents if d.kind == "image")
    image = index.page_file(doc.doc_id, 1)
    thumbnail = index.page_file(doc.doc_id, 1, thumbnail=True)
    assert image.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and thumbnail.read_bytes()[:2] == b"\xff\xd8"
    found = index.document_file(doc.doc_id)
    assert (found.path.read_bytes(), found.name, found.kind) == (
        (corpus / doc.name).read_bytes(),
        doc.name,
        "image",
    )


def test_unknown_documents_and_versions(index: IndexLike) -> None:
    missing = "0" * 32
    _raised(NotFoundError, f"no document {missing}", index.pages_of, missing)
    doc = index.documents().documents[0].doc_id
    _raised(NotFoundError, f"document {doc} has no indexed page 99", index.page_file, doc, 99)
    _raised(NotFoundError, "collection 'docvec' has no version 'docvec.v9'", index.drop_version, "docvec.v9")
    assert index.delete(missing, by="doc_id") == 0


# -- searching -----------------------------------------------------------------------------------------


def test_search(index: IndexLike) -> None:
    hits = index.search("a smiling face", 3)
    assert len(hits) == 3 and [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert {h.name for h in hits} <= set(DOCUMENTS)
    # auto: the dense ranking, fused with the keyword ranking on a collection with text (the default)
    assert index.search_mode() == "dense+text" and index.search_mode("auto") == "dense+text"


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        (("x", 0), {}, "k must be between 1 and 100, not 0"),
        (("x", 101), {}, "k must be between 1 and 100, not 101"),
        (("   ", 5), {}, "the query is empty"),
        (("", 5), {}, "the query is empty"),
        (("x", 5), {"prefetch": 0}, "prefetch must be from 1 to 10000 pages, not 0"),
    ],
)
def test_bad_searches_get_one_message(
    index: IndexLike, args: tuple[object, ...], kwargs: dict[str, object], message: str
) -> None:
    _raised(InputError, message, index.search, *args, **kwargs)


def test_what_the_collection_refuses_now_is_a_conflict(index: IndexLike) -> None:
    # valid requests that the collection's present state refuses: a 409 over the API, not a 400 or 500
    message = (
        "collection 'docvec' is single-vector: search mode 'hybrid' needs a multi-vector collection "
        r"\(`docvec reindex --multivector` makes one from it\)"
    )
    _raised(ConflictError, message, index.search, "x", 5, mode="hybrid")
    live = next(v.version for v in index.versions() if v.live)
    message = f"version '{live}' is live (collection 'docvec'): it cannot be dropped"
    _raised(ConflictError, message, index.drop_version, live)
    assert index.count() == 6


# -- writing -------------------------------------------------------------------------------------------


def test_uploads(index: IndexLike, documents: Path) -> None:
    name = "grayscale.pdf"
    data = (documents / "pysamples__grayscale-image.pdf").read_bytes()
    added = index.add_upload(io.BytesIO(data), name=name, tags=["team=ml"], limit=LIMIT)
    assert (added.name, added.pages, added.already_indexed) == (name, 1, False)
    again = index.add_upload(io.BytesIO(data), name=name, limit=LIMIT)
    assert again.already_indexed and again.doc_id == added.doc_id
    assert index.delete(added.doc_id, by="doc_id") == 1
    refused: list[tuple[bytes, str, type[DocvecError], str]] = [
        (b"", "empty.pdf", RenderError, "empty.pdf: the file is empty"),
        (
            b"just some text",
            "junk.pdf",
            RenderError,
            r"junk.pdf: not a document \(neither a PDF nor an image\)",
        ),
        (b"%PDF-1.4\n%broken\n", "broken.pdf", IngestError, "broken.pdf could not be indexed: .*"),
    ]
    for body, upload, cls, message in refused:
        error = _raised(cls, message, index.add_upload, io.BytesIO(body), name=upload, limit=LIMIT)
        if isinstance(error, IngestError):  # the reasons travel with it, naming the upload
            assert error.failures and error.failures[0]["path"] == upload
    bad_tag = "tag 'team' is not of the form key=value"
    _raised(InputError, bad_tag, index.add_upload, io.BytesIO(data), tags=["team"], limit=LIMIT)


def test_files_added_and_deleted(index: IndexLike, tmp_path: Path, documents: Path) -> None:
    folder = tmp_path / "more"
    folder.mkdir()
    shutil.copy(documents / "pysamples__grayscale-image.pdf", folder / "gray.pdf")
    (folder / "empty.pdf").write_bytes(b"")
    report = index.add([folder], tags={"team": "ops", "year": "2026"})  # tags as a mapping (or key=value)
    assert (report.documents_indexed, report.pages_indexed, report.documents_failed) == (1, 1, 1)
    assert [(Path(f.path).name, f.reason) for f in report.failures] == [("empty.pdf", "the file is empty")]
    # a filter's tags in either shape, on either face: the page and only it
    for tags in (["team=ops"], {"year": "2026", "team": "ops"}):
        hits = index.search("gray", 5, filter=SearchFilter(tags=tags))
        assert [h.name for h in hits] == ["gray.pdf"], tags
    assert index.search("gray", 5, filter=SearchFilter(tags={"team": "ml"})) == []
    assert index.delete(str(folder / "gray.pdf")) == 1
    assert index.delete(str(folder / "gray.pdf")) == 0


# -- versions ------------------------------------------------------------------------------------------


def test_reindex_to_another_size_and_back(index: IndexLike) -> None:
    before = {v.version for v in index.versions()}
    # what the model does not offer is the caller's to change, refused before any version is begun
    _raised(
        InputError,
        r"reindex with dim=512: dim must be one of 4, 8, 16, 32, 64 for this model "
        r"\(jina-embeddings-v4, 64 wide\), not 512",
        index.reindex,
        ReindexSpec(dim=512),
    )
    _raised(
        InputError,
        r"reindex with max_pixels=602896: max_pixels must lie between 784 and 602112 pixels "
        r"\(jina-embeddings-v4: 1 to 768 image tokens of 28x28 px\), not 602896",
        index.reindex,
        ReindexSpec(max_pixels=769 * 28 * 28),
    )
    assert {v.version for v in index.versions()} == before
    made = index.reindex(ReindexSpec(dim=32))
    assert made.switched and made.new_version not in before
    assert [v.dim for v in index.versions() if v.live] == [32]
    assert len(index.search("a smiling face", 2)) == 2  # the server follows its collection to 32-d queries
    again = index.reindex(ReindexSpec(dim=32))
    assert (
        not again.switched and again.note and "made with this model and these settings already" in again.note
    )
    dropped = index.drop_version(made.old_version or "")
    assert dropped.files_removed == 0  # the new version shows the same page images


# -- what a server does not offer --------------------------------------------------------------------


def test_the_contract_is_what_both_faces_offer(index: IndexLike) -> None:
    # every verb of the contract, on both; what only a process holding the store does (its model, staging
    # uploads, preparing and advertising a server) is the local index's alone, never a stub on the other
    verbs = {n for n in vars(IndexLike) if not n.startswith("_")} - {"settings", "collection"}
    assert verbs <= set(dir(type(index)))
    only_local = {"embedder", "keep_upload", "prepare", "advertise", "stored_pages", "check_reindex"}
    assert only_local <= set(dir(Index)) and not only_local & set(dir(RemoteIndex))
