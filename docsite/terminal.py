"""A command run on a real terminal (a pseudo-terminal of a set size, read by pyte, a terminal
emulator) so that what a user sees can be kept as a picture: the screen at chosen moments, written
as SVG by rich in the terminal's own colours."""
from __future__ import annotations

import fcntl
import io
import os
import pty
import select
import string
import struct
import subprocess
import termios
import time
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Screens:
    """What the terminal showed: (seconds since the start, the screen's lines as rich Text) per change."""
    frames: list[tuple[float, list]] = field(default_factory=list)
    exit_code: int | None = None


def run(command: list[str], columns: int, rows: int, keep, env: dict | None = None, cwd: Path | None = None) -> Screens:
    """Run command on a terminal of columns × rows; keep(screen_text) says which screens to keep."""
    import pyte
    screen, screens = pyte.Screen(columns, rows), Screens()
    stream = pyte.ByteStream(screen)
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    proc = subprocess.Popen(command, stdin=follower, stdout=follower, stderr=follower, cwd=cwd, start_new_session=True,
                            env={**os.environ, **(env or {}), "TERM": "xterm-256color",
                                 "COLUMNS": str(columns), "LINES": str(rows)})
    os.close(follower)
    started = time.monotonic()
    while _pump(leader, stream):
        text = "\n".join(screen.display)
        if keep(text):
            screens.frames.append((time.monotonic() - started, _lines(screen)))
    os.close(leader)
    screens.exit_code = proc.wait()
    screens.frames.append((time.monotonic() - started, _lines(screen)))
    return screens


def _pump(leader: int, stream) -> bool:
    """Feed what the program wrote to the emulator; False once it closed its terminal."""
    ready, _, _ = select.select([leader], [], [], 1.0)
    if not ready:
        return True
    try:
        data = os.read(leader, 65536)
    except OSError:     # EIO: every holder of the terminal's other end is gone
        return False
    stream.feed(data)
    return bool(data)


def _lines(screen) -> list:
    from rich.text import Text
    lines = []
    for y in range(screen.lines):
        row, line = screen.buffer[y], Text()
        for x in range(screen.columns):
            char = row[x]
            line.append(char.data or " ", style=_style(char))
        line.rstrip()
        lines.append(line)
    while lines and not lines[-1].plain:
        lines.pop()
    return lines


def _style(char) -> str:
    parts = ["bold"] if char.bold else []
    if char.reverse:
        parts.append("reverse")
    for colour, prefix in ((char.fg, ""), (char.bg, "on ")):
        if colour and colour != "default":
            parts.append(prefix + _colour(colour))
    return " ".join(parts)


def _colour(name: str) -> str:
    """pyte's colour (a name such as brown or brightred, or six hex digits) as rich writes it."""
    if len(name) == 6 and all(c in string.hexdigits for c in name):
        return f"#{name}"
    name = name.replace("brown", "yellow")
    return "bright_" + name[len("bright"):] if name.startswith("bright") else name


def svg(lines: list, columns: int, title: str) -> str:
    from rich.console import Console
    console = Console(record=True, width=columns, file=io.StringIO(), force_terminal=True, color_system="truecolor")
    for line in lines:
        console.print(line, soft_wrap=True)
    return console.export_svg(title=title)
