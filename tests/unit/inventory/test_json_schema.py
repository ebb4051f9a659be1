"""The inventory's JSON Schema: `tfcompose schema` is the committed docs/inventory.schema.json, every
key carries a description and its default, and the schema never flags what `validate` accepts (an
editor that underlines a valid inventory would teach users to ignore it)."""
from __future__ import annotations

import copy
import json

import jsonschema
import pytest
import yaml
from hypothesis import HealthCheck, given, settings, strategies as st

from launcher.cli import main
from launcher.errors import InventoryError
from launcher.inventory.json_schema import inventory_schema
from launcher.inventory.load import load_cluster
from support.common import DATA, REPO

SCHEMA_FILE = REPO / "docs" / "inventory.schema.json"
SCHEMA_LINE = "# yaml-language-server: $schema=docs/inventory.schema.json"


@pytest.fixture(scope="module")
def checker():
    return jsonschema.Draft202012Validator(inventory_schema())


def test_tfcompose_schema_prints_the_committed_file(capsys):
    assert main(["schema"]) == 0
    printed = capsys.readouterr().out
    assert json.loads(printed)["title"] == "tfcompose inventory"
    assert printed == SCHEMA_FILE.read_text(), "docs/inventory.schema.json is stale: `tfcompose schema > " \
                                               "docs/inventory.schema.json`"


def test_the_schema_is_a_valid_2020_12_schema():
    jsonschema.Draft202012Validator.check_schema(inventory_schema())


def fields(schema: dict):
    """(path, property) for every property of every model the schema defines."""
    for name, model in [("(top)", schema), *schema["$defs"].items()]:
        for key, prop in model.get("properties", {}).items():
            yield f"{name}.{key}", prop


def test_every_key_has_a_description_saying_what_is_expected():
    missing = [path for path, prop in fields(inventory_schema()) if "Expected " not in prop.get("description", "")
               or len(prop["description"].split("Expected ")[0].strip()) < 8]
    assert not missing, missing


def test_defaults_are_the_models_own():
    from launcher.inventory.schema import Defaults, SSHSettings
    defs = inventory_schema()["$defs"]
    assert defs["Defaults"]["properties"]["tf_port"]["default"] == Defaults().tf_port == 2222
    assert defs["SSHSettings"]["properties"]["host_key_policy"]["default"] == SSHSettings().host_key_policy


def test_the_example_starts_with_the_schema_line_and_both_accept_it(checker, tmp_path, monkeypatch):
    example = REPO / "inventory.example.yaml"
    assert example.read_text().splitlines()[0] == SCHEMA_LINE
    assert (example.parent / SCHEMA_LINE.split("=", 1)[1]).resolve() == SCHEMA_FILE.resolve()
    checker.validate(yaml.safe_load(example.read_text()))
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".ssh" / "id_ed25519").write_text("a key")
    load_cluster(example)


def test_a_mistake_an_editor_should_underline_is_flagged(checker):
    doc = yaml.safe_load((REPO / "inventory.example.yaml").read_text())
    for path, value in ((("defaults", "tf_port"), 70000), (("ssh", "host_key_policy"), "yes"),
                        (("defaults", "tf_prot"), 2222), (("train", "epochs"), 0), (("train", "allreduce"), "fast")):
        bad = copy.deepcopy(doc)
        bad[path[0]][path[1]] = value
        errors = list(checker.iter_errors(bad))
        assert errors, path
    good = copy.deepcopy(doc)
    good["train"]["allreduce"] = "auto"          # the shorthand the model's validator takes
    checker.validate(good)


GOOD = sorted((DATA / "render").glob("*/inventory.yaml"))
BAD = sorted((DATA / "bad_inventories").glob("*.yaml"))


@pytest.mark.parametrize("case", GOOD, ids=[p.parent.name for p in GOOD])
def test_the_valid_fixtures_are_valid_against_the_schema(case, checker):
    checker.validate(yaml.safe_load(case.read_text()))


def test_an_unknown_key_in_the_bad_corpus_is_flagged_by_the_schema_too(checker):
    unknown = [c for c in BAD if "Unknown key" in c.with_suffix(".expected").read_text()]
    assert len(unknown) >= 2
    for case in unknown:
        assert list(checker.iter_errors(yaml.safe_load(case.read_text()))), case.name


# Field by field: a value put into the example, anywhere a key may go. `${VAR}` is left out: the
# editor sees it as written, `validate` after the environment filled it in.
scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**40, 2**40), st.floats(allow_nan=False),
                    st.integers(0, 3000), st.floats(0.01, 10), st.sampled_from(["none", "sync", "grid", "0", "1", "eth0"]),
                    st.text(alphabet=st.characters(blacklist_characters="$"), max_size=12),
                    st.sampled_from(["all", "auto", "127.0.0.1", "/opt/x", "small_cnn", "2g", "strict", "parallel"]))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                       st.dictionaries(st.text(max_size=8), inner, max_size=3)),
                      max_leaves=6)


def key_paths(doc, prefix=()):
    if isinstance(doc, dict):
        for key, value in doc.items():
            yield prefix + (key,)
            yield from key_paths(value, prefix + (key,))
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            yield from key_paths(value, prefix + (i,))


EXAMPLE = yaml.safe_load((REPO / "inventory.example.yaml").read_text())
PATHS = sorted(key_paths(EXAMPLE), key=str)


CHECKER = jsonschema.Draft202012Validator(inventory_schema())


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(path=st.sampled_from(PATHS), value=values)
def test_the_schema_never_flags_what_validate_accepts(tmp_path, monkeypatch, path, value):
    monkeypatch.setenv("HOME", str(tmp_path))
    doc = copy.deepcopy(EXAMPLE)
    target = doc
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    (tmp_path / ".ssh").mkdir(exist_ok=True)
    (tmp_path / ".ssh" / "id_ed25519").write_text("a key")
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(yaml.safe_dump(doc, allow_unicode=True))
    try:
        load_cluster(inventory, environ={"HOME": str(tmp_path), "USER": "me"})
    except InventoryError:
        return
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in CHECKER.iter_errors(doc)]
    assert not errors, (path, value, errors)



@pytest.mark.parametrize("path,value", [(("defaults", "tf_port"), 3000), (("train", "epochs"), 1),
                                        (("ssh", "connect_timeout_s"), 2.5), (("train", "allreduce"), "auto"),
                                        (("telemetry", "enabled"), False)])
def test_an_altered_example_validate_accepts_the_schema_accepts(tmp_path, monkeypatch, path, value):
    """The property above on documents known to be valid (it sees mostly invalid ones)."""
    monkeypatch.setenv("HOME", str(tmp_path))
    doc = copy.deepcopy(EXAMPLE)
    doc[path[0]][path[1]] = value
    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".ssh" / "id_ed25519").write_text("a key")
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(yaml.safe_dump(doc))
    load_cluster(inventory)
    CHECKER.validate(doc)
