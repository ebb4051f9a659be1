"""The reference pages, written from the code when the site is built (docsite/gen_pages.py), never by
hand: every `tfcompose` command and option from the typer app, every inventory key from the
inventory's JSON Schema (launcher/inventory/json_schema.py, itself the pydantic model's), every
trainer setting from the trainer's model and its flags. A key or option added to the code is on
the page at the next build; tests/unit/docsite/test_reference.py fails when one has no entry."""
from __future__ import annotations

import json
from typing import Iterator


def _cell(text: str) -> str:
    """Text for one cell of a Markdown table: one line, pipes escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


# --- the CLI ----------------------------------------------------------------------------------
def cli_group():
    import typer
    from launcher.cli import app
    return typer.main.get_command(app)


def cli_page() -> str:
    group = cli_group()
    out = ["# Commands", "", "Every `tfcompose` command and option, as `tfcompose COMMAND --help` says it (written from "
           "the code when this site is built). Every command takes the global `--debug` before it "
           "(`tfcompose --debug up …`: a traceback instead of one line). Exit codes: 0 ok, 1 failed, 2 bad input, "
           "130 interrupted.", ""]
    for name, command in group.commands.items():
        out += _command_section(name, command)
    return "\n".join(out) + "\n"


def _command_section(name: str, command) -> list[str]:
    ctx = command.make_context(name, [], resilient_parsing=True)
    usage = " ".join(["tfcompose", name, *command.collect_usage_pieces(ctx)])
    out = [f"## `{name}`", "", _cell(command.help or ""), "", "```text", usage, "```", ""]
    arguments = [p for p in command.params if p.param_type_name == "argument"]
    options = [p for p in command.params if p.param_type_name == "option" and p.name != "help"]
    if arguments or options:
        out += ["| argument or option | what |", "|---|---|"]
    for param in arguments:
        kind = "required" if param.required else "optional"
        out.append(f"| `{param.name.upper()}` ({kind}{', one or more' if param.nargs == -1 else ''}) | "
                   f"{_cell(getattr(param, 'help', None) or '')} |")
    for param in options:
        record = param.get_help_record(ctx)
        if record:
            out.append(f"| `{_cell(record[0])}` | {_cell(record[1])} |")
    return out + [""]


# --- the inventory ----------------------------------------------------------------------------
def schema_rows(schema: dict, node: dict | None = None, prefix: str = "") -> Iterator[tuple[str, str, str, str]]:
    """(key path, type, default, description) for every key, depth first, in the model's order."""
    node = schema if node is None else node
    for key, prop in node.get("properties", {}).items():
        path = f"{prefix}{key}"
        yield path, type_of(schema, prop), default_of(prop), prop.get("description", "")
        for model, suffix in _models_under(schema, prop):
            yield from schema_rows(schema, model, f"{path}{suffix}.")


def _resolve(schema: dict, prop: dict) -> dict:
    ref = prop.get("$ref")
    return schema["$defs"][ref.rsplit("/", 1)[-1]] if ref else prop


def _models_under(schema: dict, prop: dict) -> list[tuple[dict, str]]:
    """The model a key holds, and how: itself (a mapping), in a list (`[]`), in a mapping of names
    (`.<name>`), or deeper (`.<name>.<name>`: a candidate's hyperparameters' ranges)."""
    found = _model_in(schema, prop, "")
    return [found] if found else []


def _model_in(schema: dict, node: dict, suffix: str):
    target = _resolve(schema, node)
    if "properties" in target:
        return target, suffix
    for branch in target.get("anyOf", []):
        found = _model_in(schema, branch, suffix)
        if found:
            return found
    if target.get("type") == "array" and isinstance(target.get("items"), dict):
        return _model_in(schema, target["items"], suffix + "[]")
    for value in (target.get("additionalProperties"), *target.get("patternProperties", {}).values()):
        if isinstance(value, dict):
            return _model_in(schema, value, suffix + ".<name>")
    return None


