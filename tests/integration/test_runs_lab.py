"""Runs you can trust, on a LAN lab (tests/support/lab.py): three hosts, each its own network
namespace, sshd and Docker engine (h0 this machine's), a parallel TPE search with ASHA on the real
digits. The same inventory run twice is two runs, each with only its own trials, files and HParams
sessions, never overwritten; a worker killed by hand has its trial handed on as soon as the launcher
sees it (at its first look: its warning says so); the live search line moves while the chief trains; a chief killed by hand ends the wait
(Docker never restarts it, whatever restarts are left), its run is collected as failed, and the next
`up --wait` resumes it to the end without training any values twice. An elastic sync run loses a
worker (its link cut), takes it back when it answers again, loses its chief (its container killed)
and goes on each time, the hosts as the next generation from the epoch each had backed up (the
chief's state taken from its mirror); below min_hosts it stops, and the next `up --wait` resumes it
with every host's backups and the chief's state brought up to the newest, its re-forms counted on."""
from __future__ import annotations

import json
import os
import re
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest

from support.cluster import CliProcess, cli, run_results, throttle_at_start
from support.common import free_ports, require
from support.digits import write_digits
from support.lab import Lab, available
from support.sshd import write_inventory
from support.hparams import hparams_sessions
from trainer.spec.progress import SEARCH_FILE, parse_search
from trainer.spec.results import safe_name

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]   # the lab's set-up counts in the first
BUDGET = 6


@pytest.fixture(scope="module")
def lab(engine_template):
    ok, why = available()
    require(ok, why)
    # Its own /24 (10.213.70): the other labs (8, 9, 0, 30, 40, 50, 60, 71) may be up at the same time.
    # Its engines start with the trainer image (the run's engine template).
    built = Lab(tag=f"u{os.getpid() % 1000}", subnet="10.213.70", template=engine_template).up(3, local_first=True)
    try:
        yield built
    finally:
        built.down()


@pytest.fixture(scope="module")
def digits(tmp_path_factory) -> Path:
    root = write_digits(tmp_path_factory.mktemp("digits") / "digits")
    for path in [root, *root.rglob("*")]:       # readable by the non-root user a container runs as
        path.chmod(0o755 if path.is_dir() else 0o644)
    return root


def inventory(lab: Lab, folder: Path, digits: Path, image: str, **defaults) -> tuple[str, Path]:
    name = f"u{uuid.uuid4().hex[:8]}"
    train = {"dataset": {"kind": "image_folder", "train_dir": "/data", "val_dir": None, "validation_split": 0.25,
                         "image_size": [16, 16], "color_mode": "grayscale"},
             "candidates": ["small_cnn"], "epochs": 6, "batch_per_replica": 32, "join_timeout_s": 120,
             # 3 rates × 2 batches × 2 widths: 12 points, of which TPE draws 6
             "search": {"mode": "parallel", "sampler": "tpe", "trials": BUDGET, "seed": 3,
                        "learning_rates": [0.01, 0.003, 0.001], "batch_per_replica": [16, 32],
                        "hyperparameters": {"small_cnn": {"width": [16, 32]}},
                        "pruner": "asha", "min_epochs": 1, "reduction_factor": 3, "port": free_ports(1)[0]}}
    path = write_inventory(lab, folder / f"{name}.yaml", name, lab.hosts, known_hosts=lab.known_hosts(), train=train,
                           image=image, defaults={"data_dir": str(digits), **defaults})
    return name, path


@pytest.fixture
def cleanup(lab):
    made = []
    yield made
    for name in made:
        for host in lab.hosts:
            ids = host.docker("ps", "-aq", "--filter", f"label=tfcompose.cluster={name}", check=False).stdout.split()
            if ids:
                host.docker("rm", "-f", *ids, check=False)


def run_folder(runs: Path, name: str) -> Path:
    return (runs / name / "latest").resolve()


def budget_trials(doc: dict) -> list[dict]:
    return [r for r in doc["candidates"] if "~" not in r["candidate"]]


def values(record: dict) -> tuple:
    return tuple(sorted(record["hyperparameters"].items()))


