"""Examples that cannot rot: what the documentation shows is what the code does today.

Every inventory and trainer snippet is validated (an error example must fail with the error it
shows), every `tfcompose …` line parses with the current CLI, every measured figure is in the
section of docs/benchmarks.md it cites, the architecture page names every module (and no module
that is gone), and the run-id rule lists exactly what the configuration hash leaves out."""
from __future__ import annotations

import copy
import re
import shlex

import jsonschema
import pytest
import yaml

from docsite import snippets
from launcher.errors import InventoryError
from launcher.inventory.json_schema import inventory_schema
from launcher.inventory.load import load_cluster
from support.common import REPO

BLOCKS = [b for page in snippets.pages() for b in snippets.blocks(page) if b.lang == "yaml"]
BASE = {"cluster": "docs", "defaults": {"gpus": 0},
        "hosts": [{"name": "h0", "address": "10.0.0.1"}, {"name": "h1", "address": "10.0.0.2"}]}
CHECKER = jsonschema.Draft202012Validator(inventory_schema())


def test_every_yaml_snippet_says_what_it_is():
    unmarked = [b.where for b in BLOCKS if not b.marker]
    assert not unmarked, f"a ```yaml block needs a `<!-- check: … -->` line before it (docsite/snippets.py): {unmarked}"
    assert len([b for b in BLOCKS if b.marker != "none"]) >= 6


