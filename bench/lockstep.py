"""Where the time lockstep adds goes: the TensorFlow profiler's trace of training steps on each of
two MWMS workers (the trainer's `profile_steps`), broken down by thread and by kind of work, for
`small_cnn` at 32 images per replica (the case B1 shows losing the most), next to one worker
alone; then the settings that might move it, measured the same way.

    python bench/lockstep.py [REPEATS]
    python bench/lockstep.py --report
"""
from __future__ import annotations

import json
import sys
import tempfile
from collections import Counter
from pathlib import Path

from common import DOC, machine, summary, write_section  # noqa: E402
from scaling import cpu_flags, mwms, steady_rate, trainer  # noqa: E402

CASE = ("small_cnn", 32, 512, 4)
STEPS = (40, 60)                       # epoch 2-3 of ~26 steps each: traced, warm
RAW = DOC.parent / "lockstep.json"
# The trainer before (tf_keras reading the metrics across workers every step), now (the default,
# step_metrics: local), and larger steps (the gradients do not grow with the batch; per_class 2048
# at 128 per replica gives ~25 steps an epoch, like 512 at 32).
BEFORE, NOW, LARGER = "32, step_metrics: all_workers", "32 per replica", "128 per replica"
SETTINGS = {BEFORE: {"TFC_TRAIN_STEP_METRICS": "all_workers"}, NOW: {},
            LARGER: {"TFC_TRAIN_BATCH_PER_REPLICA": "128", "TFC_TRAIN_DATASET__PER_CLASS": "2048"}}
ROWS = ("step (train_function)", "arithmetic (tf_Compute threads)", "gradient all-reduce",
        "other all-reduces (loss, metrics)", "Python around the step", "input pipeline (background)")


def breakdown(xplane: Path, steps: int) -> dict:
    """ms per step from one worker's trace: the step itself (the Python thread's `train_function`),
    the arithmetic (top-level executor work on the tf_Compute threads), each collective (top-level
    CollectiveReduceV2 events on the collective_ops threads; the largest is the packed gradients),
    the Python outside the compiled step, and the input pipeline's threads (overlapped)."""
    from trainer.train.profile import host_events
    total, collectives = Counter(), Counter()
    for ev in host_events(xplane):
        if ev.thread == "python" and ev.name in ("train_function", "EagerLocalExecute: " + ev.name.split(": ")[-1]):
            total["step" if ev.name == "train_function" else "in_function"] += ev.duration_ps
        if not ev.top_level:
            continue                                  # nested in the previous top-level event
        if ev.thread.startswith("tf_Compute"):
            total["compute"] += ev.duration_ps
        elif ev.thread.startswith("tf_data"):
            total["input"] += ev.duration_ps
        if "CollectiveReduce" in ev.name:
            collectives[ev.name.split(":")[0]] += ev.duration_ps
    ms = lambda ps: round(ps / 1e9 / steps, 2)   # noqa: E731
    ordered = collectives.most_common()
    return {"step (train_function)": ms(total["step"]), "arithmetic (tf_Compute threads)": ms(total["compute"]),
            "gradient all-reduce": ms(ordered[0][1]) if ordered else 0.0,
            "other all-reduces (loss, metrics)": ms(sum(v for _, v in ordered[1:])),
            "Python around the step": ms(total["step"] - total["in_function"]),
            "input pipeline (background)": ms(total["input"]),
            "collectives": {k: ms(v) for k, v in ordered}}


def traced(tmp: Path, workers: int, extra: dict) -> tuple[float, list[dict]]:
    env = {"TFC_TRAIN_PROFILE_STEPS": json.dumps(list(STEPS)), **extra}
    rate = mwms(CASE, tmp, env) if workers == 2 else steady_rate(trainer(0, CASE, tmp / "w0", extra_env=env))
    traces = [next((tmp / f"w{i}" / "profile").rglob("*.xplane.pb")) for i in range(workers)]
    return rate, [breakdown(t, STEPS[1] - STEPS[0]) for t in traces]


def main(repeats: int = 3) -> None:
    raw: dict = {"machine": machine(), "cpu_flags": cpu_flags(), "repeats": repeats, "case": CASE, "steps": STEPS,
                 "runs": {f"{name}/{w}": [] for name in SETTINGS for w in (1, 2)}}
    with tempfile.TemporaryDirectory(prefix="tfc-lockstep-") as tmp:
        for rep in range(repeats):
            for name, extra in SETTINGS.items():
                for workers in (1, 2):
                    rate, parts = traced(Path(tmp) / f"{rep}-{len(raw['runs'])}-{workers}-{name[:5]}", workers, extra)
                    raw["runs"][f"{name}/{workers}"].append({"rate": rate, "workers": parts})
                    print(name, workers, rate, json.dumps(parts[0]), flush=True)
    RAW.write_text(json.dumps(raw, indent=1) + "\n")
    report(raw)