def assert_only_its_own(folder: Path, doc: dict) -> None:
    """The run's trials are the budget once each (no values twice, no number skipped), and every
    history file and HParams session it brought back is one of its own trials."""
    mine = budget_trials(doc)
    assert sorted(r["candidate"] for r in mine) == [f"small_cnn#{k:03d}" for k in range(1, BUDGET + 1)]
    assert len({values(r) for r in mine}) == BUDGET
    names = {safe_name(r["candidate"]): r for r in doc["candidates"]}
    for host in ("h0", "h1", "h2"):
        for history in (folder / "hosts" / host / "history").glob("*.csv"):
            assert history.stem in names and names[history.stem]["host"] == host, history
    sessions = hparams_sessions(folder, "hosts/*/tensorboard/*/events.out.tfevents.*")
    assert set(sessions) == set(names)
    for run, session in sessions.items():
        assert session["learning_rate"] == pytest.approx(names[run]["learning_rate"])
        assert session["small_cnn.width"] == names[run]["hyperparameters"]["width"]


class ChiefTrials:
    """What the chief's queue says h0 is training (its search-progress.json, read every 0.3 s while
    `up` runs): [(when, trial or None)], one entry per change, on the CliProcess's clock."""

    def __init__(self, lab: Lab, name: str, up: CliProcess):
        self.seen: list[tuple[float, str | None]] = []
        self._thread = threading.Thread(target=self._watch, args=(lab, name, up), daemon=True)
        self._thread.start()

    def _watch(self, lab: Lab, name: str, up: CliProcess) -> None:
        while up.proc.poll() is None:
            results = run_results(lab.hosts[0].workdir / name)
            try:
                entry = parse_search((results / SEARCH_FILE).read_text()).hosts.get("h0") if results else None
            except (OSError, ValueError):
                entry = None
            trial = entry["trial"] if entry and entry["state"] == "training" else None
            if not self.seen or self.seen[-1][1] != trial:
                self.seen.append((time.monotonic(), trial))
            time.sleep(0.3)

    def at(self, when: float) -> tuple[str | None, float]:
        """The chief's trial at that moment, and since when the queue has said so."""
        current = next((seen for seen in reversed(self.seen) if seen[0] <= when), (when, None))
        return current[1], current[0]


SETTLED_S = 5      # the launcher looks each second and says the search every 2 s: a line the chief's
#                    own take of a trial moved comes within about 3 s of the queue saying it took one


def moved_within_a_chief_trial(up: CliProcess, chief: ChiefTrials) -> bool:
    """Whether a search line, with trials still running, changed while the chief (h0) had been in
    one trial of its own for SETTLED_S, so that its own take of a trial cannot have moved it."""
    before = None
    for line, when in zip(list(up.lines), list(up.times)):
        if not line.startswith("search:"):
            continue
        said = re.sub(r"; ETA .*$", "", line.strip())
        running = int(re.search(r"(\d+) running", said).group(1))
        trial, since = chief.at(when)
        if before is not None and said != before and running and trial and when - since >= SETTLED_S:
            return True
        before = said
    return False