def laid_over(base: dict, part: dict) -> dict:
    out = copy.deepcopy(base)
    for key, value in part.items():
        out[key] = laid_over(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def inventory_of(block, tmp_path) -> tuple[dict, object]:
    """The document a snippet stands for, written beside the folders it names."""
    part = yaml.safe_load(block.text)
    doc = part if block.marker == "inventory" else laid_over(BASE, part)
    run = doc.get("run") or {}
    if "code_dir" in run:               # your code's folder, as the snippet names it
        folder = tmp_path / run["code_dir"]
        folder.mkdir(parents=True, exist_ok=True)
        if run.get("requirements"):
            (folder / run["requirements"]).write_text("")
    path = tmp_path / "inventory.yaml"
    path.write_text(yaml.safe_dump(doc))
    return doc, path


CONFIGS = [b for b in BLOCKS if b.marker in ("inventory", "inventory-part", "error")]


@pytest.mark.parametrize("block", CONFIGS, ids=[b.where for b in CONFIGS])
def test_every_inventory_snippet_is_what_validate_and_the_schema_say(block, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    doc, path = inventory_of(block, tmp_path)
    schema_errors = [e.message for e in CHECKER.iter_errors(doc)]
    if block.marker == "error":
        with pytest.raises(InventoryError) as refused:
            load_cluster(path)
        assert any(block.argument in line for line in refused.value.lines), (block.argument, refused.value.lines)
        assert schema_errors, "an error example the editor would not underline"
        return
    load_cluster(path)
    assert not schema_errors, schema_errors


TRAINS = [b for b in BLOCKS if b.marker == "train"]


@pytest.mark.parametrize("block", TRAINS, ids=[b.where for b in TRAINS])
def test_every_trainer_snippet_is_a_valid_train_yaml(block, tmp_path):
    from trainer.spec.load import load_config
    path = tmp_path / "train.yaml"
    path.write_text(block.text)
    load_config(str(path), [])


# --- command lines ----------------------------------------------------------------------------
PLACEHOLDER = re.compile(r"^(?:[A-Z][A-Z_]*|<[^>]+>|[a-z]+\|[a-z|]+)$")


def parse(line: str) -> str:
    """'' when the line parses with the current CLI, else why not. Brackets mark optional parts (kept),
    `…` a repetition (dropped), CAPITALS and <angles> a value."""
    from docsite.reference import cli_group
    line = re.split(r"\s(?:>|\||&&|;)\s", line)[0]          # what the shell does with its output is not ours
    tokens = [t.strip("[]") for t in shlex.split(line.replace("\\|", "|").replace("…", " ").replace("...", " "))]
    tokens = [t for t in tokens if t]
    assert tokens[0] == "tfcompose"
    rest = tokens[1:]
    while rest and rest[0] in ("--debug", "--help"):
        rest = rest[1:]
    if not rest:
        return ""
    commands = cli_group().commands
    if PLACEHOLDER.match(rest[0]):          # `tfcompose COMMAND --help`
        return ""
    if rest[0] not in commands:
        return f"no command {rest[0]!r}"
    command = commands[rest[0]]
    ctx = command.make_context(rest[0], [], resilient_parsing=True)
    numeric = {opt for p in command.params if p.param_type_name == "option"
               and re.search(r"int|float", p.display_type(ctx)) for opt in p.opts}
    given = rest[1:]
    if not given:                           # the command named, not run: `tfcompose report` writes …
        return ""
    args = ["1" if PLACEHOLDER.match(t) and i and given[i - 1] in numeric else t for i, t in enumerate(given)]
    try:
        command.make_context(rest[0], args)
    except Exception as exc:        # noqa: BLE001  (click's usage errors, said as they are)
        return f"{type(exc).__name__}: {exc}"
    return ""


SHELL = [c for page in snippets.pages() for c in snippets.shell_commands(page)]
INLINE = [c for page in snippets.pages() for c in snippets.inline_commands(page)]


def test_the_pages_show_commands():
    assert len(SHELL) >= 20 and len(INLINE) >= 40


@pytest.mark.parametrize("where,line", SHELL + INLINE, ids=[w for w, _ in SHELL + INLINE])
def test_every_tfcompose_line_parses(where, line):
    if re.match(r"^tfcompose [a-z]+:", line):       # a message of the trainer's (`tfcompose trainer: …`)
        return
    assert parse(line) == "", f"{where}: {line}"


def test_a_wrong_option_does_not_parse():
    assert "NoSuchOption" in parse("tfcompose up --colect")
    assert "no command" in parse("tfcompose colect")
    assert parse("tfcompose logs [--host NAME] [--tail N] [--since 10m]") == ""


# --- figures ----------------------------------------------------------------------------------
BENCH = snippets.sections((REPO / "docs" / "benchmarks.md").read_text())
SOURCES = {"benchmarks.md", "reliability.md", "testing.md"}    # where measurements are recorded, not quoted
# (testing.md: the suite's own times, from the table each run prints)


def quoting_paragraphs():
    for page in snippets.pages():
        if page.name in SOURCES:
            continue
        for where, text in snippets.paragraphs(page):
            if snippets.MEASURED.search(text) or snippets.SECTION_REF.search(text):
                yield where, text


QUOTES = list(quoting_paragraphs())


@pytest.mark.parametrize("where,text", QUOTES, ids=[w for w, _ in QUOTES])
def test_every_measured_figure_comes_from_the_benchmarks_it_cites(where, text):
    cited = snippets.SECTION_REF.findall(text)
    assert cited, f"{where}: says it measured something but cites no section of docs/benchmarks.md (B5, H1…)"
    unknown = [c for c in cited if c not in BENCH]
    assert not unknown, f"{where}: no such section in docs/benchmarks.md: {unknown}"
    source = snippets.numbers_in("".join(BENCH[c] for c in cited))
    missing = [f for f in snippets.figures(text) if not snippets.quoted_from(f, source)]
    assert not missing, f"{where}: figures not in {', '.join(cited)}: {missing}"


def test_a_figure_not_in_the_table_is_caught():
    text = "Measured (B5): 38.8 KB instead of 1.49 GB, in 26.6 s; and 99.9 s."
    source = snippets.numbers_in(BENCH["B5"])
    assert [f for f in snippets.figures(text) if not snippets.quoted_from(f, source)] == ["99.9"]


# --- the architecture page and the run-id rule -------------------------------------------------
def test_the_architecture_page_names_every_module_and_no_module_that_is_gone():
    page = (REPO / "docs" / "architecture.md").read_text()
    code = [p for part in ("launcher", "trainer") for p in (REPO / part).rglob("*.py")
            if p.name not in ("__init__.py", "__main__.py")]
    unnamed = [str(p.relative_to(REPO)) for p in code if f"{p.name}`" not in page and f"/{p.name}" not in page]
    assert not unnamed, f"modules the architecture page does not name: {unnamed}"
    names = ({p.name for p in code} | {p.name for p in (REPO / "launcher").rglob("*.sh")}
             | {p.name for p in (REPO / "docsite").glob("*.py")})
    for named in set(re.findall(r"([\w/]+\.(?:py|sh))\b", page)):
        if "/" in named:
            assert any((REPO / root / named).exists() for root in ("", "launcher", "trainer", "docsite")), named
        else:
            assert named in names, named


def test_the_run_id_rule_lists_what_the_configuration_leaves_out():
    from launcher.plan import HOST_NOT_IN_CONFIG, NOT_IN_CONFIG
    page = (REPO / "docs" / "your-cluster.md").read_text()
    rule = page[page.index("**except** these"):page.index("- each host as resolved")]
    said = set(re.findall(r"`([a-z_.]+):?`", rule))
    left_out = set()
    for key, inner in NOT_IN_CONFIG.items():
        if inner is True:
            left_out.add(key)
        elif key == "hosts":
            left_out |= set(inner["__all__"])
        else:
            left_out |= {f"{key}.{k}" for k in inner}
    assert said == left_out, (said ^ left_out)
    assert set(HOST_NOT_IN_CONFIG) <= {"jumps", "proxy_command", "lease_dir"}