def type_of(schema: dict, prop: dict) -> str:
    if "anyOf" in prop:
        kinds = [type_of(schema, branch) for branch in prop["anyOf"] if branch.get("type") != "null"]
        optional = any(branch.get("type") == "null" for branch in prop["anyOf"])
        return " or ".join(dict.fromkeys(kinds)) + (" (or null)" if optional else "")
    if "$ref" in prop:
        return "mapping"
    if "const" in prop:
        return json.dumps(prop["const"])
    if "enum" in prop:
        return "one of " + ", ".join(json.dumps(v) for v in prop["enum"])
    kind = prop.get("type", "any")
    if kind == "array":
        if "prefixItems" in prop:
            return "[" + ", ".join(type_of(schema, p) for p in prop["prefixItems"]) + "]"
        return f"list of {type_of(schema, prop.get('items', {}))}"
    if kind == "object" or "patternProperties" in prop:
        value = prop.get("additionalProperties") or next(iter(prop.get("patternProperties", {}).values()), None)
        return f"mapping of name → {type_of(schema, value)}" if isinstance(value, dict) else "mapping"
    return {"integer": "integer", "number": "number", "string": "text", "boolean": "true or false"}.get(kind, kind)


def default_of(prop: dict) -> str:
    if "default" not in prop:
        return "required"
    value = prop["default"]
    if isinstance(value, dict) and value:
        return "(its keys' defaults)"
    return json.dumps(value, ensure_ascii=False)


def keys_table(schema: dict) -> list[str]:
    out = ["| key | type | default | what |", "|---|---|---|---|"]
    for path, kind, default, what in schema_rows(schema):
        out.append(f"| `{path}` | {_cell(kind)} | `{_cell(default)}` | {_cell(what)} |")
    return out


def inventory_page() -> str:
    from launcher.inventory.json_schema import inventory_schema
    schema = inventory_schema()
    intro = ["# Inventory keys", "",
             "Every key of an inventory file, its type, its default and what it does, written from the pydantic model "
             "(`launcher/inventory/schema.py`) when this site is built. `hosts[].gpus` is a key of each entry of "
             "`hosts`; `train.…` keys are the [trainer's settings](trainer.md). The same descriptions reach your "
             "editor through the [JSON Schema](../inventory.schema.json) (`tfcompose schema`; see "
             "[Editor support](../editor.md)). `tfcompose validate -i FILE` checks a file whole, including what no "
             "schema can say (one chief, unique names, `train` or `run`, files that must exist).", ""]
    return "\n".join(intro + keys_table(schema)) + "\n"


# --- the trainer ------------------------------------------------------------------------------
def trainer_schema() -> dict:
    from launcher.inventory.json_schema import _tidy
    from trainer.spec.config import TrainConfig
    from trainer.spec.validation import described
    described()
    schema = TrainConfig.model_json_schema(mode="validation")
    _tidy(schema)
    return schema


def trainer_flags() -> list[tuple[str, str]]:
    """(flag, help) of `python -m trainer`."""
    from trainer.main import parser
    return [(", ".join(action.option_strings) + (f" {action.metavar}" if action.metavar else ""), action.help or "")
            for action in parser()._actions if action.option_strings and "--help" not in action.option_strings]


def trainer_page() -> str:
    out = ["# Trainer settings", "",
           "The built-in trainer's settings: the inventory's `train:` section, the simulation's "
           "`compose/simulation-train.yaml`, or `python -m trainer --config train.yaml`. Written from the model "
           "(`trainer/spec/config.py`) when this site is built. Any setting can also be given as an environment variable "
           "`TFC_TRAIN_<KEY>` (nested keys joined by `__`: `TFC_TRAIN_DATASET__IMAGE_SIZE=[64,64]`, values are YAML) "
           "or a flag; precedence: file < environment < flags.", "",
           "## Flags of `python -m trainer`", "", "| flag | what |", "|---|---|"]
    out += [f"| `{_cell(flag)}` | {_cell(what)} |" for flag, what in trainer_flags()]
    out += ["", "## Settings", ""] + keys_table(trainer_schema())
    return "\n".join(out) + "\n"


PAGES = {"reference/cli.md": cli_page, "reference/inventory.md": inventory_page, "reference/trainer.md": trainer_page}


def pages() -> dict[str, str]:
    """Every generated page: its path under docs/ and its text."""
    return {path: make() for path, make in PAGES.items()}


def _main() -> None:     # python -m docsite.reference: print the pages (for a look without a build)
    for path, text in pages().items():
        print(f"<!-- {path} -->\n{text}")


if __name__ == "__main__":
    _main()
