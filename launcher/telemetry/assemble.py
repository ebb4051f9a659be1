"""At `collect`: the run folder's telemetry spools merged into telemetry/<host>.csv (spools.py,
csvfile.py), and each trial's figures from those CSVs (figures.py) added to its record before
results.json is written, once, checked by its owner (trainer/spec/results.py)."""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Optional

from launcher import runfiles
from launcher.telemetry import csvfile, figures, spools
from trainer.spec import results, results_check

FIGURES = ("gpu_hours", "gpu_utilization", "energy_wh", "cpu_hours", "telemetry_coverage")


def assemble(run_dir: Path, hosts: list[str], doc: Optional[dict] = None) -> list[str]:
    """Merge, then write results.json once with each trial's figures: `doc` (a parallel run's, the
    chief's, not yet in the folder), else the folder's own (a sync run's, as its chief wrote it:
    written again only when telemetry adds figures). What went wrong, as warnings (never an error:
    the results stand without telemetry)."""
    problems = []
    for host in sorted(set(hosts) | set(spools.spool_hosts(run_dir))):
        try:
            spools.merge(run_dir, host)
        except OSError as exc:
            problems.append(f"telemetry of {host} not merged into {csvfile.csv_path(run_dir, host)}: {exc}")
    figured = None
    try:
        figured = with_trial_figures(run_dir, doc)
    except results.ResultsError as exc:
        problems.append(f"no telemetry figures per trial: {exc}")
    except OSError as exc:
        problems.append(f"no telemetry figures per trial: cannot use {exc.filename or run_dir}: {exc.strerror or exc}")
    if figured is not None or doc is not None:
        runfiles.write_results(run_dir, figured or doc)        # checked again by its owner, written whole
    return problems


def with_trial_figures(run_dir: Path, doc: Optional[dict] = None) -> Optional[dict]:
    """`doc` (else the folder's results.json) with each trial's figures (those of an earlier assembly
    replaced and checked by the format's owner); None when there is no telemetry or no results."""
    run_dir = Path(run_dir)
    hosts = csvfile.hosts_with_csv(run_dir)
    if not hosts or (doc is None and not runfiles.is_file(run_dir, runfiles.RESULTS)):
        return None
    doc = copy.deepcopy(doc) if doc is not None else runfiles.load_results(run_dir)
    series = {host: csvfile.read_csv(csvfile.csv_path(run_dir, host)) for host in hosts}
    made = figures.per_trial(doc["candidates"], doc.get("mode") == "parallel", series)
    for record, figures_of in zip(doc["candidates"], made):
        for key in FIGURES:
            record.pop(key, None)
        record.update(figures_of)
    results_check.check(doc, str(run_dir / runfiles.RESULTS))    # a figure out of range: the doc without them
    return doc
