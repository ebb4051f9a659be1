"""The documentation's pictures, each made from a real run so that it can be made again:

    python -m docsite.pictures report      # the report's pictures, from a real search's run folder
                                           # (tests/data/runs/tpe-asha: TPE and ASHA on the digits)
    python -m docsite.pictures lab INVENTORY
        # a real search on real hosts (a LAN lab: sudo .venv/bin/python bench/lanlab.py up 2), run as a
        # user runs it: `tfcompose up --wait` on a terminal (the live view, caught by a terminal
        # emulator), telemetry's picture from its report, TensorBoard's HParams and MLflow's comparison
        # of its trials in a headless Chromium. Needs the docs extra (pyte), mlflow and chromium.

Written into docs/pictures/.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "docs" / "pictures"
RUN = REPO / "tests" / "data" / "runs" / "tpe-asha"
REPORT = ("leaderboard.png", "curves.png", "confusion_matrix.png", "search.png", "parameters.png")


def report() -> list[Path]:
    """`tfcompose report` on a copy of a real run folder; its pictures into docs/pictures/."""
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        shutil.copytree(RUN, run)
        subprocess.run([sys.executable, "-m", "launcher", "report", str(run)],
                       cwd=REPO, check=True, capture_output=True)
        OUT.mkdir(exist_ok=True)
        return [Path(shutil.copy(run / name, OUT / name)) for name in REPORT]


def lab(inventory: str) -> list[Path]:
    from docsite import labrun
    OUT.mkdir(exist_ok=True)
    return labrun.pictures(Path(inventory), OUT)


if __name__ == "__main__":
    what, *args = sys.argv[1:] or ["report"]
    made = {"report": report, "lab": lab}[what](*args)
    print("\n".join(str(p) for p in made))
