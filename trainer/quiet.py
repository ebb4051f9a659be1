"""TensorFlow's start-up noise kept out of the user's view.

Importing TensorFlow on a host without a GPU prints, before any Python code can set a log level
(absl writes to stderr until it is initialised, whatever TF_CPP_MIN_LOG_LEVEL says): absl's
preamble, the oneDNN notice, `Could not find cuda drivers on your machine` twice, and an
`E0000 … failed call to cuInit: … UNKNOWN ERROR (303)` line that reads as a failure. The trainer
says the one fact that matters in its own words instead (`no GPU on this host: training on CPU`).

So `python -m trainer` runs itself as a child whose stderr it reads line by line, dropping exactly
these known lines and passing everything else through at once and unchanged: real errors, the
trainer's own lines, a faulthandler dump. The parent waits for the child and exits with its code
(128 + N when a signal N ended it), forwards the signals it gets (the child is in a process group
of its own, so a terminal's Ctrl-C reaches it once), and the child dies with the parent (Linux's
parent-death signal), so a killed trainer leaves nothing behind. The parent stays alive until the
child's last byte is read: in a container, where it is PID 1, nothing of the child's is lost when
the child ends.

Not filtered: with `--debug`, with `TF_CPP_MIN_LOG_LEVEL` 0 or 1 (TensorFlow's info and warnings
asked for), and the CUDA lines when the container was given GPUs (there they are the clue to a
driver that does not work).
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from typing import Mapping, Sequence

CHILD = "TFC_TRAINER_FILTERED"       # set in the child: it is the one that trains
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)

# absl/glog's prefix: severity and date, time, thread id, file:line]
_LOG = r"^[IWEF]\d{4} \d\d:\d\d:\d+(?:\.\d+)?\s+\d+ "
ALWAYS = tuple(re.compile(p) for p in (
    r"^WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR$",
    _LOG + r"port\.cc:\d+\] oneDNN custom operations are on\.",
    _LOG + r"cpu_feature_guard\.cc:\d+\] This TensorFlow binary is optimized to use available CPU instructions",
    r"^To enable the following instructions: .* in other operations, rebuild TensorFlow with the appropriate compiler flags\.$",
))
WITHOUT_GPUS = tuple(re.compile(p) for p in (
    _LOG + r"cudart_stub\.cc:\d+\] Could not find cuda drivers on your machine, GPU will not be used\.$",
    _LOG + r"cuda_platform\.cc:\d+\] failed call to cuInit: .*\(303\)$",
    _LOG + r"cuda_executor\.cc:\d+\] could not find cuda drivers",
    _LOG + r"cuda_(?:dnn|fft|blas)\.cc:\d+\] Unable to register cu(?:DNN|FFT|BLAS) factory",
    _LOG + r"computation_placer\.cc:\d+\] computation placer already registered",
    r"^(?:\S+: )?TF-TRT Warning: Could not find TensorRT$",
))


def gpus_expected(environ: Mapping[str, str]) -> bool:
    """The container was given GPUs (TFC_EXPECT_GPUS, as the launcher renders it)."""
    return environ.get("TFC_EXPECT_GPUS", "0").strip().lower() not in ("", "0", "none")


def is_noise(line: str, gpus: bool) -> bool:
    text = line.rstrip("\r\n")
    return any(p.search(text) for p in ALWAYS) or (not gpus and any(p.search(text) for p in WITHOUT_GPUS))


def wanted(argv: Sequence[str], environ: Mapping[str, str]) -> bool:
    """Filter this run's stderr? Not in the child itself, not with --debug, not when TensorFlow's
    own info or warnings were asked for."""
    return (environ.get(CHILD) != "1" and "--debug" not in argv
            and environ.get("TF_CPP_MIN_LOG_LEVEL", "").strip() not in ("0", "1"))


def run_filtered(command: Sequence[str], environ: Mapping[str, str]) -> int:
    """Run `command` with its stderr filtered onto ours; its exit code (128 + N for signal N)."""
    gpus, parent = gpus_expected(environ), os.getpid()
    proc = subprocess.Popen(list(command), env={**environ, CHILD: "1"}, stderr=subprocess.PIPE,
                            preexec_fn=lambda: _own_group_and_die_with(parent))
    for sig in FORWARDED:
        signal.signal(sig, lambda number, _frame: _forward(proc, number))
    out = sys.stderr.buffer
    for line in iter(proc.stderr.readline, b""):
        if not is_noise(line.decode("utf-8", "replace"), gpus):
            out.write(line)
            out.flush()
    code = proc.wait()
    return code if code >= 0 else 128 - code


def _forward(proc: subprocess.Popen, number: int) -> None:
    try:
        proc.send_signal(number)
    except ProcessLookupError:
        pass


def _own_group_and_die_with(parent: int) -> None:
    """In the child, before it runs: a process group of its own (a terminal's Ctrl-C reaches the
    parent, which passes it on once), and SIGKILL when the parent dies (Linux)."""
    os.setpgid(0, 0)
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)     # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:      # the parent died before the line above: go with it
        os._exit(137)