def mid_trial(lab: Lab, name: str, host: int, up: CliProcess, seconds: float = 600) -> str:
    """The host's container once its progress file says an epoch of a trial is done."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert up.proc.poll() is None, f"up ended before h{host} got into a trial:\n{up.output}"
        results = run_results(lab.hosts[host].workdir / name)
        doc = next((json.loads(p.read_text()) for p in results.glob("progress-*.json")), None) if results else None
        if doc and doc["epoch"] >= 1 and not doc["done"]:
            ids = lab.hosts[host].docker("ps", "-q", "--filter", f"label=tfcompose.cluster={name}").stdout.split()
            if ids:
                return ids[0]
        time.sleep(0.3)
    raise AssertionError(f"h{host} never got into a trial:\n{up.output[-4000:]}")


def test_the_same_inventory_twice_is_two_runs_each_with_only_its_own(lab, tmp_path, digits, trainer_image, capsys,
                                                                    cleanup):
    name, inv = inventory(lab, tmp_path, digits, trainer_image)
    cleanup.append(name)
    runs = tmp_path / "runs"
    first_up = CliProcess("up", "-i", str(inv), "--wait", "--runs", str(runs))
    # The chief held to a seventh of a CPU: the others finish trials while it is in one of its own, so a
    # line that moved only when the chief took a trial would show (the live view looks every few s).
    # (A third was too little on a fast machine: the chief's trials, pruned at the first rung, took
    # 6 s, leaving 1.5 s past SETTLED_S in which to see the line move.)
    chief = ChiefTrials(lab, name, first_up)
    throttle_at_start(lambda *a: lab.hosts[0].docker(*a, check=False), name, "h0", first_up, cpus="0.15")
    assert first_up.finish(600) == 0, first_up.output
    first = run_folder(runs, name)
    first_doc = json.loads((first / "results.json").read_text())
    assert_only_its_own(first, first_doc)
    # The search line comes from the chief's queue, not from the chief's own loop: it moves as any
    # host finishes a trial (before, only as often as the chief took a trial of its own), so it
    # changes while the chief is still in one trial of its own (counted while trials run: the last
    # line, when the chief asks and none is left, would come from its own loop too).
    assert moved_within_a_chief_trial(first_up, chief), (chief.seen, first_up.output)
    assert not [line for line in first_up.output.splitlines() if re.search(r"trial \d+/\d+", line)]  # no global index per host
    saved = (first / "results.json").read_bytes()
    assert cli(capsys, "down", "-i", str(inv))[0] == 0

    second_up = CliProcess("up", "-i", str(inv), "--wait", "--runs", str(runs))
    victim = mid_trial(lab, name, 2, second_up)
    killed = time.monotonic()
    lab.hosts[2].docker("kill", victim)             # by hand: Docker will not restart it (restarts left or not)
    said = second_up.wait_for(r"h2: lost: the launcher saw it end", seconds=120)
    # told at the launcher's first look: not after Docker's back-off and 10 s more, nor the queue's 120 s
    assert second_up.time_of(said) - killed < 10, said
    assert second_up.finish(600) == 0, second_up.output
    second = run_folder(runs, name)
    assert second != first and (first / "results.json").read_bytes() == saved          # never overwritten
    doc = json.loads((second / "results.json").read_text())
    assert_only_its_own(second, doc)
    retried = [r for r in doc["candidates"] if r["state"] == "retried"]
    assert [r["host"] for r in retried] == ["h2"] and "the launcher saw h2" in retried[0]["why"]
    retry = next(r for r in doc["candidates"] if r["candidate"] == retried[0]["retried_as"])
    assert retry["host"] in ("h0", "h1") and values(retry) == values(retried[0])
    listed = cli(capsys, "runs", "-i", str(inv), "--runs", str(runs))[1]
    assert first.name in listed and second.name in listed
    assert all(json.loads((f / "outcome.json").read_text())["state"] == "finished" for f in (first, second))
    assert cli(capsys, "down", "-i", str(inv))[0] == 0


def test_a_chief_killed_mid_run_is_collected_as_failed_and_the_next_up_resumes_it(lab, tmp_path, digits, trainer_image,
                                                                               capsys, cleanup):
    name, inv = inventory(lab, tmp_path, digits, trainer_image, restart_retries=2)     # the default
    cleanup.append(name)
    runs = tmp_path / "runs"
    up = CliProcess("up", "-i", str(inv), "--wait", "--runs", str(runs))
    up.wait_for(r"search: ([2-9]|\d\d) done|search: \d+ done, [1-9]", seconds=900)       # two trials ended
    chief = subprocess.run(["docker", "ps", "-q", "--filter", f"label=tfcompose.cluster={name}",
                            "--filter", "label=tfcompose.host=h0"], capture_output=True, text=True).stdout.split()
    subprocess.run(["docker", "kill", *chief], check=True, capture_output=True)
    assert up.finish(180) == 1, up.output                # ended: no wait for restarts Docker will not make
    assert "h0 failed" in up.output and "`tfcompose up --wait` resumes run" in up.output
    failed = run_folder(runs, name)
    assert json.loads((failed / "outcome.json").read_text())["state"] == "failed"
    assert "This run failed" in (failed / "report.md").read_text() and not (failed / "results.json").exists()

    resumed = CliProcess("up", "-i", str(inv), "--wait", "--runs", str(runs))
    assert finished(resumed, lab, name, 600) == 0, resumed.output
    assert f"run {failed.name}: resumed" in resumed.output and run_folder(runs, name) == failed
    doc = json.loads((failed / "results.json").read_text())
    assert_only_its_own(failed, doc)
    assert doc["restarts"] >= 1 and json.loads((failed / "outcome.json").read_text())["state"] == "finished"
    assert (failed / "logs" / "h0.attempt-1.log").is_file() and (failed / "logs" / "h0.log").is_file()
    assert cli(capsys, "down", "-i", str(inv))[0] == 0


def finished(up: CliProcess, lab: Lab, name: str, seconds: float) -> int:
    """`up`'s exit code; if it is still running after `seconds`, a failure that shows what it and
    each host's container said last (a hang costs minutes, not the suite's whole timeout)."""
    try:
        return up.finish(seconds)
    except AssertionError as exc:
        logs = []
        for host in lab.hosts:
            ids = host.docker("ps", "-aq", "--filter", f"label=tfcompose.cluster={name}", check=False).stdout.split()
            for found in ids:
                said = host.docker("logs", "--tail", "40", found, check=False)
                logs.append(f"--- {host.name} {found}:\n{said.stdout[-3000:]}{said.stderr[-3000:]}")
        raise AssertionError(f"{exc}\n" + "\n".join(logs)) from None


EPOCHS = 20


def sync_inventory(lab: Lab, folder: Path, digits: Path, image: str) -> tuple[str, Path]:
    """One trial trained by all three hosts together (MWMS), elastic down to two hosts, taking back
    a host that returns."""
    name = f"e{uuid.uuid4().hex[:8]}"
    train = {"dataset": {"kind": "image_folder", "train_dir": "/data", "val_dir": None, "validation_split": 0.25,
                         "image_size": [16, 16], "color_mode": "grayscale"},
             "candidates": ["small_cnn"], "epochs": EPOCHS, "batch_per_replica": 16, "learning_rate": 0.003,
             "join_timeout_s": 120}
    path = write_inventory(lab, folder / f"{name}.yaml", name, lab.hosts, known_hosts=lab.known_hosts(), train=train,
                           image=image, defaults={"data_dir": str(digits), "restart_retries": 2},
                           elastic={"min_hosts": 2, "lost_after_s": 8, "rejoin": True, "rejoin_after_s": 5})
    return name, path


def progress_of(lab: Lab, host: int, name: str) -> dict | None:
    """The host's newest progress document (a host that was another task before keeps that one's too)."""
    results = run_results(lab.hosts[host].workdir / name)
    found = sorted(results.glob("progress-*.json"), key=lambda p: p.stat().st_mtime) if results else []
    return json.loads(found[-1].read_text()) if found else None


def until(what, up: CliProcess, seconds: float = 300):
    """`what()` once it is true, failing if `up` ends first."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert up.proc.poll() is None, f"up ended early:\n{up.output}"
        found = what()
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError(f"never happened:\n{up.output[-4000:]}")