def report(raw: dict) -> None:
    def med(key: str, path) -> float:
        return summary([path(run) for run in raw["runs"][key]])[0]

    def part(name: str, row: str, worker: int = 0, workers: int = 2) -> float:
        return med(f"{name}/{workers}", lambda r: r["workers"][worker][row])
    rates, rows = [], []
    for name in SETTINGS:
        one, two = med(f"{name}/1", lambda r: r["rate"]), med(f"{name}/2", lambda r: r["rate"])
        rates.append(f"| {name} | {one:.0f} | {two:.0f} | {two / one:.2f} |")
        for label, workers, worker in (("alone", 1, 0), ("MWMS worker 0", 2, 0), ("MWMS worker 1", 2, 1)):
            cells = [part(name, row, worker, workers) for row in ROWS]
            rows.append(f"| {name}: {label} | " + " | ".join(f"{c:.1f}" for c in cells) + " |")
    step = {n: part(n, "step (train_function)") for n in SETTINGS}
    alone = {n: part(n, "step (train_function)", workers=1) for n in SETTINGS}
    grad = {n: part(n, "gradient all-reduce") for n in SETTINGS}
    other = {n: part(n, "other all-reduces (loss, metrics)") for n in SETTINGS}
    arith = part(NOW, "arithmetic (tf_Compute threads)") - part(NOW, "arithmetic (tf_Compute threads)", workers=1)
    ops = {n: len(raw["runs"][f"{n}/2"][0]["workers"][0]["collectives"]) for n in SETTINGS}
    write_section("lockstep", f"""
## B1b Where lockstep time goes: `{raw['case'][0]}`, traced

{raw['machine']}; CPU flags: {raw['cpu_flags']}; {raw['repeats']} repetitions, interleaved.
The trainer's `profile_steps: {list(raw['steps'])}` traces those training steps with the TensorFlow
profiler on each worker (each pinned to its own core, as in B1); `bench/lockstep.py` reads the
traces (`*.xplane.pb`, through `trainer/train/profile.py`): per step, the compiled step as the Python
thread sees it, the arithmetic on the executor threads, each all-reduce on the collective threads
(the largest is the packed gradients), the Python around the step, and the input pipeline's
threads (which run ahead, overlapped). Medians, ms per step.

| setting: run | {" | ".join(ROWS)} |
|---|{"---:|" * len(ROWS)}
{chr(10).join(rows)}

Training img/s (1 worker alone, 2 MWMS workers, ratio):

| setting | 1 worker | 2 workers | 2 ÷ 1 |
|---|---:|---:|---:|
{chr(10).join(rates)}

**Where the added time goes.** At 32 per replica a step alone takes {alone[NOW]:.1f} ms.
**{grad[NOW]:.1f} ms of what lockstep adds is the all-reduce of the gradients**: `small_cnn` has
about 1.5 M parameters (almost all in the dense layer after its Flatten), 6 MB of float32 sent
through the ring over gRPC every step, after the backward pass and before the update, so nothing
overlaps it. The arithmetic grows by {arith:.1f} ms (packing the gradients into one tensor and
back). Python around the step and the input pipeline are not where it goes.

**What was ours, and is fixed.** With tf_keras's own `fit` (`{BEFORE}`, the trainer's behaviour
before) a step ran {ops[BEFORE]} all-reduces: besides the gradients, small ones named
`div_no_nan/CollectiveReduceV2` (a mean's total and count) and the sums of the step's outputs:
tf_keras reading its loss and accuracy means across the workers after every step, for per-step
logs nothing here reads. They cost **{other[BEFORE]:.1f} ms** a step on worker 0 (each tiny and
latency-bound; the first one in a step also absorbs the workers' skew). The trainer now reads them
locally inside the step (`step_metrics: local`, the default) and across the workers once at the
end of each epoch and evaluation, where the logged figures come from: {ops[NOW]} all-reduces a step,
{other[NOW]:.1f} ms besides the gradients, and the lockstep step **{step[BEFORE]:.1f} → {step[NOW]:.1f} ms**.
B1 shows the effect on both models. The one small all-reduce left (one int64, read from the
step's graph) is the distributed iterator asking whether every worker still has a batch
(`experimental_enable_get_next_as_optional`, on under MWMS so that uneven shards end together
instead of hanging); the time in it on worker 0 is mostly waiting for worker 1 to reach the step
(the first collective of a step absorbs the workers' skew), so it stays.

**What moves the rest: larger steps.** No TensorFlow setting makes the gradients smaller (packing
is already one tensor; thread pools already follow the CPU affinity; `steps_per_execution` gave no
gain here and made MWMS fail with "a peer was lost" at the end of an epoch). The gradients do not
grow with the batch: at 128 per replica the all-reduce is {grad[LARGER]:.1f} ms in a
{step[LARGER]:.1f} ms step (alone: {alone[LARGER]:.1f} ms). For small models use a larger
`batch_per_replica` or `search.mode: parallel`; for models whose arithmetic dominates
(`deep_cnn`, B1) lockstep costs little.
""")


if __name__ == "__main__":
    if sys.argv[1:] == ["--report"]:
        report(json.loads(RAW.read_text()))
    else:
        main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
