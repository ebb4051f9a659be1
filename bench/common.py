"""Shared by the benchmarks: machine facts, statistics, and rewriting one section of docs/benchmarks.md."""
from __future__ import annotations

import datetime as dt
import os
import platform
import re
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "benchmarks.md"
sys.path.insert(0, str(REPO / "tests"))  # the sshd test hosts are reused as benchmark hosts
IMAGE = "tfcompose-trainer:bench"


def build_image() -> str:
    """Build the bench image from $BASE_IMAGE (`make image`); return the base image's name."""
    base = os.environ.get("BASE_IMAGE", "tensorflow/tensorflow:latest")
    subprocess.run(["make", "image", f"BASE_IMAGE={base}", f"IMAGE={IMAGE}"], cwd=REPO, check=True, capture_output=True)
    return base


def machine() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    docker = subprocess.run(["docker", "version", "-f", "{{.Server.Version}}"], capture_output=True, text=True).stdout.strip()
    docker = f"Docker {docker}" if docker else "Docker engine not running"
    return (f"{os.cpu_count()} cores ({cpu}), {os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') // 2**30} GiB, "
            f"no GPU, {docker}, {dt.date.today().isoformat()}")


def busy_cpu_seconds() -> float:
    """CPU seconds this whole machine has spent not idle (every process: sshd, docker, dockerd, the
    kernel's networking, us): what benchmark "hosts" sharing this machine's cores cost together."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def summary(values: list[float]) -> tuple[float, float]:
    """Median and spread (max − min)."""
    return statistics.median(values), max(values) - min(values)


def write_section(name: str, markdown: str) -> None:
    """Replace (or append) the section between <!-- bench:name --> markers."""
    DOC.parent.mkdir(exist_ok=True)
    text = DOC.read_text() if DOC.exists() else "# Benchmarks\n\nWritten by `make bench` (bench/*.py). Not tests: nothing here is asserted.\n"
    block = f"<!-- bench:{name} -->\n{markdown.strip()}\n<!-- /bench:{name} -->"
    pattern = re.compile(rf"<!-- bench:{re.escape(name)} -->.*?<!-- /bench:{re.escape(name)} -->", re.S)
    text = pattern.sub(lambda _: block, text) if pattern.search(text) else text.rstrip() + "\n\n" + block + "\n"
    DOC.write_text(text)
