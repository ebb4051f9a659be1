"""B13b The report's warnings: what replaying a long run's telemetry costs.

    python bench/replay.py [REPEATS] [HOURS]

`report.md` judges a run's whole telemetry again (launcher/telemetry/rules.replay), as often as
the live view judged it (every second), so that a warning given for a few seconds only is the
report's too. This measures that replay over made-up samples: 4 hosts, one sample a second each,
2 GPUs each, HOURS hours (default 8), every host training and busy (every rule judged, none fires),
judged every 1 s and, for comparison, every 5 s (the pace before). Pure Python, no host: the time is
the CPU of one core.
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import machine, summary, write_section  # noqa: E402
from launcher.telemetry import rules  # noqa: E402
from launcher.telemetry.samples import Gpu, Sample  # noqa: E402

HOSTS = 4


def series(host: int, seconds: int):
    for i in range(seconds):
        yield Sample(time=1e9 + i + host * 0.25, cpu=1.0, cpu_limit=2.0, cpu_queued=0.1, swap=0.0,
                     gpus=(Gpu(0, util=50.0), Gpu(1, util=50.0)), training=True)


def replay_seconds(step_s: float, seconds: int) -> float:
    started = time.process_time()
    rules.replay({f"h{h}": series(h, seconds) for h in range(HOSTS)}, sync=True, step_s=step_s)
    return time.process_time() - started


def main() -> None:
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    hours = float(sys.argv[2]) if len(sys.argv) > 2 else 8.0
    seconds = int(hours * 3600)
    rows = []
    for step_s in (rules.LOOK_S, 5.0):
        runs = [replay_seconds(step_s, seconds) for _ in range(repeats)]
        median, spread = summary(runs)
        rows.append(f"| every {step_s:g} s | {median:.1f} | {spread:.1f} | {', '.join(f'{r:.1f}' for r in runs)} |")
        print(rows[-1], flush=True)
    write_section("replay", f"""
## B13b The report's warnings: replaying a long run's telemetry

{machine()}; `python bench/replay.py {repeats} {hours:g}` ({repeats} repetitions, load
{os.getloadavg()[0]:.1f} at the end). {HOSTS} hosts, one sample a second each (2 GPUs), {hours:g} hours of
training, every rule judged and none firing: the CPU seconds `report.md`'s replay takes
(`rules.replay`, one core). The report judges every second, as the live view does (a warning `watch`
gave for two seconds before it was stopped is the report's too); every 5 s is the pace before, for
comparison.

| judged | CPU s, median | spread | runs |
|---|---:|---:|---|
{chr(10).join(rows)}
""")


if __name__ == "__main__":
    main()
