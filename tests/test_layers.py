"""Import layers: ``app -> {eval, training} -> pipeline -> {retrievers, verifier} -> garag core``.

``prompts`` is data that the stages read; the core never reads it.  The package
``garag`` itself (its ``__init__``) is the public facade: ``garag.load`` reaches
the Python API in ``app.api`` lazily, so it counts as the app layer, while every
``garag.*`` submodule is the core.  No cycles.

The rules are checked on the real source tree by walking every module's AST
(function-level imports included), and the checker itself is shown to catch a
planted upward import and a planted cycle.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("garag", "pipeline", "retrievers", "verifier", "training", "eval", "prompts", "app")

# layer -> layers it must never import
FORBIDDEN = {
    "core": {"app", "eval", "training", "pipeline", "retrievers", "verifier", "prompts"},
    "prompts": {"app", "eval", "training", "pipeline", "retrievers", "verifier"},
    "retrievers": {"app", "eval", "training", "pipeline", "verifier"},
    "verifier": {"app", "eval", "training", "pipeline", "retrievers"},
    "pipeline": {"app", "eval", "training"},
    "training": {"app", "eval"},
    "eval": {"app", "training"},
    "app": set(),
}


def layer(module: str) -> str:
    """The layer of a dotted module name: ``app`` and the ``garag`` facade are the application, the
    rest of ``garag`` the core, every other package its own layer."""
    if module == "garag":
        return "app"
    top = module.split(".")[0]
    return "core" if top == "garag" else top


def modules(root: Path, packages: Iterable[str] = PACKAGES) -> dict[str, Path]:
    """Dotted name -> file for every module of the packages under ``root``."""
    out = {}
    for pkg in packages:
        for path in sorted((root / pkg).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            out[name] = path
    return out


def import_graph(root: Path, packages: Iterable[str] = PACKAGES) -> dict[str, set[str]]:
    """Module -> the project modules it imports (anywhere in the file, relative imports resolved)."""
    mods = modules(root, packages)
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                candidates = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*up, base] if base else up)
                # "from pkg import mod" imports pkg.mod; "from mod import name" imports mod
                candidates = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
            else:
                continue
            for c in candidates:
                while c and c not in mods:
                    c = c.rpartition(".")[0]
                if c and c != name:
                    targets.add(c)
        graph[name] = targets
    return graph


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """``"a -> b"`` for every import that breaks a layer rule."""
    return sorted(f"{a} -> {b}" for a, bs in graph.items() for b in bs if layer(b) in FORBIDDEN[layer(a)])


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph(ROOT)


def test_the_tree_has_the_modules_the_rules_talk_about(graph: dict[str, set[str]]) -> None:
    for name in (
        "garag",
        "garag.config",
        "app.cli",
        "app.api",
        "eval.compare",
        "training.verifier",
        "pipeline.retrieval",
        "verifier.nli",
    ):
        assert name in graph
    assert "eval.compare" in graph["app.commands"] or any(
        t.startswith("eval.") for t in graph["app.commands"]
    )


def test_no_upward_imports(graph: dict[str, set[str]]) -> None:
    assert upward_imports(graph) == []


def test_no_import_cycles(graph: dict[str, set[str]]) -> None:
    assert cycles(graph) == []


def test_only_the_entry_point_imports_the_app(graph: dict[str, set[str]]) -> None:
    importers = sorted(a for a, bs in graph.items() for b in bs if layer(b) == "app" and layer(a) != "app")
    assert importers == []
    # the facade reaches the API and nothing else above the core
    assert graph["garag"] == {"app.api"}
    assert "from app.cli import main" in (ROOT / "run_pipeline.py").read_text(encoding="utf-8")


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return tmp_path


def test_the_checker_catches_an_upward_import_and_a_cycle(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "garag/__init__.py": "",
            "garag/store.py": "def f():\n    from pipeline.retrieval import RetrievalPipeline\n",
            "pipeline/__init__.py": "",
            "pipeline/retrieval.py": "from . import graph_stage\n",
            "pipeline/graph_stage.py": "import pipeline.retrieval\nfrom retrievers.bm25 import X\n",
            "retrievers/__init__.py": "",
            "retrievers/bm25.py": "from verifier import nli\n",
            "verifier/__init__.py": "",
            "verifier/nli.py": "from app.cli import main\n",
            "app/__init__.py": "",
            "app/cli.py": "import json\n",
        },
    )
    g = import_graph(root, ("garag", "pipeline", "retrievers", "verifier", "app"))
    assert upward_imports(g) == [
        "garag.store -> pipeline.retrieval",
        "retrievers.bm25 -> verifier.nli",
        "verifier.nli -> app.cli",
    ]
    assert cycles(g) == [["pipeline.graph_stage", "pipeline.retrieval"]]


def test_importing_the_core_loads_nothing_above_it() -> None:
    """``garag.load`` is lazy: importing a core module (which runs ``garag/__init__``) imports no
    stage and no app module."""
    import subprocess
    import sys

    code = (
        "import sys, garag.store, garag.config; "
        "loaded = sorted({m.split('.')[0] for m in sys.modules} & "
        "{'app', 'eval', 'training', 'pipeline', 'retrievers', 'verifier', 'prompts'}); "
        "print(','.join(loaded))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
