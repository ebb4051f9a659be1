"""Where the suite's time goes: a table per test module at the end of every run, and the same in a
file (`TFC_TEST_TIMES`, default `.test-times.md`) that `.ci/run` prints.

Per module: wall time (set-up, call and teardown of its tests), the machine's CPU time over that
wall time (from /proc/stat, so containers, engines and sshd count; with two lanes the machine's
CPU is split evenly between them), `cores` (CPU ÷ wall), the set-up time (fixtures: the rigs a
module builds, a rig shared by the run counted where it was first built) and its five slowest
tests. Each test is measured where it runs (a pytest-xdist lane, or the one process) and its
figures travel in its report to the process that prints the table. Registered by conftest.py."""
from __future__ import annotations

import os
import platform
import time
from collections import defaultdict
from pathlib import Path

import pytest

_TICK = os.sysconf("SC_CLK_TCK")
FIGURES = "tfc-timing"


def machine_cpu_seconds() -> float:
    """Busy CPU time of the whole machine so far (user, nice, system, irq, softirq)."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
        user, nice, system, _idle, _iowait, irq, softirq = (int(f) for f in fields[:7])
    except (OSError, ValueError):
        return time.process_time()
    return (user + nice + system + irq + softirq) / _TICK


def lanes() -> int:
    return max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1))


class Probe:
    """In the process that runs the tests: each test's wall and CPU, from its set-up's start to its
    teardown's end, put in its teardown report."""

    started = pytest.StashKey[tuple]()

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        item.stash[self.started] = (time.monotonic(), machine_cpu_seconds())
        yield

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        report = outcome.get_result()
        if call.when == "teardown" and self.started in item.stash:
            wall0, cpu0 = item.stash[self.started]
            cpu = (machine_cpu_seconds() - cpu0) / lanes()
            report.user_properties.append((FIGURES, (time.monotonic() - wall0, cpu)))


def module_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def test_of(nodeid: str) -> str:
    """The test's name within its module, without the lane group pytest-xdist appends (`@group`)."""
    name = nodeid.split("::", 1)[-1]
    return name.rsplit("@", 1)[0] if "@" in name and "[" not in name.rsplit("@", 1)[1] else name


class SuiteClock:
    """Where the reports arrive (the controller with lanes): the table."""

    def __init__(self, lanes: int) -> None:
        self.started, self.lanes = time.monotonic(), lanes
        self.wall: dict[str, float] = defaultdict(float)
        self.cpu: dict[str, float] = defaultdict(float)
        self.setup: dict[str, float] = defaultdict(float)
        self.tests: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        self.count: dict[str, int] = defaultdict(int)

    def pytest_runtest_logreport(self, report):
        module = module_of(report.nodeid)
        self.tests[module][report.nodeid] += report.duration
        if report.when == "setup":
            self.setup[module] += report.duration
        for key, value in report.user_properties:
            if key == FIGURES:
                wall, cpu = value
                self.wall[module] += wall
                self.cpu[module] += cpu
                self.count[module] += 1

    def table(self) -> str:
        total = time.monotonic() - self.started
        rows = sorted(self.wall, key=self.wall.get, reverse=True)
        lines = [f"## Test time per module ({platform.node()}, {os.cpu_count()} cores, {self.lanes} lane(s), "
                 f"{time.strftime('%Y-%m-%d %H:%M')}; whole session {total:,.0f} s)", "",
                 "| module | tests | wall s | CPU s | cores | set-up s | slowest (s) |",
                 "|---|---:|---:|---:|---:|---:|---|"]
        for module in rows:
            wall, cpu = self.wall[module], self.cpu[module]
            slow = sorted(self.tests[module].items(), key=lambda kv: kv[1], reverse=True)[:5]
            named = "; ".join(f"{test_of(nodeid)[:60]} {secs:.0f}" for nodeid, secs in slow if secs >= 0.5)
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
    config.pluginmanager.register(Probe(), "tfc-probe")
    if not hasattr(config, "workerinput"):          # not a lane: where the reports come together
        workers = getattr(config.option, "numprocesses", None)
        config.pluginmanager.register(SuiteClock(workers if isinstance(workers, int) and workers > 0 else 1),
                                      "tfc-suite-clock")
