"""The documentation's pictures, each made from a real run so that it can be made again:

    python -m docsite.pictures report      # the report's pictures, from a real search's run folder
                                           # (tests/data/runs/tpe-asha: TPE and ASHA on the digits)

Written into docs/pictures/. The other pictures (the live view, MLflow's comparison, TensorBoard's
HParams, telemetry) need a running cluster and a browser: docs/pictures.md says how each is made.
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
        subprocess.run([sys.executable, "-c", "from launcher.cli import run; run()", "report", str(run)],
                       cwd=REPO, check=True, capture_output=True)
        OUT.mkdir(exist_ok=True)
        return [Path(shutil.copy(run / name, OUT / name)) for name in REPORT]


if __name__ == "__main__":
    made = {"report": report}[sys.argv[1] if len(sys.argv) > 1 else "report"]()
    print("\n".join(str(p) for p in made))