def mirrored(lab: Lab, name: str, host: int, beyond: int) -> dict | None:
    """The chief's state as relayed to `host`, once it is past epoch `beyond`."""
    results = run_results(lab.hosts[host].workdir / name)
    said = results.parent / "backup" / f"h{host}" / "chief-mirror" / "manifest.json" if results else None
    try:
        doc = json.loads(said.read_text()) if said else None
    except (OSError, ValueError):
        return None
    return doc if doc and doc["epoch"] > beyond else None


def test_an_elastic_sync_run_loses_a_worker_takes_it_back_loses_its_chief_stops_below_min_hosts_and_resumes(
        lab, tmp_path, digits, trainer_image, capsys, cleanup):
    """3 hosts, elastic down to 2. h2's link cut mid-training: after elastic.lost_after_s the launcher
    stops the others, renders a two-host TF_CONFIG on new ports, and they resume the same trial from
    their last backed-up epoch (each host's backups under its own name). h2's link back: once it has
    answered for elastic.rejoin_after_s, it is taken back at an epoch's end with the chief's backups.
    The chief's container killed: h1, which holds the chief's mirrored state (study, history, best
    model), goes on as chief with h2. h2's link cut again: one host left, below min_hosts, so the run
    stops, its backups kept. With every host back, `up --wait` resumes it: h0's backups (from before
    its loss) brought up to the newest, and h1's state as chief brought to h0, chief again; nothing
    learned is lost, each generation's logs kept."""
    name, inv = sync_inventory(lab, tmp_path, digits, trainer_image)
    cleanup.append(name)
    runs = tmp_path / "runs"
    up = CliProcess("up", "-i", str(inv), "--wait", "--runs", str(runs))
    until(lambda: (progress_of(lab, 0, name) or {}).get("epoch", 0) >= 2, up)
    lab.hosts[2].run("ip", "link", "set", "eth0", "down")
    try:
        said = up.wait_for(r"h2.*lost for good", seconds=180)
        assert "generation 1 goes on without it on h0, h1" in said, said
    finally:
        lab.hosts[2].run("ip", "link", "set", "eth0", "up")
    said = up.wait_for(r"h2.*back: generation 2", seconds=180)
    assert "takes it back on h0, h1, h2" in said, said
    resumed = int(re.search(r"from epoch (\d+)", said).group(1))
    until(lambda: mirrored(lab, name, 1, resumed), up)               # generation 2's chief state reached h1
    chief = lab.hosts[0].docker("ps", "-q", "--filter", f"label=tfcompose.cluster={name}").stdout.split()
    lab.hosts[0].docker("kill", *chief)
    said = up.wait_for(r"h0.*lost for good", seconds=180)
    assert "generation 3 goes on without it on h1, h2" in said, said
    resumed = int(re.search(r"from epoch (\d+)", said).group(1))
    until(lambda: (progress_of(lab, 1, name) or {}).get("epoch", 0) > resumed, up)   # generation 3 trains
    lab.hosts[2].run("ip", "link", "set", "eth0", "down")
    try:
        assert up.finish(300) == 1, up.output
    finally:
        lab.hosts[2].run("ip", "link", "set", "eth0", "up")
    assert "1 host(s) left, fewer than elastic.min_hosts (2); stopped the others" in up.output, up.output
    stopped_at = progress_of(lab, 1, name)["epoch"]
    # each change resumed from the epoch finished then: at most the open epoch trained again
    went_on = [int(n) - 1 for n in re.findall(r"(?:goes on without it|takes it back) on .*from epoch (\d+)$",
                                                up.output, re.M)]
    assert len(went_on) == 3 and 2 <= went_on[0] < went_on[1] < went_on[2] <= stopped_at, (went_on, stopped_at)

    # h2's lease session, held by an `up` that ended while h2 was cut off, ends when its heartbeat
    # has been silent for 30 s (sshd cannot tell): --queue waits for it, as the refusal advises.
    code, out, err = cli(capsys, "up", "-i", str(inv), "--wait", "--queue", "--runs", str(runs))
    assert code == 0, out + err
    assert "h0: backups (brought up to h1's: it was behind)" in out, out
    assert "h0: backups (takes the chief's state from h1, chief last)" in out, out
    folder = run_folder(runs, name)
    doc = json.loads((folder / "results.json").read_text())
    [record] = doc["candidates"]
    assert doc["workers"] == 3 and record["val_accuracy"] > 0.8, doc
    assert stopped_at - 1 <= record["resumed_from_epoch"] <= stopped_at, (stopped_at, record)
    # the whole run's re-forms, those before the stop too, and the resume as the last
    reforms = doc["elastic"]["reforms"]
    assert [(r["generation"], r["lost"], r["joined"]) for r in reforms] == [
        (1, ["h2"], []), (2, [], ["h2"]), (3, ["h0"], []), (4, [], ["h0"])], reforms
    assert "generation 4, h0 taken back (resumed by `up` after the run stopped): 2 → 3 hosts" in \
        (folder / "report.md").read_text()
    history = (folder / "history" / "small_cnn.csv").read_text().splitlines()
    assert [int(row.split(",")[0]) for row in history[1:]] == list(range(1, EPOCHS + 1))   # every row, whoever trained it
    logs = folder / "logs"
    # the size each generation's log says last (a container Docker restarted says it again)
    ready = {path.name: re.findall(r"cluster ready: (\d) worker", path.read_text())[-1:] for path in logs.iterdir()}
    assert ready["h1.attempt-1.log"] == ["3"] and ready["h1.attempt-2.log"] == ["2"], ready
    assert ready["h1.attempt-3.log"] == ["3"] and ready["h1.attempt-4.log"] == ["2"] and ready["h1.log"] == ["3"], ready
    assert "chief now: took h0's state" in (logs / "h1.attempt-4.log").read_text()
    assert "chief now: took h1's state" in (logs / "h0.log").read_text()
    assert cli(capsys, "down", "-i", str(inv))[0] == 0
