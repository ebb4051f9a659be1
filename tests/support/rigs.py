"""What a test run shares, and what it leaves behind: nothing.

Every run has a root, `/tmp/tfct/<pid>/` (TFC_TEST_RUN; short, as a Unix socket's path must be:
an engine's under pytest's folders is within Linux's 107 bytes): pytest's temporary folders (`t/`),
the labs, engines and bare hosts the tests make, and the rigs made once for the whole run (the
trainer image, its split layers, the engine template) live under it. With pytest-xdist the run's
controller makes the root and each lane finds it in its environment; a rig made `once` is made by
whichever lane asks first, under a file lock, and found ready by the other.

What cannot live under a folder (network namespaces, links, accounts) is written to the run's
ledger as it is made (`note`), with what undoes it. A run killed mid-way is cleared by the next
run's start (`sweep`): the ledger undone, every process that names the dead run's root killed,
its mounts and containers removed. At its end a run checks that nothing of its own is left
(`leftovers`): processes, mounts, namespaces, containers, images, and the disk it used.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterator

BASE = Path("/tmp/tfct")
ENV = "TFC_TEST_RUN"
DISK_SLACK = 1 << 30          # a run may leave the disk this much fuller, the caches below aside
# The caches a run may fill and leave (docs/testing.md names them): the tests' own (the bare hosts'
# Debian tree, the editor test's npm packages) and Docker's build cache (`make image`'s layers, as
# any user of the image keeps them; the next run's build reuses them). On a fresh machine the first
# run fills them, about 1.2 GiB here: counted apart, not as growth.
TEST_CACHE = Path(os.environ.get("TFC_TEST_CACHE", "/var/cache/tfcompose-tests"))
UNITS = {"B": 1, "kB": 10**3, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12}


def run_root() -> Path:
    """This run's root (a process outside pytest, e.g. a bench: a root of its own)."""
    root = os.environ.get(ENV)
    if not root:
        root = str(start_run())
    return Path(root)


def start_run() -> Path:
    """A new run's root, owned by this process (the controller), named in the environment."""
    root = BASE / str(os.getpid())
    if root.exists():                        # a dead run's, under a pid used again
        clear(root)
    root.mkdir(parents=True)
    (root / "owner.json").write_text(json.dumps({"pid": os.getpid(), "started": process_start(os.getpid())}))
    os.environ[ENV] = str(root)
    return root


def process_start(pid: int) -> str:
    """When a process started (its /proc stat field), so that a reused pid is not taken for it."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


def alive(root: Path) -> bool:
    try:
        owner = json.loads((root / "owner.json").read_text())
    except (OSError, ValueError):
        return False
    return bool(owner.get("started")) and process_start(int(owner["pid"])) == owner["started"]


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def once(name: str, make: Callable[[Path], None]) -> Path:
    """The run's rig `name` (a folder): made by the first lane that asks, found by the others."""
    folder = run_root() / "s" / name
    with locked(run_root() / "s" / f"{name}.lock"):
        if not (folder / ".ready").exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
            make(folder)
            (folder / ".ready").write_text(str(os.getpid()))
    return folder


# --- the ledger: what cannot live under the root ------------------------------------------------------

def note(kind: str, **fields) -> None:
    """Record a rig that must be undone if the run dies (a lab, an engine, an account)."""
    with locked(run_root() / "ledger.lock"), (run_root() / "ledger.jsonl").open("a") as fh:
        fh.write(json.dumps({"kind": kind, **fields}) + "\n")


def ledger(root: Path) -> list[dict]:
    try:
        lines = (root / "ledger.jsonl").read_text().splitlines()
    except OSError:
        return []
    return [json.loads(line) for line in lines if line.strip()]


def undo(entry: dict) -> None:
    """Take a rig of the ledger down (each `down` is safe twice and after a crash)."""
    kind, fields = entry["kind"], {k: v for k, v in entry.items() if k != "kind"}
    if kind == "lab":
        from support.lab import Lab
        Lab(tag=fields["tag"], root_dir=Path(fields["root_dir"]), subnet=fields["subnet"], prefix=fields["prefix"]).down()
    elif kind == "slurm":
        from support.slurm import SlurmLab
        SlurmLab(tag=fields["tag"], root_dir=Path(fields["root_dir"]), subnet=fields["subnet"]).down()
    elif kind == "bare":
        from support.bare import BareLab
        BareLab(Path("/nonexistent"), tag=fields["tag"], subnet=fields["subnet"], root_dir=Path(fields["root_dir"])).down()
    elif kind == "engine":
        from support.engine import SecondEngine
        SecondEngine(Path(fields["root"]), fields["bridge"]).stop()
    elif kind == "lan":
        from support.netns import Lan
        Lan(fields["tag"], fields["subnet"], prefix=fields["prefix"]).down()
    elif kind == "netns":
        subprocess.run(["ip", "netns", "del", fields["name"]], capture_output=True)
    elif kind == "account":
        from support import accounts
        accounts.remove(fields["name"])


# --- what names a run's root -----------------------------------------------------------------------------

