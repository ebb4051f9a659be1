"""telemetry/<host>.csv: its one owner (writer and readers); the spools it is made from, and the
merge that makes it, are spools.py's.

Columns: time (the host's clock, UTC unix seconds), training (0/1), trial, epoch, cpu_cores,
cpu_limit_cores, cpu_queued_cores (its threads runnable but waiting for a CPU, on average), mem_mib,
mem_limit_mib, net_in_mbit_s, net_out_mbit_s, swap_mb_s, then for each
GPU i: gpu<i>_util_pct, gpu<i>_mem_mib, gpu<i>_mem_total_mib, gpu<i>_power_w, gpu<i>_temp_c.
An empty cell: not measured. A host without GPUs (or nvidia-smi) has no GPU columns.

Reading checks every cell (a number in its range, or empty); a row that fails is skipped, and a
file is read up to MAX_ROWS rows of at most MAX_ROW bytes: a CSV is data to check, wherever it
came from. Every file and folder beneath the run folder is opened as launcher/runfiles.py opens
them: no link followed (telemetry/ or .spool/ included), no FIFO or device read.
"""
from __future__ import annotations

import contextlib
import csv
import io
import json
import re
from pathlib import Path
from typing import IO, Iterable, Iterator, Optional

from launcher import runfiles
from launcher.telemetry.samples import MAX_GPUS, Gpu, Sample, finite

FOLDER = "telemetry"
MAX_ROWS = 20_000_000           # a month at one sample a second, with room
MAX_ROW = 16 << 10              # bytes: 64 GPUs of 5 columns fit in 3 KB
HOST_COLUMNS = ["time", "training", "trial", "epoch", "cpu_cores", "cpu_limit_cores", "cpu_queued_cores", "mem_mib",
                "mem_limit_mib", "net_in_mbit_s", "net_out_mbit_s", "swap_mb_s"]
GPU_FIELDS = [("util_pct", "util", 0.0, 100.0), ("mem_mib", "mem", 0.0, 1e7), ("mem_total_mib", "mem_total", 0.0, 1e7),
              ("power_w", "power", 0.0, 1e5), ("temp_c", "temp", -100.0, 200.0)]
RANGES = {"time": (0.0, 1e11), "cpu_cores": (0.0, 1e5), "cpu_limit_cores": (0.0, 1e5), "cpu_queued_cores": (0.0, 1e6),
          "mem_mib": (0.0, 1e9),
          "mem_limit_mib": (0.0, 1e9), "net_in_mbit_s": (0.0, 1e7), "net_out_mbit_s": (0.0, 1e7), "swap_mb_s": (0.0, 1e7)}
GPU_COLUMN = re.compile(r"^gpu([0-9]{1,4})_([a-z_]+)$")
HOST_NAME = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,38}[a-z0-9])?$")     # the inventory's names
PLACES = 3


def csv_path(run_dir: Path, host: str) -> Path:
    return Path(run_dir) / FOLDER / f"{host}.csv"


def _place(path: Path) -> tuple[Path, Path]:
    """(the run folder, the path beneath it) of a telemetry file: from `telemetry/` on, nothing is
    followed; the run folder itself is the user's (a file elsewhere: its own folder)."""
    parts = Path(path).parts
    if FOLDER not in parts[:-1]:
        return Path(path).parent, Path(Path(path).name)
    i = len(parts) - 2 - parts[-2::-1].index(FOLDER)
    return Path(*parts[:i]), Path(*parts[i:])


def listing(run_dir: Path, rel: Path) -> list[tuple[str, str]]:
    try:
        return runfiles.listing(Path(run_dir), rel)
    except OSError:                 # a link or a file in place of the folder: no telemetry to read
        return []


def hosts_with_csv(run_dir: Path) -> list[str]:
    """The hosts that have a telemetry CSV in the run folder (regular files with a host's name)."""
    return sorted(name[:-4] for name, kind in listing(run_dir, Path(FOLDER))
                  if name.endswith(".csv") and HOST_NAME.match(name[:-4]) and kind == "a regular file")


# --- rows ---------------------------------------------------------------------------------------
def _cell(value: Optional[float]) -> str:
    return "" if value is None else f"{value:.{PLACES}f}".rstrip("0").rstrip(".")


def row(sample: Sample, gpu_ids: list[int]) -> list[str]:
    values = [sample.time, None, None, None, sample.cpu, sample.cpu_limit, sample.cpu_queued, sample.mem, sample.mem_limit,
              sample.net_in, sample.net_out, sample.swap]
    cells = [_cell(v) for v in values]
    cells[1:4] = [str(int(sample.training)), str(sample.trial), str(sample.epoch)]
    by_index = {g.index: g for g in sample.gpus}
    for index in gpu_ids:
        gpu = by_index.get(index)
        cells += [_cell(getattr(gpu, attr) if gpu else None) for _, attr, _, _ in GPU_FIELDS]
    return cells


def header(gpu_ids: list[int]) -> list[str]:
    return HOST_COLUMNS + [f"gpu{i}_{name}" for i in gpu_ids for name, *_ in GPU_FIELDS]


