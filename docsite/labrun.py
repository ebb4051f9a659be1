"""The pictures only a real run on real hosts can give, made as a user makes them: a search started
with `tfcompose up --wait` on a terminal (the live view, mid-run and at the end), its report's
telemetry picture, `tfcompose tensorboard` of the collected run (HParams) and `tfcompose track` into
a loopback `mlflow server` (the comparison of its trials), the two web pages caught by a headless
Chromium. Everything it starts is stopped, and the cluster taken down, even when it fails."""
from __future__ import annotations

import json
import re
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import yaml

from docsite import terminal

COLUMNS, ROWS = 120, 32
# A search worth looking at: TPE over the learning rate and the two built-in CNNs, ASHA pruning.
SEARCH = {"mode": "parallel", "sampler": "tpe", "trials": 8, "pruner": "asha", "min_epochs": 1,
          "reduction_factor": 2, "learning_rate": {"log_uniform": [1.0e-4, 1.0e-1]}}
EPOCHS = 6
# The live table while the search trains: a host's row running, and the search's own row (its text
# wraps in the detail column) with its ETA.
TRAINING = re.compile(r"│ running .*│ all\s+│ search .*ETA", re.DOTALL)


def pictures(inventory: Path, out: Path) -> list[Path]:
    with tempfile.TemporaryDirectory(prefix="tfc-pictures-") as tmp:
        work = Path(tmp)
        with mlflow_server(work) as tracker:
            mine = searching_inventory(inventory, work, tracker)
            try:
                made = live_view(mine, work, out)
                run = newest_run(work / "runs")
                made += [report_telemetry(run, out), hparams(run, work, out), mlflow_compare(run, mine, tracker, out)]
            finally:
                tfcompose("down", "-i", str(mine), check=False)
    return made


def searching_inventory(inventory: Path, work: Path, tracker: str) -> Path:
    """The lab's inventory with a search worth a picture, tracking to the loopback server."""
    doc = yaml.safe_load(inventory.read_text())
    doc["train"]["epochs"] = EPOCHS
    doc["train"]["search"] = dict(SEARCH)
    doc["tracking"] = {"mlflow": {"uri": tracker, "experiment": "digits"}}
    doc["telemetry"] = {"enabled": True}
    mine = work / "inventory.yaml"
    mine.write_text(yaml.safe_dump(doc, sort_keys=False))
    return mine


def live_view(inventory: Path, work: Path, out: Path) -> list[Path]:
    """`tfcompose up --wait` on a terminal: the screen once the search is well under way, and the last one."""
    command = [sys.executable, "-m", "launcher", "up", "-i", str(inventory), "--wait",
               "--runs", str(work / "runs")]
    shown = terminal.run(command, COLUMNS, ROWS, keep=lambda text: bool(TRAINING.search(text)))
    if shown.exit_code != 0 or len(shown.frames) < 3:
        raise SystemExit(f"tfcompose up exited {shown.exit_code}; its last screen:\n"
                         + "\n".join(line.plain for line in shown.frames[-1][1]))
    training = shown.frames[:-1]
    middle = min(training, key=lambda frame: abs(frame[0] - (training[0][0] + training[-1][0]) / 2))
    return [_write(out / "live.svg", terminal.svg(last_table(middle[1]), COLUMNS, "tfcompose up --wait")),
            _write(out / "up-finished.svg", terminal.svg(shown.frames[-1][1], COLUMNS, "tfcompose up --wait"))]


def last_table(lines: list) -> list:
    """The screen from the live table's top on (the lines above it are earlier output)."""
    tops = [i for i, line in enumerate(lines) if line.plain.startswith("┏")]
    return lines[tops[-1]:] if tops else lines


def report_telemetry(run: Path, out: Path) -> Path:
    tfcompose("report", str(run))
    return Path(shutil.copy(run / "telemetry.png", out / "telemetry.png"))


def hparams(run: Path, work: Path, out: Path) -> Path:
    """TensorBoard's HParams table of the collected run, as `tfcompose tensorboard RUN` serves it."""
    port = _free_port()
    server = subprocess.Popen([sys.executable, "-m", "launcher", "tensorboard", str(run),
                               "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
    try:
        _wait_for(f"http://127.0.0.1:{port}/data/plugins_listing")
        return screenshot(f"http://127.0.0.1:{port}/#hparams", out / "hparams.png", work)
    finally:
        _stop(server)


def mlflow_compare(run: Path, inventory: Path, tracker: str, out: Path) -> Path:
    """MLflow's comparison of the search's trials (the child runs `up` logged), parallel coordinates first."""
    from mlflow import MlflowClient
    client = MlflowClient(tracker)
    experiment = client.get_experiment_by_name("digits")
    trials = [r.info.run_id for r in client.search_runs([experiment.experiment_id])
              if r.data.tags.get("mlflow.parentRunId")]
    query = urllib.parse.urlencode({"runs": json.dumps(trials), "experiments": json.dumps([experiment.experiment_id])})
    return screenshot(f"{tracker}/#/compare-runs?{query}", out / "mlflow-compare.png", run.parent, 1600, 1250)


def screenshot(url: str, path: Path, work: Path, width: int = 1400, height: int = 900) -> Path:
    """A headless Chromium's picture of the page once its scripts had 20 s (virtual time) to draw it."""
    subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    f"--user-data-dir={work / 'chromium'}", f"--window-size={width},{height}", "--virtual-time-budget=20000",
                    f"--screenshot={path}", url], check=True, capture_output=True, timeout=180)
    return path


@contextmanager
def mlflow_server(work: Path):
    port = _free_port()
    server = subprocess.Popen([sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port),
                               "--workers", "1", "--backend-store-uri", f"sqlite:///{work / 'mlflow.db'}",
                               "--artifacts-destination", str(work / "artifacts")],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        _wait_for(f"http://127.0.0.1:{port}/health")
        yield f"http://127.0.0.1:{port}"
    finally:
        _stop(server)


def tfcompose(*args: str, check: bool = True) -> None:
    subprocess.run([sys.executable, "-m", "launcher", *args], check=check,
                   capture_output=True, timeout=900)


def newest_run(runs: Path) -> Path:
    return max((p for p in runs.glob("*/*") if (p / "results.json").exists()), key=lambda p: p.stat().st_mtime)


def _wait_for(url: str, within_s: float = 120) -> None:
    deadline = time.monotonic() + within_s
    while True:
        try:
            urllib.request.urlopen(url, timeout=5).read()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)


def _stop(server: subprocess.Popen) -> None:
    """The server and every process it started (its own session): Ctrl-C first, as a user stops it."""
    for sig in (signal.SIGINT, signal.SIGKILL):
        try:
            os.killpg(server.pid, sig)
            server.wait(timeout=20)
            return
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            continue


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path