def processes_of(root: Path) -> list[tuple[int, str]]:
    """Processes whose command line or working folder is under the root (sshd, dockerd, slurmd,
    trainers, servers), but never this process or its ancestors."""
    mine = {os.getpid(), *ancestors()}
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in mine:
            continue
        try:
            argv = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if str(root) in argv or cwd == str(root) or cwd.startswith(f"{root}/"):
            found.append((int(entry.name), argv.strip()[:160]))
    return found


def ancestors() -> set[int]:
    pids, pid = set(), os.getppid()
    while pid > 1:
        pids.add(pid)
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return pids


def mounts_under(root: Path) -> list[str]:
    points = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()]
    return sorted((p for p in points if p == str(root) or p.startswith(f"{root}/")), reverse=True)


def containers_of(root: Path) -> list[str]:
    """Containers on this machine's engine whose compose project lives under the root."""
    done = subprocess.run(["docker", "ps", "-aq", "--filter", "label=com.docker.compose.project.working_dir"],
                          capture_output=True, text=True, timeout=60)
    ids = done.stdout.split()
    if not ids:
        return []
    shown = subprocess.run(["docker", "inspect", "--format",
                            '{{.Id}} {{index .Config.Labels "com.docker.compose.project.working_dir"}}', *ids],
                           capture_output=True, text=True, timeout=60).stdout.splitlines()
    return [line.split()[0] for line in shown if len(line.split()) == 2 and line.split()[1].startswith(f"{root}/")]


def namespaces_left(root: Path) -> list[str]:
    """The network namespaces the run's labs made that still exist."""
    names = set(subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split())
    left = []
    for entry in ledger(root):
        if entry["kind"] in ("lab", "lan", "slurm", "bare"):
            prefix = {"slurm": "tfs", "bare": "tb"}.get(entry["kind"], entry.get("prefix", "tf"))
            tag = entry["tag"]
            left += [n for n in names if n.startswith(f"{prefix}n{tag}h")]
        elif entry["kind"] == "netns" and entry["name"] in names:
            left.append(entry["name"])
    return sorted(set(left))


def clear(root: Path) -> None:
    """Everything of a run taken down: its ledger undone, its processes killed, its mounts,
    containers and folder removed."""
    for entry in reversed(ledger(root)):
        with contextlib.suppress(Exception):
            undo(entry)
    for pid, _ in processes_of(root):
        with contextlib.suppress(OSError):
            os.kill(pid, 9)
    ids = containers_of(root)
    if ids:
        subprocess.run(["docker", "rm", "-f", *ids], capture_output=True, timeout=120)
    for point in mounts_under(root):
        subprocess.run(["umount", "-l", point], capture_output=True)
    shutil.rmtree(root, ignore_errors=True)


def sweep() -> list[Path]:
    """The runs killed before they could clean up, cleared; those still running left alone."""
    cleared = []
    for root in sorted(BASE.iterdir()) if BASE.is_dir() else []:
        if root.is_dir() and not alive(root):
            clear(root)
            cleared.append(root)
    return cleared


# --- before and after --------------------------------------------------------------------------------

def snapshot() -> dict:
    """What the machine holds that a run could leave behind: its engine's images, volumes and
    networks, and the disk's use."""
    def listed(*argv: str) -> list[str]:
        done = subprocess.run(["docker", *argv], capture_output=True, text=True, timeout=120)
        return sorted(set(done.stdout.split()))
    return {"images": listed("images", "-aq", "--no-trunc"), "volumes": listed("volume", "ls", "-q"),
            "networks": listed("network", "ls", "-q"), "disk_used": shutil.disk_usage("/").used,
            "tmp": temp_files(), "caches": cache_bytes()}


def cache_bytes() -> int:
    """What the caches a run may fill hold now: the tests' cache folder and Docker's build cache."""
    folder = sum(p.stat().st_size for p in TEST_CACHE.rglob("*") if p.is_file()) if TEST_CACHE.is_dir() else 0
    shown = subprocess.run(["docker", "system", "df", "--format", "{{.Type}}\t{{.Size}}"], capture_output=True,
                           text=True, timeout=120).stdout
    return folder + sum(size_of(line.split("\t", 1)[1]) for line in shown.splitlines() if line.startswith("Build Cache\t"))


def size_of(text: str) -> int:
    """`1.461GB`, `267.5MB`, `0B` (Docker's decimal units) in bytes; 0 for what is not a size."""
    found = re.fullmatch(r"\s*([\d.]+)\s*([kKMGT]?B)\s*", text)
    return round(float(found.group(1)) * UNITS[found.group(2)]) if found else 0


# What TensorFlow (autograph's generated sources) and the trainer (a worker's throw-away results
# folder) leave in the system's temporary folder when their process is killed before it tidies up.
TEMP_NAMES = re.compile(r"__autograph_generated_file\w+\.py|tfcompose-worker-\w+")


def temp_files() -> list[str]:
    """The system temporary folder's entries named as the run's processes name theirs."""
    return sorted(p.name for p in Path("/tmp").iterdir() if TEMP_NAMES.fullmatch(p.name))


