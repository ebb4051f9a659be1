"""Running one function for many hosts at once (after fabric's ThreadingGroup and GroupResult),
below both the connection and the group: `fan_out` calls a function for each host on a thread
pool and returns one `GroupResult`: `.succeeded` (host → value) and `.failed` (host → exception),
both in inventory order."""
from __future__ import annotations

import itertools
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Generic, Iterable, Optional, TypeVar

from launcher import interrupts
from launcher.errors import GroupError

if TYPE_CHECKING:
    from launcher.inventory.model import Host

T = TypeVar("T")
_pools = itertools.count()     # names each fan-out's threads apart
SIGNAL_POLL_S = 0.2            # the longest Ctrl-C waits to be heard while hosts work


@dataclass
class GroupResult(Generic[T]):
    step: str
    hosts: list[str]
    succeeded: dict[str, T] = field(default_factory=dict)
    failed: dict[str, BaseException] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.failed

    def raise_if_failed(self, error: type[GroupError] = GroupError) -> "GroupResult[T]":
        if self.failed:
            raise error(self.step, self)
        return self


def fan_out(hosts: Iterable["Host"], step: str, fn: Callable[["Host"], T], parallel: Optional[int] = None,
            cancel: Optional[threading.Event] = None) -> GroupResult[T]:
    """`fn(host)` for every host on a thread pool of `parallel` threads (default: all hosts).

    Interrupted (Ctrl-C), it starts no more hosts, calls off the work in flight (sets `cancel`,
    which the connections watch) and waits for it to end before passing the interrupt on, so the
    clean-up that follows (removing temporary keys) never races a step still writing on a host."""
    hosts = list(hosts)
    result: GroupResult[T] = GroupResult(step, [h.name for h in hosts])
    prefix = f"tfcompose-{step}-{next(_pools)}_"
    pool = ThreadPoolExecutor(max_workers=max(1, min(parallel or len(hosts), len(hosts))), thread_name_prefix=prefix[:-1])
    futures: dict[str, Future] = {}
    try:
        for host in hosts:
            futures[host.name] = pool.submit(fn, host)
        # In short waits: a signal that lands just before a long wait begins would be handled only
        # when the wait ends (the wait is not interrupted), so Ctrl-C could be held for a whole step.
        pending = set(futures.values())
        while pending:
            _, pending = wait(pending, timeout=SIGNAL_POLL_S)
    except BaseException:
        _call_off(pool, prefix, cancel)
        raise
    pool.shutdown()                 # every task has ended: its threads go
    for name, future in futures.items():
        exc = future.exception()
        if exc is not None:
            result.failed[name] = exc
        else:
            result.succeeded[name] = future.result()
    return result


def _call_off(pool: ThreadPoolExecutor, prefix: str, cancel: Optional[threading.Event]) -> None:
    """Cancel what has not begun and wait for every task begun. What has not begun is cancelled
    first: a task called off ends quickly, and its thread would otherwise take the next host's
    work before the pool is shut. The pool's threads are found by name, not through the futures or
    the pool: the interrupt may land inside `submit`, after a thread has started and before
    either holds it."""
    try:
        pool.shutdown(wait=False, cancel_futures=True)
        if cancel is not None:
            cancel.set()
        # Ctrl-C pressed again meanwhile is held: the work is being called off (bounded by the
        # connections' CANCEL_GRACE_S) and the interrupt already being handled stops the command;
        # leaving now would let the clean-up race it. (Held, not caught: a Thread.join that a
        # KeyboardInterrupt cuts takes the still running thread for ended, CPython's bpo-45274.)
        with interrupts.held():
            for thread in threading.enumerate():
                if thread.name.startswith(prefix):
                    _join(thread)
    finally:
        if cancel is not None:
            cancel.clear()      # the clean-up after the interrupt uses the same connections


def _join(thread: threading.Thread) -> None:
    """Wait for a pool thread to end; one still starting (the interrupt landed inside its
    `start()`, so it cannot be joined yet) is waited for until it has started."""
    while True:
        try:
            thread.join()
            return
        except RuntimeError:            # "cannot join thread before it is started"
            time.sleep(0.005)
