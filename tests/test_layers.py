"""The layers of docvec, held by its imports: front ends -> the index -> pipeline stages -> the model
runtime, the renderer and the store -> settings, records and errors; the build-time tools are used by the
command line only. Every import of every module counts, those inside functions and under TYPE_CHECKING
too."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

from .helpers import ROOT

SRC = ROOT / "src"

#: package or module -> (layer, rank): an import may reach a lower rank, or its own layer, nothing else
LAYERS: dict[str, tuple[str, float]] = {
    **{
        f"docvec.{m}": ("base", 0)
        # _text: what a term is (keyword search, snippets), shared by the records, the renderer, the store
        # and the pipeline
        for m in ("_errors", "_config", "_records", "_closing", "_fileio", "_decoding", "_text")
    },
    "docvec._model": ("model runtime", 1),
    "docvec._render": ("render", 1),
    "docvec._store": ("store", 1),
    "docvec._tools": ("tools", 2),
    "docvec._pipeline": ("pipeline", 2),
    **{f"docvec.{m}": ("index", 3) for m in ("_index", "_live", "_client", "_connect", "_contract")},
    "docvec._cli": ("command line", 4),
    "docvec.api": ("api", 4),
    "docvec._evaluate": ("eval", 4),
    "docvec.samples": ("samples", 4),
    # what agents and RAG frameworks use: over any index, local or served
    **{f"docvec.{m}": ("integrations", 4) for m in ("rag", "langchain", "llama_index", "mcp")},
    # what `import docvec` gives: the front ends may use it (the flows use nothing else)
    "docvec": ("public surface", 3.5),
    "docvec.__main__": ("command line", 4),
}
#: imports across a layer that are part of the design: the command line starts the API server and the MCP
#: server and runs eval, and it alone uses the build-time tools
ACROSS = {
    ("command line", "api"),
    ("command line", "eval"),
    ("command line", "tools"),
    ("command line", "integrations"),  # `docvec mcp`
    ("api", "integrations"),  # the MCP server at /mcp
}
#: layers that no layer above may import, whatever its rank (only those named in ACROSS)
SIDE = {"tools", "command line", "api", "eval"}


def _layer(module: str) -> tuple[str, float]:
    parts = module.split(".")
    for i in range(len(parts), 0, -1):
        found = LAYERS.get(".".join(parts[:i]))
        if found is not None:
            return found
    raise KeyError(module)


def _module_name(path: Path, src: Path) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, src: Path) -> list[tuple[int, str]]:
    """(line, module) of every docvec module ``path`` imports (a ``from X import name`` of a submodule
    counts as importing it)."""
    module = _module_name(path, src)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                sub = src / Path(*f"{target}.{alias.name}".split("."))
                is_module = sub.with_suffix(".py").is_file() or sub.is_dir()
                found.append((node.lineno, f"{target}.{alias.name}" if is_module else target))
    return [(line, name) for line, name in found if name == "docvec" or name.startswith("docvec.")]


def _problems(src: Path = SRC) -> list[str]:
    problems: list[str] = []
    for path in sorted((src / "docvec").rglob("*.py")):
        importer = _module_name(path, src)
        layer, rank = _layer(importer)
        for line, target in _imports(path, src):
            their, their_rank = _layer(target)
            if their == layer:
                continue
            where = f"{path.relative_to(src)}:{line}: {importer} ({layer}) imports {target} ({their})"
            if (layer, their) in ACROSS:
                continue
            if their in SIDE:
                problem = f"{where}: only {', '.join(sorted(a for a, b in ACROSS if b == their))} may"
            elif their_rank > rank:
                problem = f"{where}: upwards"
            elif their_rank == rank:
                problem = f"{where}: across"
            else:
                continue
            if problem not in problems:
                problems.append(problem)
    return problems


def test_imports_go_down_the_layers_only() -> None:
    assert _problems() == []


def test_every_module_has_a_layer() -> None:
    for path in (SRC / "docvec").rglob("*.py"):
        _layer(_module_name(path, SRC))  # a new top-level module must be given its place in LAYERS


def test_flows_use_the_public_surface_only() -> None:
    for path in sorted((ROOT / "flows").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom | ast.Import):
                names = (
                    [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
                )
                private = [n for n in names if n.startswith("docvec.")]
                assert not private, f"{path.name}:{node.lineno} imports {private}: flows use `docvec` only"


@pytest.mark.parametrize(
    ("importer", "target", "verdict"),
    [
        ("docvec._model._embedder", "docvec._tools._convert", "only"),  # the runtime never imports the tools
        ("docvec._pipeline._ingest", "docvec.api._routes", "only"),  # stages never import front ends
        ("docvec._pipeline._ingest", "docvec._index", "upwards"),
        ("docvec._render._renderer", "docvec._model._images", "across"),
        ("docvec._store._edge", "docvec._render", "across"),
    ],
)
def test_the_check_catches(importer: str, target: str, verdict: str, tmp_path: Path) -> None:
    # a copy of the tree with one bad import added: the check names it, and it alone
    src = tmp_path / "src"
    shutil.copytree(SRC / "docvec", src / "docvec", ignore=shutil.ignore_patterns("__pycache__"))
    path = src / Path(*importer.split(".")).with_suffix(".py")
    path.write_text(path.read_text() + f"\nimport {target}\n")
    found = _problems(src)
    assert len(found) == 1 and f"imports {target} " in found[0] and verdict in found[0], found