def own_temp(root: Path) -> Path:
    """The run's temporary folder, named in TMPDIR for every process the run starts (the lanes,
    the launchers and trainers they run): what those processes leave there goes with the root."""
    folder = root / "tmp"
    folder.mkdir(exist_ok=True)
    os.environ["TMPDIR"] = str(folder)
    tempfile.tempdir = None                  # computed again from TMPDIR
    return folder


def suite_tag(tag: str) -> bool:
    """A tag the tests make: the trainer image they build, its code layers, their own test images."""
    from support.common import TEST_IMAGE
    return bool(re.fullmatch(r"tfcompose-trainer:run-[0-9a-f]+|tfcompose-clone-test:.*|tfc-test-.*|victim:.*", tag)) \
        or tag == TEST_IMAGE


def new_images(before: dict) -> list[str]:
    """Images made since `before` that are the suite's: untagged (a tag moved away from them), or
    tagged as the tests tag theirs. Anyone else's new image is left alone."""
    ids = sorted(set(snapshot()["images"]) - set(before["images"]))
    if not ids:
        return []
    shown = subprocess.run(["docker", "image", "inspect", "--format", "{{.Id}} {{json .RepoTags}}", *ids],
                           capture_output=True, text=True, timeout=120).stdout.splitlines()
    mine = []
    for line in shown:
        image_id, tags = line.split(" ", 1)
        tags = json.loads(tags) or []
        if not tags or any(suite_tag(t) for t in tags):
            mine.append(image_id)
    return mine


def leftovers(root: Path, before: dict) -> list[str]:
    """What the run left (its root aside): each a line naming it."""
    found = [f"process {pid}: {argv}" for pid, argv in processes_of(root)]
    found += [f"mount {point}" for point in mounts_under(root)]
    found += [f"network namespace {name}" for name in namespaces_left(root)]
    found += [f"container {cid[:12]}" for cid in containers_of(root)]
    found += [f"image {image.replace('sha256:', '')[:12]}" for image in new_images(before)]
    found += [f"/tmp/{name}" for name in sorted(set(temp_files()) - set(before.get("tmp", [])))]
    after = snapshot()
    for kind in ("volumes", "networks"):
        found += [f"docker {kind[:-1]} {item[:12]}" for item in sorted(set(after[kind]) - set(before[kind]))]
    return found


def disk_grown(before: dict) -> list[str]:
    """The disk, once the run's root is gone: at most DISK_SLACK fuller than before, what the caches
    gained aside."""
    grown = shutil.disk_usage("/").used - before["disk_used"] - max(0, cache_bytes() - before.get("caches", 0))
    if grown <= DISK_SLACK:
        return []
    return [f"the disk holds {grown / 2**30:.1f} GiB more than before the run, its caches aside (at most "
            f"{DISK_SLACK / 2**30:.0f})"]


def wait_for_removals(root: Path, seconds: float = 600) -> None:
    """Folders the tests discard are deleted by `rm` processes of their own (support/bare.py):
    wait for those before anything is judged left behind."""
    end = time.monotonic() + seconds
    while time.monotonic() < end and any(argv.startswith("rm ") for _, argv in processes_of(root)):
        time.sleep(1)


def remove_new_images(before: dict) -> None:
    """The images the run made (the trainer image, code layers, rebuilt tags), removed."""
    mine = new_images(before)
    if mine:
        subprocess.run(["docker", "rmi", "-f", *mine], capture_output=True, timeout=600)


# --- the run's keeper (pytest's controller) ---------------------------------------------------------------

def wants_rigs(args: list[str]) -> bool:
    """The integration tests are in this run (`make test-unit` names tests/unit alone: no Docker)."""
    paths = [a for a in args if not a.startswith("-")]
    return not paths or any("unit" not in Path(a).parts for a in paths)


class RunKeeper:
    """Clears what killed runs left, gives this run its root (and pytest its temporary folders
    there), and at the end takes down what is left and checks that nothing is."""

    def __init__(self, config) -> None:
        self.cleared = sweep()
        self.root = start_run()
        own_temp(self.root)
        if not config.option.basetemp:
            config.option.basetemp = str(self.root / "t")
        self.before = snapshot()
        (self.root / "before.json").write_text(json.dumps(self.before))
        self.found: list[str] = []

    def pytest_sessionfinish(self, session, exitstatus):
        for entry in reversed(ledger(self.root)):
            with contextlib.suppress(Exception):
                undo(entry)
        remove_new_images(self.before)
        wait_for_removals(self.root)
        self.found = leftovers(self.root, self.before)
        if not self.found and session.exitstatus == 0:
            clear(self.root)             # the run's rigs and caches, then the disk compared
            self.found = disk_grown(self.before)
        if self.found and session.exitstatus == 0:
            session.exitstatus = 1

    def pytest_terminal_summary(self, terminalreporter):
        write = terminalreporter.write_line
        terminalreporter.write_sep("=", "what the run left behind")
        for root in self.cleared:
            write(f"cleared a killed run's rigs first: {root}")
        for line in self.found:
            write(f"LEFT BEHIND: {line}")
        if not self.found:
            write(f"nothing: no process, mount, namespace, container or image of the run's is left "
                  f"(its root {self.root})")
