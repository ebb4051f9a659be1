"""The trainer's configuration: one typed model, loaded from YAML and overridden by flags (the
file and the overrides read in overrides.py; an elastic run's record in elastic_run.py).

The launcher validates an inventory's `train:` section with this same model, so a value the
trainer would reject is rejected before anything starts on any host.
"""
from __future__ import annotations

import math
from typing import Annotated, List, Literal, Optional, Tuple, Union

from pydantic import Field, StringConstraints, field_validator, model_serializer, model_validator

from trainer.spec.elastic_run import ElasticRun
from trainer.spec.validation import StrictFloatT, StrictIntT, StrictModel as _Strict, field

CANDIDATE_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*(:[A-Za-z_][A-Za-z0-9_]*)?$"


CandidateName = Annotated[str, StringConstraints(pattern=CANDIDATE_PATTERN, max_length=200)]
# The registry's names (trainer/train/models.py checks it holds exactly these): known without TensorFlow,
# so a misspelt candidate fails at `validate`, not after the cluster formed.
BUILTIN_CANDIDATES = ("small_cnn", "deep_cnn", "vgg16", "resnet50")
MAX_STEP = 1_000_000_000     # profile_steps: a training step number (a billion steps is years of training)


class DatasetConfig(_Strict):
    kind: Literal["image_folder", "synthetic"] = field("synthetic", expected="'image_folder' or 'synthetic'")
    """Where images come from: an OASIS-style folder of class sub-folders, or generated in memory."""
    train_dir: Optional[str] = field(None, expected="a folder path", min_length=1)
    """Training images, one sub-folder per class (image_folder only)."""
    val_dir: Optional[str] = field(None, expected="a folder path", min_length=1)
    """Validation images in the same layout; when absent, `validation_split` of train_dir is held out."""
    validation_split: StrictFloatT = field(0.2, expected="a number between 0 and 1 (exclusive)", gt=0, lt=1)
    """Fraction of train_dir held out for validation (seeded, stratified per class)."""
    image_size: Tuple[StrictIntT, StrictIntT] = field((56, 56), expected="[height, width], each an integer 8–4096")
    """Images are resized to [height, width]."""
    color_mode: Literal["grayscale", "rgb"] = field("grayscale", expected="'grayscale' or 'rgb'")
    """grayscale (MRI slices) or rgb."""
    classes: StrictIntT = field(4, expected="an integer 2–100", ge=2, le=100)
    """synthetic only: number of classes."""
    per_class: StrictIntT = field(64, expected="an integer 4–100000", ge=4, le=100_000)
    """synthetic only: training images per class (validation gets a quarter of that)."""

    @field_validator("image_size")
    @classmethod
    def _size_in_range(cls, v):
        if not all(8 <= side <= 4096 for side in v):
            raise ValueError("[height, width], each an integer 8–4096")
        return v

    @model_validator(mode="after")
    def _folder_needs_train_dir(self):
        if self.kind == "image_folder" and not self.train_dir:
            raise ValueError("a `train_dir` when kind is 'image_folder'")
        return self


class Range(_Strict):
    """A range a trial's value is sampled from: exactly one of these keys, `[low, high]`."""
    uniform: Optional[Tuple[StrictFloatT, StrictFloatT]] = field(None, expected="[low, high] with low < high")
    """any number in [low, high]"""
    log_uniform: Optional[Tuple[StrictFloatT, StrictFloatT]] = field(None, expected="[low, high] with 0 < low < high")
    """spread evenly in log scale (learning rates): low > 0"""
    integer: Optional[Tuple[StrictIntT, StrictIntT]] = field(None, expected="[low, high], whole numbers, low < high")
    """a whole number in [low, high]"""
    log_integer: Optional[Tuple[StrictIntT, StrictIntT]] = field(None, expected="[low, high], whole numbers, 1 ≤ low < high")
    """a whole number spread evenly in log scale (widths, batch sizes): low ≥ 1"""

    @model_validator(mode="after")
    def _one_valid_range(self):
        given = [(k, v) for k, v in self.model_dump().items() if v is not None]
        if len(given) != 1:
            raise ValueError("exactly one of uniform, log_uniform, integer, log_integer: [low, high]")
        kind, (low, high) = given[0]
        if not (math.isfinite(low) and math.isfinite(high)) or max(abs(low), abs(high)) > 1e15:
            raise ValueError(f"{kind}: [low, high], finite numbers within ±1e15")
        if not low < high:
            raise ValueError(f"{kind}: [low, high] with low < high")
        if kind.startswith("log") and low <= 0:
            raise ValueError(f"{kind}: [low, high] with low > 0 (a log range cannot touch 0)")
        return self

    @model_serializer(mode="wrap")
    def _only_the_range_given(self, handler):
        return {k: v for k, v in handler(self).items() if v is not None}

    @property
    def kind(self) -> str:
        return next(k for k, v in self.model_dump().items() if v is not None)

    @property
    def bounds(self) -> tuple:
        return getattr(self, self.kind)


