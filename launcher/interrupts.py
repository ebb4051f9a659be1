"""Ctrl-C held back while a clean-up that must finish runs: the tickets an `up --queue` leaves in
its hosts' lease folders, the leases an interrupted `up` gives back. A second (or tenth) Ctrl-C
then only hurries nothing: the clean-up is bounded anyway (every command has its time limit), and
cutting it would leave behind exactly what it removes.

Only the main thread receives SIGINT, so elsewhere (a test's thread) `held` does nothing.
"""
from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Iterator


class Pressed:
    """Whether Ctrl-C was pressed while held (the caller decides what that means afterwards)."""

    def __init__(self) -> None:
        self.count = 0

    def __bool__(self) -> bool:
        return self.count > 0


@contextmanager
def held() -> Iterator[Pressed]:
    """For the length of the block, SIGINT is noted instead of raised; the previous handler is
    back afterwards. The block's own exceptions pass through as they are."""
    pressed = Pressed()
    if threading.current_thread() is not threading.main_thread():
        yield pressed
        return

    def note(_signum, _frame) -> None:
        pressed.count += 1

    previous = signal.signal(signal.SIGINT, note)
    try:
        yield pressed
    finally:
        signal.signal(signal.SIGINT, previous if previous is not None else signal.SIG_DFL)
