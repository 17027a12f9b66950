"""Settings from the environment and .env, the exported JSON Schemas, the public surface, the pin."""

from __future__ import annotations

import inspect
import json
import re
import typing
from collections.abc import Iterator
from pathlib import Path

import pytest

import docvec
import docvec.api
from docvec import ConfigError, Settings
from docvec._cli._schemas import render_schemas
from docvec._config import settings_for
from docvec._tools._toolchain import LLAMA_CPP_PYTHON_VERSION
from docvec.api._errors import _STATUS

ROOT = Path(__file__).resolve().parents[1]


def test_settings_from_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DOCVEC_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("DOCVEC_MODEL", "/models/jina")
    monkeypatch.setenv("DOCVEC_EMBED__DIM", "512")
    monkeypatch.setenv("DOCVEC_EMBED__THREADS", "3")
    s = Settings()
    assert s.data_dir == tmp_path / "data" and s.model == "/models/jina"
    assert s.embed.dim == 512 and s.embed.threads == 3


def test_settings_from_dotenv_and_precedence(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    for k in ("DOCVEC_MODEL", "DOCVEC_DATA_DIR", "DOCVEC_EMBED__DIM"):
        monkeypatch.delenv(k, raising=False)
    (tmp_path / ".env").write_text("DOCVEC_MODEL=from-dotenv\nDOCVEC_EMBED__DIM=256\n")
    assert Settings().model == "from-dotenv" and Settings().embed.dim == 256
    monkeypatch.setenv("DOCVEC_MODEL", "from-env")
    assert Settings().model == "from-env"


def test_bad_settings_say_what_is_wrong(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DOCVEC_EMBED__DIM", "0")
    with pytest.raises(ValueError, match="dim"):
        Settings()
    monkeypatch.setenv("DOCVEC_EMBED__DIM", "512")
    monkeypatch.setenv("DOCVEC_EMBED__MIN_PIXELS", "5000")
    monkeypatch.setenv("DOCVEC_EMBED__MAX_PIXELS", "4000")
    with pytest.raises(ValueError, match=r"min_pixels \(5000\) is larger than max_pixels \(4000\)"):
        Settings()


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"store_reserve_mb": -1}, r"^store_reserve_mb: Input should be greater than or equal to 0$"),
        (
            {"collection": "my papers"},
            r"^collection: 'my papers' is not a collection name: use 1-128 letters",
        ),
        (
            {"collection": "papers.v2"},
            r"^collection: 'papers.v2' is a version's name \(docvec names a collection's versions NAME.v1",
        ),
        ({"search_mode": "bogus"}, r"^search_mode: Input should be 'auto', 'dense'"),
        ({"rerank": 5}, r"rerank is set but rerank_model is not"),
    ],
)
def test_overrides_are_checked_as_settings_are(
    override: dict[str, object], message: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`Index.open(settings, **overrides)` and `connect` take their settings from settings_for: an override
    follows the setting's rules, whichever way the rest was given."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DOCVEC_COLLECTION", raising=False)
    given = Settings(data_dir=tmp_path / "data", model="m")
    for where in (given, tmp_path / "data", None):
        with pytest.raises(ConfigError, match=message):
            settings_for(where, **override)
    with pytest.raises(ValueError, match=message.split(": ", 1)[-1].removesuffix("$")):
        Settings(**override)  # type: ignore[arg-type]  # the rule an environment's value meets


def test_overrides_keep_what_was_named_explicitly(tmp_path: Path) -> None:
    given = Settings(data_dir=tmp_path / "data", model="m")
    again = settings_for(given, collection="papers", store_reserve_mb="5")  # read as the environment is
    assert (again.collection, again.store_reserve_mb) == ("papers", 5)
    assert (again.model, again.data_dir) == ("m", tmp_path / "data")
    # what a collection's record gives way to (docvec._pipeline._fit.fitting_settings)
    assert again.model_fields_set == {"data_dir", "model", "collection", "store_reserve_mb"}
    assert settings_for(given) is given and given.collection == "docvec"


@pytest.mark.parametrize("name", sorted(render_schemas()))
def test_schemas_are_in_sync(name: str) -> None:
    path = ROOT / "schemas" / name
    assert path.is_file(), f"{path} is missing: run `make schemas`"
    assert path.read_text() == render_schemas()[name], f"{path} is stale: run `make schemas`"
    json.loads(path.read_text())


def test_no_stray_schema_files() -> None:
    assert sorted(p.name for p in (ROOT / "schemas").glob("*.json")) == sorted(render_schemas())


def _pinned_surface() -> dict[str, list[str]]:
    """The public names per module, as tests/data/public-surface.txt pins them."""
    pinned: dict[str, list[str]] = {}
    current: list[str] = []
    for line in (ROOT / "tests" / "data" / "public-surface.txt").read_text().splitlines():
        line = line.strip()
        if line.startswith("[") and line.endswith("]"):
            current = pinned.setdefault(line[1:-1], [])
        elif line and not line.startswith("#"):
            current.append(line)
    return pinned


def test_public_surface_is_pinned() -> None:
    assert _pinned_surface() == {
        "docvec": sorted(docvec.__all__),
        "docvec.api": sorted(docvec.api.__all__),
    }, "the public surface changed: update tests/data/public-surface.txt (and docs/library.md) if on purpose"
    for module in (docvec, docvec.api):
        for name in module.__all__:
            obj = getattr(module, name)
            if isinstance(obj, type) or inspect.isfunction(obj):
                # docvec's own, defined in its private modules; docvec's are told as docvec's (httpx's way)
                assert obj.__module__ == "docvec" or obj.__module__.startswith("docvec."), name
    assert "Index" in docvec.__all__ and "create_app" in docvec.api.__all__


def test_implementation_modules_are_private() -> None:
    package = ROOT / "src" / "docvec"
    public = {
        p.relative_to(package).as_posix()
        for p in package.rglob("*.py")
        if not any(part.startswith("_") for part in p.relative_to(package).parts)
    }
    # the package's front doors only: the API package's __init__ is public, its modules are not; the
    # integrations are front doors of their own (docs/rag.md), each importing its framework
    integrations = {"rag.py", "mcp.py", "langchain.py", "llama_index.py"}
    assert public == {"samples/make_samples.py", *integrations}, public


def _all_subclasses(cls: type) -> set[type]:
    found = set(cls.__subclasses__())
    for sub in list(found):
        found |= _all_subclasses(sub)
    return found


def _documented_tree(doc: str) -> dict[str, str | None]:
    """Each class in the tree drawn in a docstring, with its parent (by indentation)."""
    parents: dict[str, str | None] = {}
    stack: list[tuple[int, str]] = []
    for line in doc.splitlines():
        m = re.match(r"^([\s│├└─]*)([A-Z][A-Za-z]*Error)\b", line)
        if not m:
            continue
        column = len(m.group(1))
        while stack and stack[-1][0] >= column:
            stack.pop()
        parents[m.group(2)] = stack[-1][1] if stack else None
        stack.append((column, m.group(2)))
    return parents


def test_every_error_is_exported_and_in_the_documented_tree() -> None:
    from docvec import _errors

    tree = _documented_tree(_errors.__doc__ or "")
    errors = _all_subclasses(docvec.DocvecError) | {docvec.DocvecError}
    assert {c.__name__ for c in errors} == set(tree), "the docstring's tree and the classes differ"
    for cls in errors:
        assert getattr(_errors, cls.__name__) is cls, f"{cls.__name__} is defined outside docvec._errors"
        assert cls.__doc__, f"{cls.__name__} has no docstring"
        parents = [b.__name__ for b in cls.__bases__ if issubclass(b, docvec.DocvecError)]
        assert tree[cls.__name__] == (parents[0] if parents else None), cls.__name__
    # what a caller acts on is exported: every class a server answers with a status of its own (a served
    # index raises it again), and their parents
    answered = {cls for cls, _ in _STATUS}
    for cls in answered | {b for c in answered for b in c.__mro__ if issubclass(b, docvec.DocvecError)}:
        assert getattr(docvec, cls.__name__, None) is cls, f"{cls.__name__} is not exported"


def test_toolchain_pin_matches_the_build_script() -> None:
    pin = dict(
        line.split("=", 1)
        for line in (ROOT / "llama.cpp" / "pin.env").read_text().splitlines()
        if "=" in line
    )
    assert pin["LLAMA_CPP_PYTHON_VERSION"] == LLAMA_CPP_PYTHON_VERSION
    import importlib.metadata

    assert importlib.metadata.version("llama_cpp_python") == LLAMA_CPP_PYTHON_VERSION


def _docvec_types(hint: object) -> Iterator[type]:
    """The classes of docvec's own that a type hint names, through unions, generics and aliases."""
    args = typing.get_args(hint)
    if args:
        yield from _docvec_types(typing.get_origin(hint))
        for arg in args:
            yield from _docvec_types(arg)
    elif isinstance(hint, type) and hint.__module__.startswith("docvec"):
        yield hint


def test_public_signatures_use_public_types() -> None:
    # a type a public signature takes or returns is one a user can import from docvec
    public = {getattr(docvec, name) for name in docvec.__all__}
    leaks: dict[str, set[str]] = {}
    for name in docvec.__all__:
        obj = getattr(docvec, name)
        if not (inspect.isclass(obj) or inspect.isfunction(obj)):
            continue  # a type alias (ModeChoice): no signature of its own
        members = vars(obj).items() if inspect.isclass(obj) else [(name, obj)]
        for member, value in members:
            if member.startswith("_") and member != "__init__":
                continue
            fn = value.fget if isinstance(value, property) else getattr(value, "__func__", value)
            if not callable(fn) or isinstance(fn, type):
                continue
            for hint in typing.get_type_hints(fn).values():
                for leaked in set(_docvec_types(hint)) - public:
                    leaks.setdefault(f"{leaked.__module__}.{leaked.__qualname__}", set()).add(
                        f"{name}.{member}"
                    )
    assert leaks == {}, "export these from docvec, or keep them out of public signatures"
