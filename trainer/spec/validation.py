"""Turn pydantic validation errors into one line each: where, field path, received, expected.

Used by the trainer's config and by the launcher's inventory, so every bad-input message in
tfcompose reads the same: `inventory.yaml:12:5: hosts[1].tf_port: Received 70000. Expected an
integer 1–65535.`  Fields carry their "expected" text in `json_schema_extra`.
"""
from __future__ import annotations

import ast
import functools
import inspect
import re
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Callable, Sequence

import pydantic
from pydantic import BaseModel, ConfigDict, Field, Strict

from trainer.spec.errors import BadInput


class StrictModel(BaseModel):
    """Unknown keys are errors (a typo must not be ignored) and a validated value is frozen. Each
    field's description is the docstring below it, read when asked for (`described`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def described() -> None:
    """Every model's fields described by their attribute docstrings, as pydantic's
    use_attribute_docstrings would at import (the JSON Schema, the docs' reference and the editors
    read them). Read from the source only when asked: at import that reading was a tenth of
    `tfcompose validate`'s time. Models are rebuilt in the order they were made, so a model that
    holds another is rebuilt after it and carries its descriptions."""
    for model in _models_in_order():
        docs: dict[str, str] = {}
        for klass in reversed(model.__mro__):          # a field a model inherits keeps its docstring
            if isinstance(klass, type) and issubclass(klass, StrictModel):
                docs.update(_attribute_docstrings(klass))
        for name, info in model.model_fields.items():
            if info.description is None and name in docs:
                info.description = docs[name]
        model.model_rebuild(force=True)


def _models_in_order() -> list[type[BaseModel]]:
    """Every subclass of StrictModel, in the order they were made (__subclasses__ keeps that order)."""
    order: list[type[BaseModel]] = []
    stack = list(reversed(StrictModel.__subclasses__()))
    while stack:
        model = stack.pop()
        order.append(model)
        stack.extend(reversed(model.__subclasses__()))
    return order


@functools.lru_cache(maxsize=None)
def _class_nodes(path: str | None) -> dict[str, ast.ClassDef]:
    """Each top-level class of a source file by name (each file parsed once)."""
    if not path:
        return {}
    tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    return {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}


def _attribute_docstrings(model: type) -> dict[str, str]:
    """name → the string literal right below its annotated assignment in the class body."""
    node = _class_nodes(inspect.getsourcefile(model)).get(model.__qualname__)
    docs, body = {}, node.body if node else []
    for before, after in zip(body, body[1:]):
        if isinstance(before, ast.AnnAssign) and isinstance(before.target, ast.Name) and isinstance(after, ast.Expr) \
                and isinstance(after.value, ast.Constant) and isinstance(after.value.value, str):
            docs[before.target.id] = inspect.cleandoc(after.value.value)
    return docs


# Strict scalars: YAML's `true` must not pass as 1, nor "3" as 3.
StrictIntT = Annotated[int, Strict()]
StrictFloatT = Annotated[float, Strict()]


def field(default: Any = ..., *, expected: str, secret: bool = False, shorthand: Any = None, **kw: Any) -> Any:
    """A pydantic Field whose error message says `Expected <expected>.`; a `secret` one (a URI that
    may hold a password) never says what it received; `shorthand`: a value a `mode="before"`
    validator of the model turns into the field's type (`allreduce: auto`), which the JSON Schema
    must accept too (launcher/inventory/json_schema.py)."""
    extra = {"expected": expected, **({"secret": True} if secret else {}),
             **({"shorthand": shorthand} if shorthand is not None else {})}
    return Field(default, json_schema_extra=extra, **kw)


@dataclass(frozen=True)
class Problem:
    loc: tuple
    received: str
    expected: str

    @property
    def path(self) -> str:
        return format_path(self.loc)

    def line(self, where: str) -> str:
        prefix = f"{where}: " if where else ""
        return f"{prefix}{self.path}: {self.received}. Expected {self.expected}."


_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
_UNION_TAG = re.compile(r"^[a-z-]+\[.*\]$")


def format_path(loc: Sequence[Any]) -> str:
    """hosts[1].tf_port; a key that is not a plain name is quoted, so a path stays one line."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif isinstance(part, str) and _PLAIN_KEY.match(part):
            out += f".{part}" if out else part
        else:
            out += f"[{str(part)!r}]"
    return out or "(top level)"