# A value to choose from: a finite number (what a range allows), or a word. A trial is named by its
# values and its files by its name, so a word holds only what a file name keeps as it is.
MAGNITUDE = 1e15
CHOICE_TEXT = r"^[A-Za-z0-9_.+-]{1,100}$"
Choice = Union[Annotated[StrictIntT, Field(ge=-MAGNITUDE, le=MAGNITUDE)],
               Annotated[StrictFloatT, Field(ge=-MAGNITUDE, le=MAGNITUDE)],
               Annotated[str, StringConstraints(pattern=CHOICE_TEXT)]]
# A value to search over: a list is a choice among its values; a mapping is a Range.
Param = Union[Range, Annotated[List[Choice], Field(min_length=1, max_length=100)]]
PARAM = ("a list of values to choose from (finite numbers within ±1e15, or words of letters, digits and _.+-), "
         "or a range like {log_uniform: [1.0e-4, 1.0e-1]}")
Identifier = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", max_length=64)]


SAMPLERS = ("grid", "random", "tpe")        # trainer/search/study.py makes each (its SAMPLER registry)
PRUNERS = ("none", "asha", "hyperband")      # and each of these (PRUNER)


def choices(names: tuple[str, ...]) -> str:
    """`'a', 'b' or 'c'`: what an error message says a field expects."""
    quoted = [f"'{name}'" for name in names]
    return ", ".join(quoted[:-1]) + f" or {quoted[-1]}" if len(quoted) > 1 else quoted[0]


class SearchConfig(_Strict):
    mode: Literal["sync", "parallel"] = field("sync", expected="'sync' or 'parallel'")
    """sync: every trial trained by all workers together. parallel: the hosts take trials from a queue on the chief
    one at a time, each host training its trial alone."""
    sampler: Literal[SAMPLERS] = field("grid", expected=choices(SAMPLERS))
    """grid: every combination of the lists below, in order (the default; names like `small_cnn@lr=0.01,bs=16`).
    random or tpe (Optuna's Bayesian sampler): `trials` draws from the lists and ranges."""
    trials: Optional[StrictIntT] = field(None, expected="an integer 1–10000", ge=1, le=10_000)
    """How many trials: random and tpe need it; for a grid, at most its number of combinations."""
    seed: Optional[StrictIntT] = field(None, expected="an integer 0–2147483647", ge=0, le=2**31 - 1)
    """The sampler's seed (default: the trainer's seed)."""
    learning_rates: Optional[List[Annotated[StrictFloatT, Field(gt=0, le=10)]]] = field(
        None, expected="a list of learning rates, each > 0 and ≤ 10", min_length=1, max_length=50)
    """Learning rates: a list (every one, in a grid), or a range to sample."""
    learning_rate: Optional[Param] = field(None, expected=PARAM)
    """A learning rate to sample (random, tpe) or choose from: a list, or a range like {log_uniform: [1.0e-4, 1.0e-1]}."""
    batch_per_replica: Optional[Union[Annotated[List[Annotated[StrictIntT, Field(ge=1, le=65536)]], Field(
        min_length=1, max_length=50)], Range]] = field(None, expected="a list of batch sizes, each an integer 1–65536, "
                                                       "or a range like {log_integer: [16, 128]}")
    """Images per replica: a list, or a range to sample."""
    hyperparameters: dict[CandidateName, dict[Identifier, Param]] = field(
        {}, expected="a mapping of candidate → {argument: " + PARAM + "}")
    """Each candidate's own hyperparameters: a built-in's `width` or `dropout`, a builder's keyword arguments; a list
    or a range each."""
    patience: Optional[StrictIntT] = field(None, expected="an integer ≥ 1", ge=1, le=100_000)
    """Stop a trial after this many epochs without a better val_accuracy (best weights kept)."""
    pruner: Literal[PRUNERS] = field("none", expected=choices(PRUNERS))
    """Stop trials that fall behind: asha (successive halving, asynchronous) or hyperband, judged on val_accuracy
    after min_epochs, min_epochs × reduction_factor, … epochs."""
    min_epochs: StrictIntT = field(1, expected="an integer ≥ 1", ge=1, le=100_000)
    """The first rung: the epochs a trial trains before the pruner first judges it."""
    max_epochs: Optional[StrictIntT] = field(None, expected="an integer ≥ 1", ge=1, le=100_000)
    """The epochs a trial that is never pruned trains (default: `epochs`)."""
    reduction_factor: StrictIntT = field(3, expected="an integer 2–10", ge=2, le=10)
    """Of the trials reaching a rung, the top 1/reduction_factor go on."""
    port: StrictIntT = field(2223, expected="an integer 1–65535", ge=1, le=65535)
    """parallel: the chief's trial queue's port (every host reaches it there; open it between the hosts only)."""
    lost_after_s: StrictFloatT = field(120.0, expected="a number of seconds 5–86400", ge=5, le=86400)
    """parallel: how long a host may be silent before its trial is handed to another host."""
    queue: Optional[Annotated[str, StringConstraints(pattern=r"^(serve|[A-Za-z0-9.:\[\]-]{1,300})$")]] = field(
        None, expected="'serve' or the chief's address:port")
    """Where the study is, written by the launcher in parallel mode: `serve` on the chief, the chief's `address:port`
    elsewhere."""
    hosts: Optional[List[Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9-]{0,39}$")]]] = field(
        None, expected="a list of host names", min_length=1, max_length=10_000)
    """The cluster's host names, written by the launcher on the chief: the queue answers these only."""
    addresses: Optional[dict[Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9-]{0,39}$")],
                             Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9.:\[\]-]{1,253}$")]]] = field(
        None, expected="a mapping of host name → address")
    """Each host's address, written by the launcher on the chief: a call naming a host must come from it, and the
    queue listens on the chief's own."""
    key_file: Optional[Annotated[str, StringConstraints(pattern=r"^/[^\x00-\x1f]{0,4095}$")]] = field(
        None, expected="an absolute path")
    """The run's key (the chief) or this host's (the others), written by the launcher beside the run's folders: every
    call to the queue carries its proof (trainer/search/wire.py). A path, never the key."""

    @property
    def uses_study(self) -> bool:
        """Anything beyond the plain grid trained to the end needs the study (trainer/search/study.py)."""
        return (self.sampler != "grid" or self.pruner != "none" or bool(self.hyperparameters) or self.trials is not None
                or self.learning_rate is not None or isinstance(self.batch_per_replica, Range) or self.mode == "parallel"
                or self.max_epochs is not None)


