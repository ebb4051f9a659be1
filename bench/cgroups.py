"""A process tree's CPU measured from the host side: cgroup v2 folders the bench moves processes
into (what they start afterwards is born inside), whose `cpu.stat` counts every CPU-µs anything in
them ran, processes that ended included. A sum over /proc cannot: a child that ends between two
readings moves its time into its parent's `cutime` only once the parent waits for it, and a child
nobody waits for is lost, so the sum can even go down (B13's first figures did).

Works on a pure cgroup v2 host and on a hybrid one (v2 mounted at /sys/fs/cgroup/unified): usage_usec
is in every v2 cgroup's cpu.stat, without the cpu controller. Nothing is left behind: on the way
out every process still inside goes back to the root, and the folders are removed; folders a
killed bench left are removed by the next one.

Not a benchmark itself (`make bench` runs bench/[!c]*.py).
"""
from __future__ import annotations

import os
import time
from pathlib import Path

import common  # noqa: F401  (puts tests/ on the path)
from support.sshd import children_map  # noqa: E402  (the one reader of /proc's parent ids)

PREFIX = "tfcompose-bench-"
REMOVE_S = 10.0          # a process racing out of a folder being removed: retried this long


def cgroup2_mount(mounts: str = "/proc/self/mounts") -> Path:
    for line in Path(mounts).read_text().splitlines():
        fields = line.split()
        if len(fields) > 2 and fields[2] == "cgroup2":
            return Path(fields[1])
    raise SystemExit(f"no cgroup v2 hierarchy mounted ({mounts}): the sampler's CPU cannot be measured by its cgroup")


class Meter:
    """cgroups `<v2 root>/tfcompose-bench-<pid>/<name>`, one per name: `move` a process into one,
    read what everything in it used with `cpu_s`. A context manager: removed on exit."""

    def __init__(self, names: tuple[str, ...], root: Path | None = None):
        self.root = root or cgroup2_mount()
        self.base = self.root / f"{PREFIX}{os.getpid()}"
        self.names = names

    def __enter__(self) -> "Meter":
        remove_stale(self.root)
        self.base.mkdir()
        try:
            for name in self.names:
                (self.base / name).mkdir()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def move(self, pid: int, name: str) -> bool:
        """Moves one process (not its children already born: see tree_moves); False if it ended."""
        try:
            (self.base / name / "cgroup.procs").write_text(str(pid))
            return True
        except OSError:            # ESRCH: it ended meanwhile
            return False

    def members(self, name: str) -> set[int]:
        return {int(p) for p in (self.base / name / "cgroup.procs").read_text().split()}

    def cpu_s(self, name: str) -> float:
        """CPU seconds everything in the cgroup has used since it was made (user and system)."""
        return usage_usec(self.base / name) / 1e6

    def close(self) -> None:
        remove(self.base, self.root)


def usage_usec(folder: Path) -> int:
    for line in (folder / "cpu.stat").read_text().splitlines():
        key, value = line.split()
        if key == "usage_usec":
            return int(value)
    raise SystemExit(f"{folder / 'cpu.stat'} has no usage_usec")


def remove(base: Path, root: Path) -> None:
    """`base` and its children removed, whatever is still inside moved back to `root` first."""
    if not base.exists():
        return
    deadline = time.monotonic() + REMOVE_S
    for folder in [p for p in base.iterdir() if p.is_dir()] + [base]:
        while folder.exists():
            for pid in (folder / "cgroup.procs").read_text().split():
                try:
                    (root / "cgroup.procs").write_text(pid)
                except OSError:
                    pass
            try:
                folder.rmdir()
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)


def remove_stale(root: Path) -> None:
    """Folders of a bench that was killed (its pid gone) are removed."""
    for folder in root.glob(f"{PREFIX}*"):
        pid = folder.name[len(PREFIX):]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            remove(folder, root)


def tree_moves(tops: list[int], pick) -> list[tuple[int, str]]:
    """(pid, cgroup name) for every process under each of `tops`, top included: `pick(argv)` names
    a process's cgroup, or None for "its parent's"; the tops' own default is "sampler"."""
    children = children_map()
    moves, todo = [], [(top, "sampler") for top in tops]
    while todo:
        pid, inherited = todo.pop()
        name = pick(argv(pid)) or inherited
        moves.append((pid, name))
        todo += [(child, name) for child in children.get(pid, [])]
    return moves


def argv(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")[:-1]
    except OSError:
        return []


def parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def pids() -> list[int]:
    return [int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit()]
