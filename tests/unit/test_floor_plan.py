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


# Libraries that make an import slow (the CLI's start, a trainer's): an import inside a function is
# honest when what it imports brings one of them that the module itself does not.
HEAVY = {"tensorflow", "tf_keras", "keras", "numpy", "matplotlib", "optuna", "mlflow", "paramiko", "docker", "rich",
         "pydantic", "yaml", "jinja2", "jsonschema", "cryptography", "typer", "pyte", "PIL", "sklearn", "psutil"}
# The CLI's commands and the trainer's entry point import by command, for the start's speed (bench/cli_start.py).
ENTRY_POINTS = ("launcher.cli", "trainer.main")


def top_level_imports(name: str, path: Path, known: set[str]) -> tuple[set[str], set[str]]:
    """(the package's modules, the outside libraries) this module imports when it is imported: at
    its top, in its classes and in its if/try blocks, not in its functions or under TYPE_CHECKING."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    inside, outside = set(), set()

    def visit(nodes) -> None:
        for node in nodes:
            if isinstance(node, ast.If) and "TYPE_CHECKING" not in ast.unparse(node.test):
                visit(node.body + node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body + node.orelse + node.finalbody + [n for h in node.handlers for n in h.body])
            elif isinstance(node, ast.ClassDef):
                visit(node.body)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                for target in import_targets(node, package):
                    parts = target.split(".")
                    inside.update({".".join(parts[:i]) for i in range(1, len(parts) + 1)} & known)
                    if parts[0] not in PACKAGES:
                        outside.add(parts[0])
    visit(ast.parse(path.read_text()).body)
    return inside - {name}, outside


def import_targets(node, package: str) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1] + ([base] if base else []))
    return [base] + [f"{base}.{alias.name}" for alias in node.names]


def loaded_with(found: dict[str, Path]) -> dict[str, set[str]]:
    """Each module → the modules importing it loads (itself, its packages, what they import at the top)."""
    tops = {name: top_level_imports(name, path, set(found))[0] for name, path in found.items()}
    loaded: dict[str, set[str]] = {}
    for name in found:
        todo, seen = [name], set()
        while todo:
            module = todo.pop()
            if module in seen:
                continue
            seen.add(module)
            parents = {".".join(module.split(".")[:i]) for i in range(1, module.count(".") + 1)} & set(found)
            todo += list(tops[module] | parents)
        loaded[name] = seen
    return loaded


def heavy_closure(found: dict[str, Path]) -> dict[str, set[str]]:
    """Each module → the HEAVY libraries importing it loads."""
    outside = {name: top_level_imports(name, path, set(found))[1] & HEAVY for name, path in found.items()}
    return {name: set().union(*(outside[m] for m in modules_)) for name, modules_ in loaded_with(found).items()}


def quick_commands_load(scratch: Path) -> list[set[str]]:
    """The package's modules `tfcompose --help` loads, and those `validate` of a valid inventory does
    (bench/cli_start.py times the two; its key made here, so validate goes the whole way anywhere)."""
    import json
    import subprocess
    import sys
    key = scratch / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    inventory = scratch / "inventory.yaml"
    inventory.write_text((REPO / "inventory.example.yaml").read_text().replace("~/.ssh/id_ed25519", str(key)))
    script = ("import contextlib, io, json, sys\nfrom launcher.cli import main\nfor argv in sys.argv[1:]:\n"
              "    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
              "        with contextlib.suppress(SystemExit):\n            main(json.loads(argv))\n"
              "    print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('launcher', 'trainer'))))")
    commands = [["--help"], ["validate", "-i", str(inventory)]]
    done = subprocess.run([sys.executable, "-c", script, *map(json.dumps, commands)], cwd=REPO, capture_output=True,
                          text=True, timeout=60, check=True)
    return [set(json.loads(line)) for line in done.stdout.splitlines()[-len(commands):]]


def test_an_import_inside_a_function_keeps_a_heavy_library_off_its_modules_load(tmp_path):
    """#48: an import written inside a function says "this is slow, load it when needed". It is
    honest when it brings a heavy library the module has not loaded, or, in a module `--help` or
    `validate` loads, keeps modules off the CLI's start; otherwise it protects nothing and belongs
    at the top."""
    assert idle_imports(tmp_path) == []


def idle_imports(scratch: Path) -> list[str]:
    """Each import inside a function that protects nothing, as `file:line: the import`."""
    found = modules()
    heavy, loaded = heavy_closure(found), loaded_with(found)
    quick = quick_commands_load(scratch)
    idle = []
    for name, path in found.items():
        if name.startswith(ENTRY_POINTS):
            continue
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in (n for f in ast.walk(ast.parse(path.read_text())) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                     for n in ast.walk(f) if isinstance(n, (ast.Import, ast.ImportFrom))):
            targets = [t for t in import_targets(node, package) if t in found]
            brings = set().union(*(heavy[t] for t in targets)) if targets else set()
            kept_off_the_start = any(name in start and loaded[t] - start for start in quick for t in targets)
            if targets and not brings - heavy[name] and not kept_off_the_start:
                idle.append(f"{path.relative_to(REPO)}:{node.lineno}: {ast.unparse(node)}")
    return sorted(set(idle))
