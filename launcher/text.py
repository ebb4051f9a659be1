"""Text that reaches a person: what a host or a results file said made safe to print, and times.

Every printer (the CLI, the live view, the log streams) passes host text through `printable`:
escape sequences (CSI, OSC — OSC 52 writes the clipboard on terminals that allow it), C0 and C1
control characters, and Unicode format characters (U+202E reverses the text after it) are removed.

It also removes every secret this process knows (`hide`: the tracker's password or token, the
sudo password of `bootstrap --ask-become-pass`), whatever said it: MLflow quoting its URL, a host's
sudo repeating its password on stderr. So does `scrub`, for what is written to a run folder or a
log rather than printed (`Scrubber`: a stream, a secret cut across two chunks included).
"""
from __future__ import annotations

import math
import re
import threading
import unicodedata
from typing import Iterable, Optional

_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]"          # CSI
                      r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC, ended by BEL or ST (or not at all)
                      r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"        # DCS, SOS, PM, APC strings
                      r"|\x1b[ -/]*[0-~]?")                    # any other escape
_KEPT = {"\n", "\t"}
_REMOVED = ("Cc", "Cf", "Zl", "Zp", "Cs")
MASK = "***"
MIN_SECRET = 4          # shorter strings are no real secret, and masking them would garble every message
_SECRETS: list[str] = []        # longest first, so a longer one is masked whole
_LOCK = threading.Lock()


def hide(values: Iterable[str]) -> None:
    """Secrets this process now knows: masked in everything printable and scrub give from now on."""
    with _LOCK:
        known = set(_SECRETS) | {v for v in values if isinstance(v, str) and len(v) >= MIN_SECRET}
        _SECRETS[:] = sorted(known, key=len, reverse=True)


def scrub(text: str) -> str:
    """`text` with every known secret masked."""
    for secret in list(_SECRETS):
        if secret in text:
            text = text.replace(secret, MASK)
    return text


class Scrubber:
    """Known secrets masked in a stream of bytes: the last bytes of each chunk wait for the next,
    so a secret cut across two chunks is still found. Costs nothing while there is none."""

    def __init__(self):
        self.secrets = [s.encode("utf-8") for s in _SECRETS]
        self.keep = max((len(s) for s in self.secrets), default=1) - 1
        self.pending = b""

    def feed(self, chunk: bytes) -> bytes:
        if not self.secrets:
            return chunk
        data = self._masked(self.pending + chunk)
        cut = max(len(data) - self.keep, 0)
        self.pending = data[cut:]
        return data[:cut]

    def close(self) -> bytes:
        data, self.pending = self._masked(self.pending), b""
        return data

    def _masked(self, data: bytes) -> bytes:
        for secret in self.secrets:
            data = data.replace(secret, MASK.encode())
        return data


def printable(text: str) -> str:
    """`text` without escape sequences, control or format characters (newlines and tabs kept), and
    without a known secret. Linear in its length: a line that is printable already (most) is
    checked at C speed, only the others character by character."""
    text = scrub(text)
    if "\x1b" in text:
        text = scrub(_ESCAPES.sub("", text))       # (a secret an escape sequence cut in two is whole again)
    if text.isprintable():
        return text
    kept = [line if line.isprintable() else "".join(c for c in line if c in _KEPT or unicodedata.category(c) not in _REMOVED)
            for line in text.split("\n")]
    return scrub("\n".join(kept))


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