def describe_value(value: Any, limit: int = 60) -> str:
    text = repr(value) if isinstance(value, str) else _yamlish(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _yamlish(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "a mapping" if value else "an empty mapping"
    return str(value)


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """Every BaseModel inside an annotation (Optional, list, Union, Annotated...)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    found: list[type[BaseModel]] = []
    for arg in typing.get_args(annotation):
        found.extend(_models_in(arg))
    return found


def _walk(model: type[BaseModel], loc: Sequence[Any]):
    """(FieldInfo, clean loc) for a pydantic error location.

    List indices are kept; union member tags ('int', "literal['all']", ...) end the walk, so
    that every branch of a union reports as the one field it belongs to.
    """
    models, info, clean, keys = [model], None, [], 0
    for part in loc:
        if isinstance(part, int):
            clean.append(part)
            continue
        if keys:                        # a key of a mapping field (hyperparameters' candidate, …)
            keys -= 1
            clean.append(part)
            continue
        hit = next((m.model_fields[part] for m in models if part in m.model_fields), None)
        if hit is None:
            break
        info, models, keys = hit, _models_in(hit.annotation), _mapping_depth(hit.annotation)
        clean.append(part)
    return info, tuple(clean)


def _mapping_depth(annotation: Any) -> int:
    """How many levels of keys a (possibly optional) dict field nests: dict[str, dict[str, X]] → 2."""
    for arg in (annotation, *typing.get_args(annotation)):
        if typing.get_origin(arg) is dict:
            return 1 + _mapping_depth(typing.get_args(arg)[1])
    return 0


def _field_for(model: type[BaseModel], loc: Sequence[Any]):
    return _walk(model, loc)[0]


def _expected_for(model: type[BaseModel], err: dict) -> str:
    kind = err["type"]
    if kind == "extra_forbidden":
        parent = _field_for(model, err["loc"][:-1])
        owner = _models_in(parent.annotation) if parent else [model]
        keys = sorted({k for m in owner for k in m.model_fields})
        return "one of the known keys: " + ", ".join(keys)
    info = _field_for(model, err["loc"])
    extra = getattr(info, "json_schema_extra", None)
    # A model-level validator (on a nested model) explains itself; on a plain field, the field's
    # own text says what is expected.
    model_level = kind == "value_error" and bool(info is not None and _models_in(info.annotation))
    if isinstance(extra, dict) and "expected" in extra and not model_level:
        return str(extra["expected"])
    msg = err.get("msg", "a valid value")
    return msg.removeprefix("Value error, ").rstrip(".")


def problems(model: type[BaseModel], exc: pydantic.ValidationError, data: Any = None) -> list[Problem]:
    """One Problem per field, in the order pydantic found them; `data` is what was validated."""
    out: dict[tuple, Problem] = {}
    for err in exc.errors(include_url=False):
        loc = tuple(err["loc"])
        if err["type"] == "extra_forbidden":
            # pydantic names the branch of a union it tried (`function-after[…]`): not a field
            received, clean = f"Unknown key {loc[-1]!r}", tuple(p for p in loc if not _UNION_TAG.match(str(p)))
        else:
            clean = _walk(model, loc)[1] or loc
            received = "Missing" if err["type"] == "missing" else "Received " + describe_value(
                err.get("input") if loc == clean else value_at(data, clean, err.get("input")))
            extra = getattr(_field_for(model, loc), "json_schema_extra", None)
            if received != "Missing" and isinstance(extra, dict) and extra.get("secret"):
                received = "Received a value that is not one (not shown: it may hold a password or token)"
        out.setdefault(clean, Problem(clean, received, _expected_for(model, err)))
    return list(out.values())


def value_at(data: Any, loc: tuple, default: Any) -> Any:
    """The value the user wrote at `loc` (a union branch reports only the part it looked at)."""
    for part in loc:
        try:
            data = data[part]
        except (KeyError, IndexError, TypeError):
            return default
    return data


def validate(model: type[BaseModel], data: Any, where: str,
             locate: Callable[[tuple], str] | None = None, error: type[BadInput] = BadInput) -> BaseModel:
    """Validate `data` or raise `error` carrying every problem's line."""
    try:
        return model.model_validate(data)
    except pydantic.ValidationError as exc:
        lines = [p.line(locate(p.loc) if locate else where) for p in problems(model, exc, data)]
        raise error(lines) from None
    except RecursionError:
        raise error(f"{where}: nested too deeply.") from None
