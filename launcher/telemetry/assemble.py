"""At `collect` (and when a session ends): the run folder's telemetry spools merged into
telemetry/<host>.csv (spools.py, csvfile.py), and each trial's figures from those CSVs (figures.py) added to
its record in results.json, whose owner (trainer/spec/results.py) checks the document before it is
written back whole."""
from __future__ import annotations

from pathlib import Path

from launcher import runfiles
from launcher.telemetry import csvfile, figures, spools
from trainer.spec import results

FIGURES = ("gpu_hours", "gpu_utilization", "energy_wh", "cpu_hours", "telemetry_coverage")


def assemble(run_dir: Path, hosts: list[str]) -> list[str]:
    """Merge, then add the per-trial figures; what went wrong, as warnings (never an error: the
    results stand without telemetry)."""
    problems = []
    for host in sorted(set(hosts) | set(spools.spool_hosts(run_dir))):
        try:
            spools.merge(run_dir, host)
        except OSError as exc:
            problems.append(f"telemetry of {host} not merged into {csvfile.csv_path(run_dir, host)}: {exc}")
    try:
        add_trial_figures(run_dir)
    except results.ResultsError as exc:
        problems.append(f"no telemetry figures per trial: {exc}")
    except OSError as exc:
        problems.append(f"no telemetry figures per trial: cannot use {exc.filename or run_dir}: {exc.strerror or exc}")
    return problems


def add_trial_figures(run_dir: Path) -> bool:
    """Each trial's figures into results.json (those of an earlier assembly replaced); False when
    there is no results.json or no telemetry."""
    run_dir = Path(run_dir)
    hosts = csvfile.hosts_with_csv(run_dir)
    if not hosts or not runfiles.is_file(run_dir, runfiles.RESULTS):
        return False
    doc = runfiles.load_results(run_dir)
    series = {host: csvfile.read_csv(csvfile.csv_path(run_dir, host)) for host in hosts}
    made = figures.per_trial(doc["candidates"], doc.get("mode") == "parallel", series)
    for record, figures_of in zip(doc["candidates"], made):
        for key in FIGURES:
            record.pop(key, None)
        record.update(figures_of)
    runfiles.write_results(run_dir, doc)        # checked again by its owner, written whole
    return True
