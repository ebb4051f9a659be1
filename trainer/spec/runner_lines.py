"""The lines the image's runner (trainer/runner.py) says a program's failure in, and how the
launcher reads them back from a container's log (launcher/stages/status.py): one owner for both."""
from __future__ import annotations

from typing import Optional

REPEATED = 3                     # exit code: the program failed twice alike at its start; not run again
START_S = 300.0                  # "at its start": within this long of starting (TensorFlow's import, CUDA, the cluster, the first step)
PREFIX = "tfcompose runner:"
FAILED = f"{PREFIX} the program failed"
NOT_AGAIN = f"{PREFIX} not started again"


def printable(text: str, limit: int = 300) -> str:
    return "".join(c if c.isprintable() else "?" for c in text.strip())[:limit]


ITS_ERROR = "; its error: "


def failed_line(code: int, seconds: float, error: str) -> str:
    """The one line a failure is said in (the launcher reads it back with `failure_of`)."""
    return f"{FAILED} (exit code {code}, {seconds:.0f} s after its start)" + (f"{ITS_ERROR}{error}" if error else "")


def not_again_line(why: str, error: str) -> str:
    return f"{NOT_AGAIN}: it failed twice alike within {START_S:.0f} s of its start ({why}){ITS_ERROR}{error}"


def failure_of(line: str) -> Optional[str]:
    """The program's error line from a runner's line in a log (FAILED or NOT_AGAIN), else None."""
    if line.startswith((FAILED, NOT_AGAIN)) and ITS_ERROR in line:
        return line.split(ITS_ERROR, 1)[1].strip() or None
    return None
