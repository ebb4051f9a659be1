"""The image's runner (trainer/runner.py): every command under it; real child processes (no
TensorFlow): a program that fails twice alike at its start is not started again, its own error
line is said, and tf.keras is tf_keras for a user's program unless it chose."""
from __future__ import annotations

import io
import sys

import pytest

from trainer import runner

TRACEBACK = """W0000 00:00:00.1 123 cuda.cc:1] failed call to cuInit
Traceback (most recent call last):
  File "train.py", line 40, in <module>
    model.fit(dataset, epochs=2)
    ~~~~~~~~~^^^^^^^^^^^^^^^^^^^
ValueError: Attempt to convert a value (PerReplica:{
  0: <tf.Tensor: shape=(16,)>}) with an unsupported type
"""


@pytest.mark.parametrize("tail, line", [
    (TRACEBACK, "ValueError: Attempt to convert a value (PerReplica:{"),
    ("Traceback (most recent call last):\n  File \"a\", line 1\nKeyError: 'x'\n\nDuring handling of the above "
     "exception, another exception occurred:\n\nTraceback (most recent call last):\n  File \"b\", line 2\n"
     "RuntimeError: no dataset\n", "RuntimeError: no dataset"),
    ("loading\nerror: the data folder is empty\nW0000 00:00:01 1 x.cc:2] a warning after it\n",
     "error: the data folder is empty"),
    ("", ""),
])
def test_the_programs_own_error_line_is_the_last_exception_else_its_last_line_on_stderr(tail, line):
    assert runner.error_line(tail) == line


def program(tmp_path, code: str) -> list[str]:
    """A python program that notes each start in starts.txt, then runs `code`."""
    return [sys.executable, "-c", f"open({str(tmp_path / 'starts.txt')!r}, 'a').write('x')\n{code}"]


def run(argv, state) -> tuple[int, str]:
    err = io.BytesIO()
    code = runner.run(argv, state, err)
    return code, err.getvalue().decode()


def test_a_program_that_fails_twice_alike_at_its_start_is_not_started_again(tmp_path):
    state = tmp_path / "starts.json"
    failing = program(tmp_path, "raise ValueError('Attempt to convert a value (PerReplica)')")
    code, said = run(failing, state)
    assert code == 1 and "ValueError: Attempt to convert" in said       # its own traceback, passed through
    assert runner.failure_of(said.splitlines()[-1]) == "ValueError: Attempt to convert a value (PerReplica)"
    code, said = run(failing, state)                                     # Docker's restart: the same error
    assert code == runner.REPEATED and runner.NOT_AGAIN in said
    code, said = run(failing, state)                                     # and the next: not even started
    assert code == runner.REPEATED and runner.NOT_AGAIN in said and "Traceback" not in said
    assert (tmp_path / "starts.txt").read_text() == "xx"


def test_what_a_restart_may_cure_is_restarted(tmp_path):
    state = tmp_path / "starts.json"
    killed = program(tmp_path, "import os, signal; os.kill(os.getpid(), signal.SIGKILL)")   # the OOM killer, say
    assert [run(killed, state)[0] for _ in range(3)] == [137, 137, 137]
    state.unlink()
    flaky = program(tmp_path, "import os; raise SystemExit('peer lost: ' + str(os.getpid()))")   # not alike
    assert [run(flaky, state)[0] for _ in range(3)] == [1, 1, 1]
    ok = program(tmp_path, "print('fine')")
    assert run(ok, tmp_path / "other.json")[0] == 0


def test_tf_keras_is_tf_keras_for_a_users_program_unless_it_chose_and_it_is_said_once(tmp_path, monkeypatch):
    show = [sys.executable, "-c", "import os; print(os.environ.get('TF_USE_LEGACY_KERAS'))"]
    monkeypatch.delenv("TF_USE_LEGACY_KERAS", raising=False)
    notes: list[str] = []
    env = runner.environment(show, first=True, say=notes.append)
    assert env["TF_USE_LEGACY_KERAS"] == "1" and len(notes) == 1 and 'TF_USE_LEGACY_KERAS: "0"' in notes[0]
    assert runner.environment(show, first=False, say=notes.append)["TF_USE_LEGACY_KERAS"] == "1" and len(notes) == 1
    trainer = ["python3", "-m", "trainer", "--config", "/config/train.yaml"]
    assert "TF_USE_LEGACY_KERAS" not in runner.environment(trainer, first=True, say=notes.append)   # it sets its own
    monkeypatch.setenv("TF_USE_LEGACY_KERAS", "0")                       # run.env chose Keras 3
    assert runner.environment(show, first=True, say=notes.append)["TF_USE_LEGACY_KERAS"] == "0" and len(notes) == 1


def test_the_signals_are_passed_on_while_the_program_runs_and_ours_again_after(tmp_path):
    """The runner forwards SIGTERM and SIGINT to the program, then gives the handlers back: a
    caller that runs it again (or a test after it) still gets its own Ctrl-C."""
    import signal
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    assert run(program(tmp_path, "print('fine')"), tmp_path / "starts.json")[0] == 0
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before


def test_a_worker_whose_program_ended_well_leaves_after_its_chief(monkeypatch):
    """CI: under `docker compose up --exit-code-from chief` a user's worker that ended first made
    compose stop the chief while it still wrote its output (exit 137). The worker now waits while
    the chief's address still listens (bounded); a chief, or a worker of the built-in trainer
    (which waits by itself), does not."""
    import socket
    import threading
    import time

    from trainer import runner
    listener = socket.create_server(("127.0.0.1", 0))
    address = f"127.0.0.1:{listener.getsockname()[1]}"
    threading.Timer(1.0, listener.close).start()           # the chief ends a second later
    started = time.monotonic()
    runner.leave_after_the_chief(["python", "train.py"], {"TFC_IS_CHIEF": "0", "TFC_CHIEF_ADDR": address})
    assert 0.9 <= time.monotonic() - started < 10
    held = socket.create_server(("127.0.0.1", 0))
    still = f"127.0.0.1:{held.getsockname()[1]}"
    try:
        for argv, env in ((["python", "train.py"], {"TFC_IS_CHIEF": "1", "TFC_CHIEF_ADDR": still}),
                          (["python3", "-m", "trainer"], {"TFC_IS_CHIEF": "0", "TFC_CHIEF_ADDR": still}),
                          (["python", "train.py"], {})):
            started = time.monotonic()
            runner.leave_after_the_chief(argv, env)
            assert time.monotonic() - started < 0.5, (argv, env)
    finally:
        held.close()
