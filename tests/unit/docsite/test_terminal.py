"""docsite/terminal.py: a program run on a pseudo-terminal of a set size, its screens read by a
terminal emulator, one kept as an SVG picture in its own colours."""
from __future__ import annotations

import sys

from docsite import terminal

# Writes a line, redraws it in place (as rich's live view does: up a line, erase it), then colours.
REDRAWN = r"""
import sys, time
sys.stdout.write("step 1 of 2\n"); sys.stdout.flush(); time.sleep(0.3)
sys.stdout.write("\x1b[1A\x1b[2Kstep 2 of 2\n\x1b[31mred\x1b[0m and \x1b[1mbold\x1b[0m\n"); sys.stdout.flush()
import shutil; print(shutil.get_terminal_size())
"""


def test_a_program_sees_a_terminal_of_the_size_given_and_redrawn_lines_are_what_the_screen_keeps():
    shown = terminal.run([sys.executable, "-c", REDRAWN], 70, 12, keep=lambda text: "step" in text)
    assert shown.exit_code == 0
    first_seen, last = shown.frames[0][1], shown.frames[-1][1]
    assert first_seen[0].plain == "step 1 of 2"
    assert [line.plain for line in last[:2]] == ["step 2 of 2", "red and bold"]     # redrawn in place, not below
    assert "columns=70, lines=12" in last[2].plain
    assert any(span.style == "red" for span in last[1].spans) and any("bold" in span.style for span in last[1].spans)


def test_the_svg_holds_the_screens_text_under_its_title():
    shown = terminal.run([sys.executable, "-c", REDRAWN], 70, 12, keep=lambda text: False)
    picture = terminal.svg(shown.frames[-1][1], 70, "a title")
    assert picture.startswith("<svg") and "a&#160;title" in picture and "step&#160;2&#160;of&#160;2" in picture

