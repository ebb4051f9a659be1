"""docsite/labrun.py's pure parts: which screen of `up --wait` is the live view's picture, and the
live table cut from the output above it (the rest runs a search on a LAN lab: `python -m docsite.pictures lab`)."""
from __future__ import annotations

from docsite import labrun


def test_the_live_table_is_cut_from_the_earlier_output_above_it():
    from rich.text import Text
    lines = [Text(t) for t in ("┏━┓ an earlier table", "said before", "┏━━━┓", "┃ h0 ┃", "┗━━━┛")]
    assert [line.plain for line in labrun.last_table(lines)] == ["┏━━━┓", "┃ h0 ┃", "┗━━━┛"]
    assert labrun.TRAINING.search("│ h0 │ running │ epoch 2/6 │\n│ all  │ search  │ 3 done;     │\n│ │ │ ETA 0:01 │")
    assert not labrun.TRAINING.search("│ h0 │ image │ sending image: 10 of 20 MB, ETA 0:00:01 │")