# What a link between two hosts can carry, Mbit/s: 10 kbit/s (a modem) to 1 Tbit/s (beyond any NIC).
# Bounded because auto divides by it: 1e-320 Mbit/s makes an all-reduce of infinite milliseconds.
LINK_MBIT_S = (0.01, 1_000_000.0)
LINK_EXPECTED = "a number of Mbit/s from 0.01 to 1,000,000"


class AllreduceConfig(_Strict):
    dtype: Optional[Literal["float32", "bfloat16", "float16"]] = field(
        None, expected="'float32', 'bfloat16' or 'float16'")
    """The number format the gradients cross the network in (cast before the all-reduce, back to float32 after):
    bfloat16 and float16 halve the bytes; float16 is scaled so small gradients survive."""
    every: Optional[StrictIntT] = field(None, expected="an integer 1–1024", ge=1, le=1024)
    """Sum this many steps' gradients on each worker, then all-reduce and update once (N× the global batch)."""
    auto: bool = field(False, expected="true or false", strict=True)
    """Pick dtype and every (those not written here) from the measured link: all-reduce ≤ 10 % of a step."""
    link_mbit_s: Optional[Annotated[StrictFloatT, Field(ge=LINK_MBIT_S[0], le=LINK_MBIT_S[1])]] = field(
        None, expected=LINK_EXPECTED)
    """The slowest host-to-host link, Mbit/s: written by `up` from preflight's links check (auto's input)."""


