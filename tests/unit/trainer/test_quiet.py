"""TensorFlow's start-up noise is kept out of the trainer's stderr, and nothing else is: the lines
a CPU-only host printed (copied from a real run of TensorFlow 2.21), real errors, exit codes,
signals, and a parent killed taking its child with it."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from trainer import quiet
from support.common import REPO

NOISE = """WARNING: All log messages before absl::InitializeLog() is called are written to STDERR
I0000 00:00:1795802065.516125   30959 port.cc:153] oneDNN custom operations are on. You may see slightly different numerical results due to floating-point round-off errors from different computation orders. To turn them off, set the environment variable `TF_ENABLE_ONEDNN_OPTS=0`.
I0000 00:00:1795802065.518024   30959 cudart_stub.cc:31] Could not find cuda drivers on your machine, GPU will not be used.
E0000 00:00:1795802069.296096   30959 cuda_platform.cc:52] failed call to cuInit: INTERNAL: CUDA error: Failed call to cuInit: UNKNOWN ERROR (303)
""".splitlines()
CUDA = NOISE[2:]
REAL = ["tfcompose trainer: train.yaml: epochs: Received 0. Expected an integer ≥ 1.",
        "E0000 00:00:1795802099.1   30959 collective_ops.cc:123] Collective ops is aborted by: failed to connect",
        "W0000 00:00:1795802099.1   30959 cuda_platform.cc:52] failed call to cuInit: CUDA_ERROR_NO_DEVICE (100)",
        "Traceback (most recent call last):", "Fatal Python error: Segmentation fault"]


def test_the_start_up_noise_is_noise_and_real_errors_are_not():
    assert all(quiet.is_noise(line, gpus=False) for line in NOISE)
    assert not any(quiet.is_noise(line, gpus=False) for line in REAL)


def test_with_gpus_given_the_cuda_lines_are_the_clue_and_stay():
    assert not any(quiet.is_noise(line, gpus=True) for line in CUDA)
    assert quiet.gpus_expected({"TFC_EXPECT_GPUS": "all"}) and not quiet.gpus_expected({"TFC_EXPECT_GPUS": "0"})


@pytest.mark.parametrize("argv,env,filtered", [([], {}, True), (["--debug"], {}, False),
                                               ([], {"TF_CPP_MIN_LOG_LEVEL": "0"}, False),
                                               ([], {"TF_CPP_MIN_LOG_LEVEL": "2"}, True),
                                               ([], {quiet.CHILD: "1"}, False)])
def test_debug_or_a_log_level_asks_for_everything(argv, env, filtered):
    assert quiet.wanted(argv, env) is filtered


def filtered(script: str, **kw) -> subprocess.Popen:
    """`python -c script` run through run_filtered, as `python -m trainer` runs itself."""
    wrapper = ("import os, sys; from trainer.quiet import run_filtered; "
               f"sys.exit(run_filtered([sys.executable, '-c', {script!r}], os.environ))")
    return subprocess.Popen([sys.executable, "-c", wrapper], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONPATH": str(REPO)}, **kw)


def test_only_the_noise_is_dropped_in_order_and_the_exit_code_is_the_childs():
    lines = NOISE[:2] + [REAL[0]] + NOISE[2:] + REAL[1:2]
    script = (f"import sys; print('out 1', flush=True)\nfor l in {lines!r}: sys.stderr.write(l + chr(10)); "
              "sys.stderr.flush()\nsys.exit(3)")
    proc = filtered(script)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 3
    assert out == "out 1\n" and err.splitlines() == [REAL[0], REAL[1]]


def test_a_signal_reaches_the_child_once_and_a_death_by_signal_is_128_plus_it():
    script = ("import signal, sys, time\n"
              "signal.signal(signal.SIGTERM, lambda *a: (sys.stderr.write('got TERM\\n'), sys.exit(0)))\n"
              "print('ready', flush=True); time.sleep(60)")
    proc = filtered(script)
    assert proc.stdout.readline() == "ready\n"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and err.count("got TERM") == 1
    proc = filtered("import os, signal; print('ready', flush=True); os.kill(os.getpid(), signal.SIGKILL)")
    proc.communicate(timeout=60)
    assert proc.returncode == 137


def test_a_killed_parent_takes_the_child_with_it(tmp_path):
    pid_file = tmp_path / "child"
    proc = filtered(f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); "
                    "print('ready', flush=True); time.sleep(120)")
    assert proc.stdout.readline() == "ready\n"
    child = int(pid_file.read_text())
    proc.kill()
    proc.wait(timeout=30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and os.path.exists(f"/proc/{child}") and \
            "Z" not in open(f"/proc/{child}/stat").read().split()[2]:
        time.sleep(0.1)
    assert not os.path.exists(f"/proc/{child}") or open(f"/proc/{child}/stat").read().split()[2] == "Z", \
        "the trainer outlived the parent that was killed"


def test_the_trainer_through_the_filter_says_bad_input_in_one_line_and_exits_2(tmp_path):
    bad = tmp_path / "train.yaml"
    bad.write_text("epochs: 0\n")
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", quiet.CHILD)}
    done = subprocess.run([sys.executable, "-m", "trainer", "--config", str(bad)], cwd=REPO, capture_output=True,
                          text=True, env=env, timeout=120)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [f"tfcompose trainer: {bad}: epochs: Received 0. Expected an integer ≥ 1."]
