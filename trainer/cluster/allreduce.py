"""`allreduce:` — how a trial's gradients cross the network: their number format on the wire
(`dtype`), how many steps' gradients each worker sums before one all-reduce (`every`), and `auto`,
which picks both from the link preflight measured (`link_mbit_s`, written by `up`).

The decision (`choose`) is pure and takes only values that are the same on every worker: the
settings, the parameter count, the replica count, the steps per epoch, and one step's arithmetic
time, measured on each worker alone and then agreed through a collective (the slowest worker's).
So every worker installs the same step; a decision taken on one worker alone would hang the
collective. The TensorFlow side (the step itself, the measurement) is in allreduce_step.py.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Optional

from trainer.spec.config import LINK_MBIT_S, AllreduceConfig

WIRE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
SHARE = 0.10          # auto: the all-reduce may take this share of a step
MAX_EVERY = 8         # auto never accumulates more steps than this (each update then sees 8 batches)
MIN_UPDATES = 2       # … nor so many that an epoch has fewer updates than this
STEP_MS = (1e-3, 1e9)  # a measured step outside this (1 µs to 11 days) is no measurement


@dataclass(frozen=True)
class Choice:
    dtype: str
    every: int
    auto: bool
    why: str
    link_mbit_s: Optional[float] = None
    step_ms: Optional[float] = None          # one step's arithmetic (the slowest worker's), auto only
    expected_ms: Optional[float] = None      # the expected all-reduce, per step (per window ÷ every)

    @property
    def stock(self) -> bool:
        """float32 every step: tf_keras's own train step, untouched."""
        return (self.dtype, self.every) == ("float32", 1)

    def record(self) -> dict:
        """For results.json (each trial's `allreduce`)."""
        return {k: (round(v, 2) if isinstance(v, float) else v) for k, v in asdict(self).items()}

    def line(self) -> str:
        return f"all-reduce {self.dtype}, every {self.every} step{'s' if self.every > 1 else ''} ({self.why})"


def allreduce_ms(params: int, dtype: str, replicas: int, link_mbit_s: float) -> float:
    """A ring all-reduce: each replica sends (and receives) 2(n−1)/n of the gradients' bytes over its link."""
    return 2 * (replicas - 1) / replicas * params * WIRE_BYTES[dtype] * 8 / (link_mbit_s * 1e3)


def needs_step_time(settings: AllreduceConfig, replicas: int) -> bool:
    """Whether `choose` will use a measured step: auto, a link, something left to pick, and a peer."""
    return (settings.auto and settings.link_mbit_s is not None and replicas > 1
            and (settings.dtype is None or settings.every is None))


def max_every(steps_per_epoch: int) -> int:
    return max(1, min(MAX_EVERY, steps_per_epoch // MIN_UPDATES))


def choose(settings: AllreduceConfig, params: int, replicas: int, steps_per_epoch: int,
           step_ms: Optional[float] = None) -> Choice:
    """The trial's dtype and every. What the user wrote is kept; auto fills in the rest."""
    dtype, every = settings.dtype or "float32", settings.every or 1
    if not settings.auto:
        return Choice(dtype, every, False, "as configured")
    if settings.dtype and settings.every:
        return Choice(dtype, every, True, "auto: both written, nothing to pick")
    if replicas < 2:
        return Choice(dtype, every, True, "auto: one replica, no gradient crosses a link")
    if settings.link_mbit_s is None or not step_ms:
        return Choice(dtype, every, True, "auto: no link_mbit_s (`up` measures it with 2+ hosts not yet "
                                          "running; elsewhere write it)")
    # validate bounds the settings; what reaches here from elsewhere is checked again, since a
    # decision that raises would stop every worker at once.
    if not (_within(settings.link_mbit_s, LINK_MBIT_S) and _within(step_ms, STEP_MS) and params >= 1):
        return Choice(dtype, every, True, f"auto: no usable measurement (link {settings.link_mbit_s!r} Mbit/s, "
                                          f"step {step_ms!r} ms, {params!r} gradients)")
    return _fit_to_link(settings, params, replicas, max(1, steps_per_epoch), step_ms)


def _within(value, bounds: tuple[float, float]) -> bool:
    """A real number (not a bool, NaN or infinity) within `bounds`."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and bounds[0] <= value <= bounds[1]


def _steps(cost_ms: float, budget_ms: float) -> int:
    """The fewest steps over which `cost_ms` fits in `budget_ms` each (bounded: a ceiling of an
    enormous ratio is capped anyway, and of infinity would raise)."""
    return math.ceil(min(cost_ms / budget_ms, 1e9))


def _fit_to_link(settings: AllreduceConfig, params: int, replicas: int, steps_per_epoch: int,
                 step_ms: float) -> Choice:
    link, budget = settings.link_mbit_s, SHARE * step_ms
    cost = {d: allreduce_ms(params, d, replicas, link) for d in WIRE_BYTES}
    if settings.every:                                  # the user's every: pick the dtype only
        every = settings.every
        dtype = "float32" if cost["float32"] / every <= budget else "bfloat16"
    elif settings.dtype:                                # the user's dtype: pick every only
        dtype, every = settings.dtype, _steps(cost[settings.dtype], budget)
    else:                                               # compress first: it leaves the updates alone
        dtype = next((d for d in ("float32", "bfloat16") if cost[d] <= budget), "bfloat16")
        every = _steps(cost[dtype], budget)
    needed, every = every, min(max(every, 1), settings.every or max_every(steps_per_epoch))
    per_step = cost[dtype] / every
    why = (f"auto: link {_rate(link)} Mbit/s, {params:,} gradients, step {step_ms:,.0f} ms: float32 all-reduce "
           f"≈ {cost['float32']:,.0f} ms ({cost['float32'] / step_ms:,.0%} of a step); {dtype} every {every} "
           f"≈ {per_step:,.1f} ms a step ({per_step / step_ms:,.0%})")
    if needed > every:
        why += f"; ≤ {SHARE:.0%} needs every {needed}, capped at {every}"
    return Choice(dtype, every, True, why, link, step_ms, per_step)


def _rate(mbit_s: float) -> str:
    return f"{mbit_s:,.0f}" if mbit_s >= 10 else f"{mbit_s:.2g}"


def enable(model, trial, cfg, data, strategy, say) -> dict:
    """Decide this trial's all-reduce (the same on every worker) and install it; `say` logs the
    choice when `allreduce:` is set. Returns the trial's `allreduce` record for results.json."""
    from trainer.cluster import allreduce_step          # TensorFlow: imported once training is under way
    settings, replicas = cfg.allreduce, strategy.num_replicas_in_sync
    steps = math.ceil(data.train_count / (trial.batch_per_replica * replicas))
    step_ms = None
    if needs_step_time(settings, replicas):
        step_ms = allreduce_step.agreed_step_ms(model, strategy, data.input_shape, trial.batch_per_replica)
    choice = choose(settings, allreduce_step.gradient_count(model), replicas, steps, step_ms)
    if not choice.stock:
        allreduce_step.install(model, strategy, choice.dtype, choice.every, steps)
    if settings != AllreduceConfig():
        say(choice.line())
    return choice.record()
