"""The reference pages are written from the code: every command and option, every inventory key
and every trainer setting has its entry, with what it does; one the code gains is there at the
next build, and a missing entry fails here."""
from __future__ import annotations

import re

from docsite import reference
from launcher.inventory.schema import Inventory
from trainer.spec.config import TrainConfig


def model_paths(model, prefix=""):
    """Every key path of a pydantic model, as the page writes it (`hosts[].name`, `x.<name>.y`)."""
    for name, info in model.model_fields.items():
        path = f"{prefix}{name}"
        yield path
        found = model_in(info.annotation, "")
        if found:
            yield from model_paths(found[0], f"{path}{found[1]}.")


def model_in(annotation, suffix):
    """(the model inside an annotation, the path between: `[]` a list, `.<name>` a mapping)."""
    import typing
    from pydantic import BaseModel
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, suffix
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (list, tuple):
        return next((f for f in (model_in(a, suffix + "[]") for a in args) if f), None)
    if origin is dict:
        return model_in(args[1], suffix + ".<name>")
    return next((f for f in (model_in(a, suffix) for a in args) if f), None)


def rows(page: str) -> dict[str, str]:
    """key path → its row's description."""
    return {m.group(1): m.group(2) for m in re.finditer(r"^\| `([^`]+)` \| .*? \| `.*?` \| (.*) \|$", page, re.M)}


def test_every_inventory_key_has_an_entry_with_a_description():
    page = rows(reference.inventory_page())
    keys = list(model_paths(Inventory))
    assert len(keys) > 140
    missing = [k for k in keys if k not in page]
    assert not missing, missing
    assert all(len(page[k].split("Expected")[0].strip()) > 5 for k in keys), [k for k in keys if len(page[k]) < 10]


def test_every_trainer_setting_and_flag_has_an_entry():
    page = reference.trainer_page()
    settings = rows(page)
    missing = [k for k in model_paths(TrainConfig) if k not in settings]
    assert not missing, missing
    for flag in ("--config", "--epochs", "--set", "--debug", "--learning-rate"):
        assert f"`{flag}" in page, flag


def test_every_command_and_option_has_an_entry():
    page = reference.cli_page()
    group = reference.cli_group()
    assert len(group.commands) >= 16
    for name, command in group.commands.items():
        section = page.split(f"## `{name}`", 1)[1].split("\n## ", 1)[0]
        assert command.help and " ".join(command.help.split())[:40] in section, name
        for param in command.params:
            if param.param_type_name == "option":
                assert all(opt in section for opt in param.opts), (name, param.opts)
            else:
                assert f"`{param.name.upper()}`" in section, (name, param.name)


def test_a_key_the_model_gains_is_on_the_page(monkeypatch):
    from launcher.inventory import json_schema
    real = json_schema.inventory_schema

    def with_one_more():
        schema = real()
        schema["properties"]["new_key"] = {"type": "integer", "default": 1, "description": "A new key. Expected one."}
        return schema
    monkeypatch.setattr(json_schema, "inventory_schema", with_one_more)
    assert "new_key" in rows(reference.inventory_page())