class TrainConfig(_Strict):
    dataset: DatasetConfig = field(DatasetConfig(), expected="a mapping")
    """The images to train and validate on."""
    candidates: List[CandidateName] = field(["small_cnn"], min_length=1, expected=(
        "a non-empty list of candidate names like 'small_cnn' or 'package.module:function', each once; "
        "built in: " + ", ".join(BUILTIN_CANDIDATES)))
    """Architectures to compare: registry names or `module:function` import paths."""
    search: SearchConfig = field(SearchConfig(), expected="a mapping")
    """Search space, early stopping, and sync or parallel placement of the trials."""
    epochs: StrictIntT = field(2, expected="an integer ≥ 1", ge=1, le=100_000)
    """Passes over the training set per candidate."""
    batch_per_replica: StrictIntT = field(32, expected="an integer 1–65536", ge=1, le=65536)
    """Images per replica per step; the global batch is this × replicas."""
    learning_rate: StrictFloatT = field(1e-3, expected="a number > 0 and ≤ 10", gt=0, le=10)
    """Adam learning rate."""
    weights: Literal["none", "imagenet"] = field("none", expected="'none' or 'imagenet'")
    """Pretrained weights for keras.applications candidates: none (train from scratch) or imagenet."""
    seed: StrictIntT = field(42, expected="an integer 0–2147483647", ge=0, le=2**31 - 1)
    """Seed for shuffling, the validation split and weight initialisation."""
    results_dir: str = field("/results", expected="a folder path", min_length=1)
    """Where results.json, history/, best_model.keras, tensorboard/ and backup/ go."""
    backup_dir: Optional[str] = field(None, expected="a folder path", min_length=1)
    """BackupAndRestore folder (default <results_dir>/backup); resuming needs the chief's copy."""
    strategy: Literal["auto", "multi_worker", "mirrored", "one_device"] = field(
        "auto", expected="'auto', 'multi_worker', 'mirrored' or 'one_device'")
    """auto: multi_worker when TF_CONFIG names >1 task, mirrored for several local GPUs, else one_device."""
    precision: Literal["float32", "mixed_float16", "mixed_bfloat16"] = field(
        "float32", expected="'float32', 'mixed_float16' or 'mixed_bfloat16'")
    """Number format of the layers' computations (weights stay float32): mixed_float16 for GPUs with tensor cores
    (loss scaling is applied for you), mixed_bfloat16 for recent GPUs, TPUs and CPUs with bfloat16 support; the final
    softmax always runs in float32."""
    profile_steps: Optional[tuple[StrictIntT, StrictIntT]] = field(
        None, expected=f"two step numbers [first, last) with 0 ≤ first < last ≤ {MAX_STEP:,}")
    """Trace training steps [first, last) of the first trial with the TensorFlow profiler, on every worker, into
    <results_dir>/profile/<task>/ (open with TensorBoard's profile plugin, or bench/lockstep.py): where a step's time
    goes, and what lockstep adds to it."""
    step_metrics: Literal["local", "all_workers"] = field("local", expected="'local' or 'all_workers'")
    """The loss and accuracy handed to callbacks after each training step: local (each worker's own running means;
    read across the workers once at the end of every epoch and evaluation, which is what is logged) or all_workers
    (tf_keras's own way: read across the workers after every step, several small all-reduces per step, for a per-step
    callback that needs the global values)."""
    allreduce: AllreduceConfig = field(AllreduceConfig(), expected="a mapping (dtype, every, auto) or auto",
                                      shorthand="auto")
    """Gradient all-reduce: wire dtype, accumulation over steps, or auto from the measured link (`allreduce: auto` is
    short for {auto: true}; trainer/cluster/allreduce.py)."""
    communication: Literal["auto", "ring", "nccl"] = field("auto", expected="'auto', 'ring' or 'nccl'")
    """Collective implementation: auto = NCCL when GPUs are present, RING otherwise."""
    join_timeout_s: StrictFloatT = field(300.0, expected="a number of seconds 1–86400", ge=1, le=86400)
    """Seconds to wait for every peer to join before naming the missing ones and exiting."""
    elastic: Optional[ElasticRun] = field(None, expected="a mapping written by `up` (the inventory's elastic:)")
    """Written by `up` when the inventory has `elastic:`: how the batch follows a smaller cluster, and its re-forms."""

    @field_validator("profile_steps")
    @classmethod
    def _steps_in_order(cls, steps):
        if steps is not None and not 0 <= steps[0] < steps[1] <= MAX_STEP:
            raise ValueError(f"two step numbers [first, last) with 0 ≤ first < last ≤ {MAX_STEP:,}")
        return steps

    @field_validator("allreduce", mode="before")
    @classmethod
    def _auto_shorthand(cls, value):
        return {"auto": True} if value == "auto" else value

    @field_validator("candidates", mode="before")
    @classmethod
    def _comma_separated(cls, names):
        # CANDIDATES=small_cnn,deep_cnn from the environment arrives as one string
        return [n.strip() for n in names.split(",") if n.strip()] if isinstance(names, str) else names

    @field_validator("candidates")
    @classmethod
    def _each_once_and_known(cls, names):
        if len(set(names)) != len(names):
            raise ValueError("each candidate named once")
        unknown = [n for n in names if ":" not in n and n not in BUILTIN_CANDIDATES]
        if unknown:
            raise ValueError(f"a built-in candidate ({', '.join(BUILTIN_CANDIDATES)}) or an import path like "
                             f"'my_models:build', not {unknown[0]!r}")
        return names
