"""Where the suite's time goes: a table per test module at the end of every run, and the same in a
file (`TFC_TEST_TIMES`, default `.test-times.md`) that `.ci/run` prints.

Per module: wall time (set-up, call and teardown of its tests), the machine's CPU time over that
wall time (from /proc/stat, so containers, engines and sshd count: `cores` is CPU ÷ wall), the
set-up time (fixtures: the rigs a module builds, a session rig counted where it was first built)
and its five slowest tests. Registered by tests/conftest.py."""
from __future__ import annotations

import os
import platform
import time
from collections import defaultdict
from pathlib import Path

import pytest

_TICK = os.sysconf("SC_CLK_TCK")


def machine_cpu_seconds() -> float:
    """Busy CPU time of the whole machine so far (user, nice, system, irq, softirq)."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
        user, nice, system, _idle, _iowait, irq, softirq = (int(f) for f in fields[:7])
    except (OSError, ValueError):
        return time.process_time()
    return (user + nice + system + irq + softirq) / _TICK


def module_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


class SuiteClock:
    def __init__(self) -> None:
        self.started = time.monotonic()
        self.wall: dict[str, float] = defaultdict(float)
        self.cpu: dict[str, float] = defaultdict(float)
        self.setup: dict[str, float] = defaultdict(float)
        self.tests: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        self.count: dict[str, int] = defaultdict(int)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        wall0, cpu0 = time.monotonic(), machine_cpu_seconds()
        yield
        module = module_of(item.nodeid)
        self.wall[module] += time.monotonic() - wall0
        self.cpu[module] += machine_cpu_seconds() - cpu0
        self.count[module] += 1

    def pytest_runtest_logreport(self, report):
        module = module_of(report.nodeid)
        self.tests[module][report.nodeid] += report.duration
        if report.when == "setup":
            self.setup[module] += report.duration

    def table(self) -> str:
        total = time.monotonic() - self.started
        rows = sorted(self.wall, key=self.wall.get, reverse=True)
        lines = [f"## Test time per module ({platform.node()}, {os.cpu_count()} cores, "
                 f"{time.strftime('%Y-%m-%d %H:%M')}; whole session {total:,.0f} s)", "",
                 "| module | tests | wall s | CPU s | cores | set-up s | slowest (s) |",
                 "|---|---:|---:|---:|---:|---:|---|"]
        for module in rows:
            wall, cpu = self.wall[module], self.cpu[module]
            slow = sorted(self.tests[module].items(), key=lambda kv: kv[1], reverse=True)[:5]
            named = "; ".join(f"{nodeid.split('::', 1)[-1][:60]} {secs:.0f}" for nodeid, secs in slow if secs >= 0.5)
            lines.append(f"| {module} | {self.count[module]} | {wall:,.1f} | {cpu:,.1f} | "
                         f"{cpu / wall if wall else 0:.2f} | {self.setup[module]:,.1f} | {named} |")
        summed = sum(self.wall.values())
        lines.append(f"| **all** | {sum(self.count.values())} | {summed:,.1f} | {sum(self.cpu.values()):,.1f} | "
                     f"{sum(self.cpu.values()) / summed if summed else 0:.2f} | {sum(self.setup.values()):,.1f} | |")
        return "\n".join(lines) + "\n"

    def pytest_terminal_summary(self, terminalreporter):
        if not self.wall:
            return
        text = self.table()
        terminalreporter.write_sep("=", "time per test module")
        terminalreporter.write(text)
        out = Path(os.environ.get("TFC_TEST_TIMES", ".test-times.md"))
        try:
            out.write_text(text)
        except OSError as error:
            terminalreporter.write_line(f"(could not write {out}: {error})")


def pytest_configure(config):
    config.pluginmanager.register(SuiteClock(), "tfc-suite-clock")
