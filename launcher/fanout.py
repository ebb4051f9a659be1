"""Run one step on every host in parallel (after fabric's ThreadingGroup / GroupResult)."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterable, Optional, TypeVar

from launcher.errors import GroupError
from launcher.inventory import Host

T = TypeVar("T")


def fan_out(hosts: Iterable[Host], step: str, fn: Callable[[Host], T], parallel: Optional[int] = None,
            error: type[GroupError] = GroupError, raise_on_error: bool = True) -> dict[str, T | BaseException]:
    """`fn(host)` on a thread pool; host name → result or exception, in inventory order.

    When any host failed (and `raise_on_error`), raises one `error` carrying every outcome.
    """
    hosts = list(hosts)
    with ThreadPoolExecutor(max_workers=max(1, min(parallel or len(hosts), len(hosts)))) as pool:
        futures = {host.name: pool.submit(fn, host) for host in hosts}
    results: dict[str, T | BaseException] = {}
    for name, future in futures.items():
        exc = future.exception()
        results[name] = exc if exc is not None else future.result()
    if raise_on_error and any(isinstance(r, BaseException) for r in results.values()):
        raise error(step, results)
    return results
