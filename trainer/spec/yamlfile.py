"""Reading a YAML file the user wrote (an inventory, a train config), for both front ends.

Bounded: the file's size, its nesting and its size once aliases are expanded are limited, so a
hostile or careless file ends in one line naming it, never a hang or a traceback. Duplicate keys
are refused (PyYAML would silently keep the last), and every node keeps its line and column so
that problems are reported as `file:line:col: field: …`.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from trainer.spec.errors import BadInput

MAX_BYTES = 1 << 20        # an inventory or config is a few KB; a 1 MiB one is a mistake
MAX_DEPTH = 64
MAX_NODES = 200_000        # after expanding aliases: a "billion laughs" file stops here


def read_text(path: str | Path, what: str, error: type[BadInput] = BadInput) -> str:
    """A file's UTF-8 text, read up to MAX_BYTES (a device like /dev/zero never ends)."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_BYTES + 1)
    except OSError as exc:
        raise error(f"{path}: cannot read {what} ({exc.strerror or exc}).") from None
    if len(raw) > MAX_BYTES:
        raise error(f"{path}: Received more than {MAX_BYTES // 1024} KiB. Expected {what} of at most "
                    f"{MAX_BYTES // 1024} KiB of YAML.")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise error(f"{path}: not a text file. Expected UTF-8 YAML.") from None


def problem_line(exc: Exception, where: str) -> str:
    """`file:line:col: not valid YAML (what the parser says).`"""
    mark = getattr(exc, "problem_mark", None)
    pos = f":{mark.line + 1}:{mark.column + 1}" if mark else ""
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    return f"{where}{pos}: not valid YAML ({problem})."


class Document:
    """A parsed YAML document: its data and the node tree, to say where a field was written."""

    def __init__(self, where: str, root, data: Any):
        self.where, self.root, self.data = where, root, data

    def locate(self, loc: tuple) -> str:
        """file:line:col of a field path (the deepest part of it that exists)."""
        node, mark = self.root, getattr(self.root, "start_mark", None)
        for part in loc:
            if isinstance(node, yaml.MappingNode):
                hit = next(((k, v) for k, v in node.value if k.value == part), None)
                if hit is None:
                    break
                mark, node = hit[0].start_mark, hit[1]
            elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
                node = node.value[part]
                mark = node.start_mark
            else:
                break
        return f"{self.where}:{mark.line + 1}:{mark.column + 1}" if mark else self.where


def parse(text: str, where: str, error: type[BadInput] = BadInput) -> Document:
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        raise error(problem_line(exc, where)) from None
    except RecursionError:
        raise error(f"{where}: nested too deeply. Expected at most {MAX_DEPTH} levels.") from None
    if root is None:
        return Document(where, None, None)
    _check_shape(root, where, error)
    duplicates = list(_duplicate_keys(root))
    if duplicates:
        raise error([f"{where}:{n.start_mark.line + 1}:{n.start_mark.column + 1}: {key}: "
                     f"Received a second {n.value!r}. Expected each key once." for key, n in duplicates])
    try:
        data = yaml.SafeLoader("").construct_document(root)
    except yaml.YAMLError as exc:
        raise error(problem_line(exc, where)) from None
    return Document(where, root, data)


def load(path: str | Path, what: str, error: type[BadInput] = BadInput) -> Document:
    return parse(read_text(path, what, error), str(path), error)


def _check_shape(root, where: str, error: type[BadInput]) -> None:
    """Depth and expanded size, counted once per distinct node (aliases share nodes)."""
    sizes: dict[int, tuple[int, int]] = {}

    def measure(node, depth: int) -> tuple[int, int]:
        if depth > MAX_DEPTH:
            raise error(f"{where}:{node.start_mark.line + 1}: nested too deeply. Expected at most {MAX_DEPTH} levels.")
        if id(node) in sizes:
            if depth + sizes[id(node)][1] > MAX_DEPTH:
                raise error(f"{where}: nested too deeply. Expected at most {MAX_DEPTH} levels.")
            return sizes[id(node)]
        children = [n for pair in node.value for n in pair] if isinstance(node, yaml.MappingNode) else \
            node.value if isinstance(node, yaml.SequenceNode) else []
        size, deep = 1, 0
        for child in children:
            s, d = measure(child, depth + 1)
            size, deep = size + s, max(deep, d + 1)
            if size > MAX_NODES:
                raise error(f"{where}: Received more than {MAX_NODES:,} values once aliases are expanded. "
                            "Expected a plain inventory or config (no alias bombs).")
        sizes[id(node)] = (size, deep)
        return sizes[id(node)]

    measure(root, 0)


def _duplicate_keys(node, path=""):
    if isinstance(node, yaml.MappingNode):
        seen = set()
        for key, value in node.value:
            name = str(key.value)
            if name in seen:
                yield (f"{path}.{name}" if path else name), key
            seen.add(name)
            yield from _duplicate_keys(value, f"{path}.{name}" if path else name)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            yield from _duplicate_keys(item, f"{path}[{i}]")
