"""What a session appends while it samples, and the CSV made from it (was in csvfile.py).

While `up --wait` or `watch` runs, each host's samples are appended to a spool in the run folder
(`telemetry/.spool/<host>.<session>.jsonl`, one JSON object per line, flushed every few seconds,
locked while its session writes it). When the session ends, and again at `collect` (which finds
what a killed launcher left), `merge` turns every spool no session holds, with the CSV already
there, into `telemetry/<host>.csv` (csvfile.py): time-ordered, one row per sample, written under
a temporary name and renamed, and only then are the spools removed. Everything is streamed:
neither the spools nor the CSV are ever whole in memory.
"""
from __future__ import annotations

import contextlib
import fcntl
import heapq
import json
from pathlib import Path
from typing import Iterable, Iterator, Optional

from launcher import runfiles
from launcher.telemetry.csvfile import (FOLDER, GPU_FIELDS, HOST_NAME, MAX_ROWS, bounded_lines, csv_path, gpu_columns,
                                        is_regular, listing, open_regular, parse_row, read_csv, write_csv)
from launcher.telemetry.samples import MAX_GPUS, Sample, finite

SPOOLS = ".spool"


def spool_record(sample: Sample) -> str:
    doc = {"t": sample.time, "c": sample.cpu, "cl": sample.cpu_limit, "q": sample.cpu_queued, "m": sample.mem,
           "ml": sample.mem_limit,
           "ni": sample.net_in, "no": sample.net_out, "s": sample.swap, "tr": int(sample.training), "ti": sample.trial,
           "e": sample.epoch, "g": [[g.index, g.util, g.mem, g.mem_total, g.power, g.temp] for g in sample.gpus]}
    return json.dumps(doc, separators=(",", ":"))


def parse_spool_line(line: str) -> Sample:
    doc = json.loads(line)
    if not isinstance(doc, dict) or not isinstance(doc.get("g"), list) or len(doc["g"]) > MAX_GPUS:
        raise ValueError("not a spool line")
    cells = {"time": doc.get("t"), "cpu_cores": doc.get("c"), "cpu_limit_cores": doc.get("cl"),
             "cpu_queued_cores": doc.get("q"), "mem_mib": doc.get("m"),
             "mem_limit_mib": doc.get("ml"), "net_in_mbit_s": doc.get("ni"), "net_out_mbit_s": doc.get("no"),
             "swap_mb_s": doc.get("s"), "training": str(doc.get("tr")), "trial": str(doc.get("ti")),
             "epoch": str(doc.get("e"))}
    for entry in doc["g"]:
        if not (isinstance(entry, list) and len(entry) == 6 and isinstance(entry[0], int) and 0 <= entry[0] <= 1023):
            raise ValueError("not a GPU entry")
        for (name, *_), value in zip(GPU_FIELDS, entry[1:]):
            cells[f"gpu{entry[0]}_{name}"] = value
    return parse_row({k: "" if v is None else (v if isinstance(v, str) else _json_number(v)) for k, v in cells.items()})


def _json_number(value) -> str:
    if not finite(value):
        raise ValueError(repr(value))
    return repr(float(value))


class Spool:
    """One session's samples of one host, appended as they come; locked while it is written."""

    FLUSH_EVERY = 32

    def __init__(self, run_dir: Path, host: str, session: str):
        rel = Path(FOLDER) / SPOOLS / f"{host}.{session}.jsonl"
        self.path = Path(run_dir) / rel
        Path(run_dir).mkdir(parents=True, exist_ok=True)        # the run folder (its own place: made, followed)
        self._opened = runfiles.appender(Path(run_dir), rel)        # no link followed, no FIFO appended to
        self._fh = self._opened.__enter__()
        fcntl.flock(self._fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        self._unflushed = 0

    def add(self, sample: Sample) -> None:
        self._fh.write(spool_record(sample) + "\n")
        self._unflushed += 1
        if self._unflushed >= self.FLUSH_EVERY:
            self.flush()

    def flush(self) -> None:
        self._fh.flush()
        self._unflushed = 0

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._opened.__exit__(None, None, None)        # the lock goes with the file


def read_spool(path: Path) -> Iterator[Sample]:
    with open_regular(path) as fh:
        if fh is None:
            return
        for count, line in enumerate(bounded_lines(fh)):
            if count >= MAX_ROWS:
                return
            try:
                yield parse_spool_line(line)
            except (ValueError, TypeError, KeyError, RecursionError):
                continue


def free_spools(run_dir: Path, host: str) -> list[Path]:
    """The host's spools no session is writing (the ones a session holds are locked)."""
    rel = Path(FOLDER) / SPOOLS
    found = []
    for name, kind in listing(run_dir, rel):
        if kind != "a regular file" or not (name.startswith(f"{host}.") and name.endswith(".jsonl")):
            continue
        try:
            with runfiles.appender(Path(run_dir), rel / name) as probe:
                fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
            found.append(Path(run_dir) / rel / name)
        except OSError:
            continue
    return found


def spool_hosts(run_dir: Path) -> list[str]:
    return sorted({name.split(".", 1)[0] for name, _ in listing(run_dir, Path(FOLDER) / SPOOLS)
                   if name.endswith(".jsonl") and HOST_NAME.match(name.split(".", 1)[0])})


def _deduplicated(samples: Iterable[Sample]) -> Iterator[Sample]:
    last = None
    for sample in samples:
        if last is None or sample.time > last:
            last = sample.time
            yield sample


def merge(run_dir: Path, host: str) -> Optional[Path]:
    """The host's free spools and its CSV merged into its CSV (time-ordered, each moment once);
    the spools removed once the CSV is in place. None when there is nothing to merge."""
    spools, path = free_spools(run_dir, host), csv_path(run_dir, host)
    if not spools:
        return path if is_regular(path) else None
    sources = ([lambda: read_csv(path)] if is_regular(path) else []) + [lambda p=p: read_spool(p) for p in spools]
    ids = sorted(set(gpu_columns(path) if is_regular(path) else [])
                 | {g.index for source in sources[1 if is_regular(path) else 0:] for s in source() for g in s.gpus})[:MAX_GPUS]
    merged = heapq.merge(*[_sorted_enough(source()) for source in sources], key=lambda s: s.time)
    write_csv(path, _deduplicated(merged), ids)
    for spool in spools:
        with contextlib.suppress(OSError):
            spool.unlink()
    with contextlib.suppress(OSError):
        spools[0].parent.rmdir()        # only when empty: another session's spool keeps it
    return path


def _sorted_enough(samples: Iterable[Sample]) -> Iterator[Sample]:
    """A source in time order as heapq.merge needs it: a sample older than the one before it (a
    host whose clock was set back) is dropped rather than break the order."""
    last = None
    for sample in samples:
        if last is None or sample.time >= last:
            last = sample.time
            yield sample
