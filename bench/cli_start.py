"""B16 the CLI's start: `tfcompose --help` and `tfcompose validate` of a valid inventory, as the
console script runs them, each beside the interpreter's own start (`python -c pass`) and the same
commands of a baseline commit, all in one run, in rotating order, so the ratios hold on a busy
machine whose absolute times do not.

    python bench/cli_start.py [REPEATS] [--baseline COMMIT]     (15 by default; baseline 102dd74)

The baseline's tree comes from `git archive` into a scratch folder; each variant runs with its own
tree first on PYTHONPATH. Writes docs/cli_start.json and the B16 section of docs/benchmarks.md.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import DOC, REPO, machine, summary, write_section

RAW = DOC.parent / "cli_start.json"
CLI = [sys.executable, "-c", "import sys; from launcher.cli import run; sys.exit(run())"]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="cli_start.py", description=__doc__.splitlines()[0])
    parser.add_argument("repeats", nargs="?", type=int, default=15)
    parser.add_argument("--baseline", default="102dd74")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="tfc-bench-cli-") as tmp:
        scratch = Path(tmp)
        trees = {"now": REPO, f"baseline {args.baseline}": baseline_tree(args.baseline, scratch / "baseline")}
        inventory = valid_inventory(scratch)
        runs = {"python -c pass": ([sys.executable, "-c", "pass"], None)}
        for label, tree in trees.items():
            runs[f"--help ({label})"] = ([*CLI, "--help"], tree)
            runs[f"validate ({label})"] = ([*CLI, "validate", "-i", str(inventory)], tree)
        times = measure(runs, args.repeats)
    doc = {"machine": machine(), "load": os.getloadavg()[0], "repeats": args.repeats, "baseline": args.baseline,
           "seconds": times}
    RAW.write_text(json.dumps(doc, indent=1) + "\n")
    write_section("cli_start", render(doc))
    print(render(doc))
    return 0


def baseline_tree(commit: str, into: Path) -> Path:
    into.mkdir()
    archive = subprocess.run(["git", "-C", str(REPO), "archive", commit, "launcher", "trainer"], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def valid_inventory(scratch: Path) -> Path:
    """inventory.example.yaml with a key that exists, so validate goes the whole way and says valid."""
    key = scratch / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    text = (REPO / "inventory.example.yaml").read_text().replace("~/.ssh/id_ed25519", str(key))
    path = scratch / "inventory.yaml"
    path.write_text(text)
    return path


def measure(runs: dict, repeats: int) -> dict[str, list[float]]:
    """Each command `repeats` times, the order rotated each round (no variant always first)."""
    times: dict[str, list[float]] = {label: [] for label in runs}
    labels = list(runs)
    for round_ in range(repeats):
        for label in labels[round_ % len(labels):] + labels[:round_ % len(labels)]:
            command, tree = runs[label]
            env = {**os.environ, **({"PYTHONPATH": str(tree)} if tree else {})}
            started = time.perf_counter()
            done = subprocess.run(command, cwd=tree or REPO, env=env, capture_output=True)
            times[label].append(time.perf_counter() - started)
            if done.returncode != 0:
                raise SystemExit(f"{label}: exit {done.returncode}: {done.stderr.decode()[-500:]}")
        print(f"round {round_ + 1}/{repeats}", file=sys.stderr)
    return times


def render(doc: dict) -> str:
    base = summary(doc["seconds"]["python -c pass"])[0]
    rows = []
    for label, values in doc["seconds"].items():
        median, spread = summary(values)
        rows.append(f"| {label} | {median:.3f} | {spread:.3f} | {median - base:.3f} |")
    return "\n".join([
        "## B16 The CLI's start: `--help` and `validate`",
        "",
        f"`python bench/cli_start.py {doc['repeats']} --baseline {doc['baseline']}`: each command "
        f"{doc['repeats']} times in rotating order, wall time of the whole process (as the console script runs "
        f"it). {doc['machine']}; load average {doc['load']:.1f} at the end (the machine was shared: compare "
        "the rows with each other, not with another machine).",
        "",
        "| command | median s | spread s (max − min) | beyond the interpreter's start, s |",
        "|---|---|---|---|",
        *rows,
    ])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