def _number(text: str, low: float, high: float) -> Optional[float]:
    if text == "":
        return None
    value = float(text)
    if not (finite(value) and low <= value <= high):
        raise ValueError(text)
    return value


def _whole(text: str, high: int) -> int:
    if not text.isdigit() or int(text) > high:
        raise ValueError(text)
    return int(text)


def parse_row(cells: dict) -> Sample:
    """One CSV row (a DictReader's) as a Sample; ValueError when a cell is not what the writer writes."""
    values = {name: _number(cells.get(name) or "", *RANGES[name]) for name in RANGES}
    if values["time"] is None or cells.get("training") not in ("0", "1"):
        raise ValueError("no time")
    gpus = []
    for index in _gpu_ids(cells):
        reading = {attr: _number(cells.get(f"gpu{index}_{name}") or "", low, high) for name, attr, low, high in GPU_FIELDS}
        if any(v is not None for v in reading.values()):
            gpus.append(Gpu(index, **reading))
    return Sample(time=values["time"], cpu=values["cpu_cores"], cpu_limit=values["cpu_limit_cores"],
                  cpu_queued=values["cpu_queued_cores"], mem=values["mem_mib"], mem_limit=values["mem_limit_mib"], net_in=values["net_in_mbit_s"],
                  net_out=values["net_out_mbit_s"], swap=values["swap_mb_s"], gpus=tuple(gpus),
                  training=cells["training"] == "1", trial=_whole(cells.get("trial") or "0", 1_000_000),
                  epoch=_whole(cells.get("epoch") or "0", 1_000_000))


def _gpu_ids(cells: dict) -> list[int]:
    ids = sorted({int(m.group(1)) for key in cells if key and (m := GPU_COLUMN.match(key))})
    return ids[:MAX_GPUS]


def read_csv(path: Path) -> Iterator[Sample]:
    """The samples of a telemetry CSV, in file order; rows that are not the writer's skipped."""
    with open_regular(path) as fh:
        if fh is None:
            return
        reader = csv.DictReader(bounded_lines(fh))
        for count, cells in enumerate(reader):
            if count >= MAX_ROWS:
                return
            try:
                yield parse_row(cells)
            except (ValueError, TypeError, KeyError):
                continue


def gpu_columns(path: Path) -> list[int]:
    """The GPU ids a CSV has columns for."""
    with open_regular(path) as fh:
        first = next(bounded_lines(fh), "") if fh is not None else ""
    return _gpu_ids({name: "" for name in first.strip().split(",")})


def bounded_lines(fh: IO[str]) -> Iterator[str]:
    """The file's lines, a line longer than MAX_ROW cut there (it then fails its checks)."""
    while True:
        line = fh.readline(MAX_ROW)
        if not line:
            return
        if not line.endswith("\n") and len(line) >= MAX_ROW:
            while (rest := fh.readline(MAX_ROW)) and not rest.endswith("\n"):
                pass
            line = "\n"
        yield line


@contextlib.contextmanager
def open_regular(path: Path):
    """A regular file as text (never through a link, never a FIFO that would block), or None."""
    root, rel = _place(path)
    try:
        opened = runfiles.open_read(root, rel)
        raw = opened.__enter__()
    except OSError:
        yield None
        return
    try:
        with io.TextIOWrapper(raw, encoding="utf-8", errors="replace", newline="") as fh:
            yield fh
    finally:
        opened.__exit__(None, None, None)


def is_regular(path: Path) -> bool:
    try:
        return runfiles.is_file(*_place(path))
    except OSError:
        return False


# --- the rules' span, kept beside the samples (the report judges them as the live view did) ------------
RULES = "rules.json"


def write_rules(run_dir: Path, span_s: float) -> None:
    Path(run_dir).mkdir(parents=True, exist_ok=True)        # the run folder (its own place: made, followed)
    runfiles.write_bytes(Path(run_dir), f"{FOLDER}/{RULES}", (json.dumps({"warn_after_s": span_s}) + "\n").encode())


def read_rules(run_dir: Path) -> Optional[float]:
    """The span the run's warnings were judged over, or None (none written, or not one of ours)."""
    with open_regular(Path(run_dir) / FOLDER / RULES) as fh:
        if fh is None:
            return None
        try:
            value = json.loads(fh.read(4096)).get("warn_after_s")
        except (ValueError, AttributeError, RecursionError):
            return None
    real = isinstance(value, (int, float)) and not isinstance(value, bool)
    return float(value) if real and 10 <= value <= 600 else None


# --- the CSV, made from what there is -------------------------------------------------------------
def write_csv(path: Path, samples: Iterable[Sample], gpu_ids: list[int]) -> int:
    """The samples as telemetry CSV, written whole or not at all; how many rows."""
    count = 0
    root, rel = _place(path)
    root.mkdir(parents=True, exist_ok=True)
    with runfiles.writer(root, rel) as raw:
        text = io.TextIOWrapper(raw, encoding="utf-8", newline="")
        writer = csv.writer(text, lineterminator="\n")
        writer.writerow(header(gpu_ids))
        for sample in samples:
            writer.writerow(row(sample, gpu_ids))
            count += 1
        text.flush()
        text.detach()
    return count
