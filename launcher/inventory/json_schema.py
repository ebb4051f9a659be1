"""The inventory's JSON Schema, generated from its pydantic model (schema.py): what `tfcompose
schema` prints, what docs/inventory.schema.json holds, and what an editor's YAML language server
reads from the `# yaml-language-server: $schema=…` line of an inventory to complete keys, show
each key's description and default, and flag a mistake as it is typed.

It says less than `validate`, never more: a document `validate` accepts is valid against it (a test
holds the two together), while the checks across fields (one chief, unique names, train or run,
files that must exist) are `validate`'s alone. Each field's description ends with what `validate`
expects of it, in the words of its error messages.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

DIALECT = "https://json-schema.org/draft/2020-12/schema"
TITLE = "tfcompose inventory"


def inventory_schema() -> dict[str, Any]:
    """The schema of an inventory file, as a JSON document."""
    from launcher.inventory.schema import Inventory
    from trainer.spec.validation import described
    described()
    schema = Inventory.model_json_schema(mode="validation")
    _tidy(schema)
    return {"$schema": DIALECT, **schema, "title": TITLE,
            "description": "A tfcompose inventory: the hosts, how to reach them, and what they train. "
                           "`tfcompose validate -i FILE` checks it whole."}


def text() -> str:
    """The schema as the file docs/inventory.schema.json holds it."""
    return json.dumps(inventory_schema(), indent=2, ensure_ascii=False) + "\n"


def schema_reference(inventory: Path) -> str:
    """What an inventory's `# yaml-language-server: $schema=` line names: the schema of the tfcompose
    that runs, as an absolute path (the checkout's docs/inventory.schema.json, kept equal to
    `tfcompose schema` by a test); without a checkout (an installed wheel), `inventory.schema.json`
    beside the inventory, written there when absent."""
    committed = Path(__file__).resolve().parents[2] / "docs" / "inventory.schema.json"
    if committed.is_file():
        return str(committed)
    beside = inventory.parent / "inventory.schema.json"
    if not beside.exists():
        beside.parent.mkdir(parents=True, exist_ok=True)
        beside.write_text(text())
    return beside.name


def _tidy(node: Any) -> None:
    """Every field: its description and `Expected …`; a shorthand value accepted beside the
    field's own type; no per-field titles (the key is the name)."""
    if isinstance(node, dict):
        expected, shorthand = node.pop("expected", None), node.pop("shorthand", None)
        node.pop("secret", None)
        if expected:
            said = " ".join(node.get("description", "").split())
            node["description"] = f"{said}{' ' if said else ''}Expected {expected}."
        if shorthand is not None:
            own = {k: node.pop(k) for k in ("$ref", "type", "properties", "anyOf") if k in node}
            node["anyOf"] = [own, {"const": shorthand}]
        for value in node.values():
            _tidy(value)
        if isinstance(node.get("properties"), dict):
            for prop in node["properties"].values():
                if isinstance(prop, dict):
                    prop.pop("title", None)
    elif isinstance(node, list):
        for value in node:
            _tidy(value)
