"""The floor plan holds (#48): no module of launcher/ or trainer/ over 320 lines, no function over
50, every package's __init__ says what it holds, and no import cycle between modules, counting the
imports written inside functions (import-linter's contracts see those too, but only the layers they
name; a cycle anywhere is caught here)."""
from __future__ import annotations

import ast
from pathlib import Path

from support.common import REPO

PACKAGES = ("launcher", "trainer")
MAX_MODULE_LINES, MAX_FUNCTION_LINES = 320, 50


def modules() -> dict[str, Path]:
    """Dotted name → file, for every module of the two packages."""
    found = {}
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            parts = path.relative_to(REPO).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def test_no_module_is_over_320_lines():
    long = {name: n for name, path in modules().items() if (n := len(path.read_text().splitlines())) > MAX_MODULE_LINES}
    assert long == {}


def test_no_function_is_over_50_lines():
    long = {}
    for name, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if (n := node.end_lineno - node.lineno + 1) > MAX_FUNCTION_LINES:
                    long[f"{name}.{node.name}"] = n
    assert long == {}


def test_every_package_says_what_it_holds():
    silent = [name for name, path in modules().items() if path.name == "__init__.py"
              and not ast.get_docstring(ast.parse(path.read_text()))]
    assert silent == []


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The package's modules this one imports, at its top or inside a function."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1] + ([base] if base else []))
            targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        found |= {t for t in targets if t in known}
    return found - {name}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every group of modules that import each other round (Tarjan's strongly connected components)."""
    index, low, stack, on_stack, groups, counter = {}, {}, [], set(), [], [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in graph:
        if v not in index:
            visit(v)
    return groups


def test_no_import_cycle_counting_the_imports_inside_functions():
    found = modules()
    # A package's __init__ importing its own modules is how a package is made, not a cycle.
    graph = {name: {t for t in imports_of(name, path, set(found)) if not (path.name == "__init__.py"
                                                                          and t.startswith(name + "."))}
             for name, path in found.items()}
    assert cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle_through_a_function_level_import(tmp_path):
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from launcher import view\n    import launcher.plan\n")
    assert imports_of("launcher.x", module, {"launcher", "launcher.view", "launcher.plan"}) == {
        "launcher", "launcher.view", "launcher.plan"}
