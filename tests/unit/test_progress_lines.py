"""Training progress said in one line (launcher/progress_lines.py): off a terminal, every epoch once."""
from __future__ import annotations

from launcher.progress_lines import epoch_lines
from support.builders import tracked


def test_off_a_terminal_every_epoch_is_one_line_in_order_with_an_eta(tmp_path):
    docs = list(tracked(tmp_path))
    printed, mark = [], (0, 0)
    for doc in docs[1::2]:            # a poll sees only every second epoch: nothing may be lost
        lines, mark = epoch_lines(doc, mark)
        printed += lines
    assert [(line.split()[1], line.split()[4]) for line in printed] == \
           [(f"{t}/2", f"{e}/3") for t in (1, 2) for e in (1, 2, 3)]
    assert printed[0].endswith("ETA 0:00:50") and printed[-1].endswith("ETA 0:00:00")
    assert all("\x1b" not in line for line in printed)
    lines, _ = epoch_lines(docs[-1], (0, 0), restarts=1)
    assert lines[-1].endswith("restarts 1")
