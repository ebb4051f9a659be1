"""The inventory's schema in a real editor's language server: Red Hat's `yaml-language-server` (what
VS Code's YAML extension, Neovim's yamlls and most LSP clients run), spoken to over its standard
input and output as an editor does. The schema line at the top of an inventory is all it is given."""
from __future__ import annotations

import pytest

from launcher.cli import main
from launcher.inventory.schema import Defaults
from trainer.spec.validation import described
from support.common import REPO, require
from support.lsp import LanguageClient, yaml_language_server

pytestmark = pytest.mark.integration

A_MISTAKE = """\
# yaml-language-server: $schema=inventory.schema.json
cluster: lab
defaults:
  tf_port: 70000
  tf_prot: 2222
  
hosts:
  - {name: gpu-a, address: 192.168.1.100}
"""
BLANK_IN_DEFAULTS = (5, 2)    # the indented empty line under defaults:, where an editor asks what may go


@pytest.fixture(scope="module")
def editor():
    server = yaml_language_server()
    require(server is not None, "yaml-language-server needs node and npm (apt-get install nodejs npm)")
    with LanguageClient(server, REPO) as client:
        yield client


@pytest.fixture
def inventory_beside_its_schema(tmp_path, capsys):
    """`tfcompose schema` written beside an inventory whose first line points at it (a relative path)."""
    assert main(["schema"]) == 0
    (tmp_path / "inventory.schema.json").write_text(capsys.readouterr().out)
    path = tmp_path / "inventory.yaml"
    path.write_text(A_MISTAKE)
    return path


def test_the_example_inventory_is_not_underlined_anywhere(editor):
    example = REPO / "inventory.example.yaml"
    assert editor.diagnostics(editor.open(example, example.read_text())) == []


def test_a_wrong_value_and_a_misspelt_key_are_underlined_where_they_are(editor, inventory_beside_its_schema):
    uri = editor.open(inventory_beside_its_schema, A_MISTAKE)
    said = {(d["range"]["start"]["line"], d["message"]) for d in editor.diagnostics(uri)}
    assert said == {(3, "Value is above the maximum of 65535."), (4, "Property tf_prot is not allowed.")}


def test_the_keys_that_may_go_there_are_offered_with_what_each_means(editor, inventory_beside_its_schema):
    described()           # the fields' descriptions, as the schema has them
    uri = editor.open(inventory_beside_its_schema, A_MISTAKE)
    offered = {item["label"]: _text(item.get("documentation")) for item in editor.completion(uri, *BLANK_IN_DEFAULTS)}
    not_yet_written = set(Defaults.model_fields) - {"tf_port"}
    assert set(offered) == not_yet_written
    for key in not_yet_written:
        assert offered[key].startswith(Defaults.model_fields[key].description.split("(")[0].strip()), key
    assert Defaults.model_fields["tf_port"].description.split("(")[0].strip() in editor.hover(uri, 3, 4)


def _text(documentation) -> str:
    return documentation.get("value", "") if isinstance(documentation, dict) else (documentation or "")
