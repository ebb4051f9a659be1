"""Text that reaches a person: what a host or a results file said made safe to print, and times.

Every printer (the CLI, the live view, the log streams) passes host text through `printable`:
escape sequences (CSI, OSC — OSC 52 writes the clipboard on terminals that allow it), C0 and C1
control characters, and Unicode format characters (U+202E reverses the text after it) are removed.
"""
from __future__ import annotations

import math
import re
import unicodedata
from typing import Optional

_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]"          # CSI
                      r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC, ended by BEL or ST (or not at all)
                      r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"        # DCS, SOS, PM, APC strings
                      r"|\x1b[ -/]*[0-~]?")                    # any other escape
_KEPT = {"\n", "\t"}


def printable(text: str) -> str:
    """`text` without escape sequences, control or format characters (newlines and tabs kept)."""
    text = _ESCAPES.sub("", text)
    return "".join(c for c in text if c in _KEPT or unicodedata.category(c) not in ("Cc", "Cf", "Zl", "Zp", "Cs"))


def one_line(text: str, limit: int = 300) -> str:
    """The first line of `text`, printable and at most `limit` characters."""
    line = printable(str(text)).strip().split("\n", 1)[0]
    return line if len(line) <= limit else line[:limit - 1] + "…"


def label(text, limit: int = 60) -> str:
    """What a picture may show of a name a results file gave: one printable line of at most `limit`
    characters, each `$` kept literal (matplotlib reads `$…$` as mathematics, and fails on some)."""
    return (one_line(str(text), limit) or "(no printable name)").replace("$", r"\$")


def clock(seconds: Optional[float]) -> str:
    """`1:02:03`; `?` for what is not a sensible duration (None, NaN, infinite, negative, > 10 years)."""
    if seconds is None or not isinstance(seconds, (int, float)) or not math.isfinite(seconds) \
            or not 0 <= seconds < 10 * 365 * 86400:
        return "?"
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"
