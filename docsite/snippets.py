"""What the documentation shows that the code must still do: the pieces of the pages that
tests/unit/docsite/test_snippets.py checks against the code.

- **Configuration snippets**: every ```yaml block, with a marker on the line before it saying
  what it is: `<!-- check: inventory -->` (a whole inventory), `<!-- check: inventory-part -->` (keys
  of one, laid over a two-host inventory), `<!-- check: train -->` (the trainer's own train.yaml),
  `<!-- check: error TEXT -->` (an inventory part `validate` refuses, with a line holding TEXT), or
  `<!-- check: none: WHY -->`.
- **Command lines**: every `tfcompose …` line of a shell block (```bash), and every inline
  `tfcompose …` span in the prose and tables.
- **Figures**: every paragraph that says it measured something, or cites a section of
  benchmarks.md (`B5`, `B1c`), and the figures in it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"
FENCE = re.compile(r"^(\s*)```(\w*)[^\n]*$")
MARKER = re.compile(r"^<!-- check: (inventory-part|inventory|train|error|none)(?::)?\s*(.*?)\s*-->$")


def pages() -> list[Path]:
    """The site's hand-written pages (the reference pages are written from the code), and the README."""
    return sorted(DOCS.glob("*.md")) + [REPO / "README.md"]


@dataclass(frozen=True)
class Block:
    page: Path
    line: int          # the fence's line, 1-based
    lang: str
    text: str
    marker: str        # "" when the line before the fence is no marker
    argument: str

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """Every fenced code block of a page, with the check marker on the line before it."""
    lines = page.read_text().splitlines()
    found, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, lang, start = m.group(1), m.group(2), i
        i += 1
        body = []
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i])
            i += 1
        previous = next((lines[j].strip() for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        mark = MARKER.match(previous)
        found.append(Block(page, start + 1, lang, "\n".join(body), mark.group(1) if mark else "",
                           mark.group(2) if mark else ""))
        i += 1
    return found


PROMPT = re.compile(r"^(?:\$\s+)?(?:sudo\s+)?(?:[A-Z_]+=\S+\s+)*(?:\S*/)?(tfcompose\s.*|tfcompose)$")


def shell_commands(page: Path) -> list[tuple[str, str]]:
    """(where, the command line) for every `tfcompose …` line of a shell block of the page."""
    found = []
    for block in blocks(page):
        if block.lang not in ("bash", "sh", "console", "shell"):
            continue
        for offset, line in enumerate(block.text.splitlines(), 1):
            code = line.split(" #", 1)[0].strip()
            m = PROMPT.match(code)
            if m:
                found.append((f"{block.where}+{offset}", m.group(1)))
    return found


INLINE = re.compile(r"`(tfcompose [^`]+)`")


def inline_commands(page: Path) -> list[tuple[str, str]]:
    """(where, text) for every inline `tfcompose …` span outside code blocks."""
    found, inside = [], False
    for number, line in enumerate(page.read_text().splitlines(), 1):
        if FENCE.match(line) or line.strip() == "```":
            inside = not inside
            continue
        if not inside:
            found += [(f"{page.relative_to(REPO)}:{number}", m.group(1)) for m in INLINE.finditer(line)]
    return found


def paragraphs(page: Path) -> list[tuple[str, str]]:
    """(where, text) of every paragraph and list item outside code blocks."""
    found, current, start, inside = [], [], 0, False
    for number, line in enumerate(page.read_text().splitlines(), 1):
        if FENCE.match(line) or line.strip() == "```":
            inside = not inside
            line = ""
        if inside:
            continue
        new_item = bool(re.match(r"^\s*(?:[-*]|\d+\.)\s", line)) or line.startswith(("|", "#"))
        if not line.strip() or new_item:
            if current:
                found.append((f"{page.relative_to(REPO)}:{start}", " ".join(current)))
            current, start = ([line.strip()], number) if line.strip() else ([], 0)
            continue
        if not current:
            start = number
        current.append(line.strip())
    if current:
        found.append((f"{page.relative_to(REPO)}:{start}", " ".join(current)))
    return found


SECTION_REF = re.compile(r"\b(B\d+[a-z]?)\b")
# "Measured …", "measured here", "measured (": a paragraph that quotes a measurement ("the link preflight
# measured" is no quote). The README's line the suite's own time goes in is testing's, not the benchmarks'.
MEASURED = re.compile(r"\bMeasured\b(?!: the suite takes)|\bmeasured (?:here|\()")
# A figure: a number with a decimal point, or a number with a unit or a ratio sign after it.
FIGURE = re.compile(r"(?<![\w.])(\d[\d,]*\.\d+|\d[\d,]*(?=\s?(?:×(?!\d)|%|s\b|ms\b|min\b|KB|MB|GB|KiB|MiB|GiB|Mbit/s|Gbit/s)))")


def figures(text: str) -> list[str]:
    """The figures of a paragraph, as numbers without thousands separators."""
    return [f.replace(",", "") for f in FIGURE.findall(text)]


def sections(markdown: str) -> dict[str, str]:
    """benchmarks.md's sections by their id (`B5`, `B1c`; the first section, unnumbered, is
    `sync-vs-parallel`): each `## ` heading's text up to the next."""
    found: dict[str, str] = {}
    for part in re.split(r"(?m)^## ", markdown)[1:]:
        title = part.split("\n", 1)[0]
        m = re.match(r"(B\d+[a-z]?)\b", title)
        key = m.group(1) if m else "sync-vs-parallel"
        found[key] = found.get(key, "") + "\n" + part
    return found


def numbers_in(text: str) -> set[str]:
    return {n.replace(",", "") for n in re.findall(r"\d[\d,]*(?:\.\d+)?", text)}


def quoted_from(figure: str, numbers: set[str]) -> bool:
    """The figure is one of the numbers as a page may quote it: rounded to the figure's own digits,
    and in bytes, kilo-, mega- or giga- (38,775 B quoted as 38.8 KB; 74.59 s as 74.6 s)."""
    digits = len(figure.split(".", 1)[1]) if "." in figure else 0
    value = float(figure)
    for number in numbers:
        for scale in (1, 1e3, 1e6, 1e9):
            if abs(round(float(number) / scale, digits) - value) < 1e-9:
                return True
    return False
