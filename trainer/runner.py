"""What the image's entrypoint runs every command under (`python3 -m trainer.runner CMD…`): the
command as a child, its output passed through as it comes, and four things on top.

- `tf.keras` is tf_keras for your own program too (TF_USE_LEGACY_KERAS=1, the choice the built-in
  trainer makes for itself: Keras 3's `model.fit` fails under MultiWorkerMirroredStrategy on TF
  2.21, keras-team/keras#20585), unless the program's environment sets TF_USE_LEGACY_KERAS itself
  (`run.env: {TF_USE_LEGACY_KERAS: "0"}` keeps Keras 3). Said once per container, in its log.
- A program that fails says so in one line the launcher looks for (`FAILED`): its exit code, how
  long after its start, and its own error line (the last exception of a traceback on stderr, else
  its last line on stderr), not the tail of whatever it printed.
- A program that fails twice alike within START_S of its start (the same error line, an exit code
  of its own, not a signal) is not started again: Docker's restarts are for a host's troubles (a
  lost peer, a killed process), and a deterministic exception would only repeat. The container's
  later starts say why and exit at once with REPEATED, which the launcher takes as final.

- A worker whose program ended well waits (at most 30 s) until its chief stops listening on its
  address, as the built-in trainer's workers do: under `docker compose up --exit-code-from chief`
  the first container to exit stops the others, the chief too while it still writes its files.

The record of the container's starts lives in its own file system (/tmp), which Docker keeps across
the restarts of one container: a new container (the next `up`) starts afresh.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

from trainer.cluster.watchdog import wait_until_gone
from trainer.spec.runner_lines import (FAILED, ITS_ERROR, NOT_AGAIN, PREFIX, REPEATED, START_S,  # noqa: F401
                                         failed_line, failure_of, not_again_line, printable)

STATE = Path("/tmp/.tfcompose-starts.json")
KEPT = 64 << 10                  # the end of stderr kept for its error line
DRAIN_S = 5.0                    # after the program ended, how long the rest of its stderr may take
TF_LOG = re.compile(r"^[IWEF]\d{4} ")        # TensorFlow's own log lines (W0000 00:00:… …)
EXCEPTION = re.compile(r"^[A-Za-z_][\w.]*(: .*)?$")


def error_line(stderr_tail: str) -> str:
    """The program's own error line: the exception a traceback ended with (the last traceback's,
    so a chained exception's final one), else the last line on stderr that is not TensorFlow's log."""
    lines = [line.rstrip() for line in stderr_tail.splitlines()]
    start = max((i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call last)")), default=None)
    if start is not None:
        found = next((line for line in lines[start + 1:] if line and not line[0].isspace() and EXCEPTION.match(line)), "")
        if found:
            return printable(found)
    said = [line for line in lines if line.strip() and not TF_LOG.match(line) and not line.startswith(PREFIX)]
    return printable(said[-1]) if said else ""


def repeated(starts: list[dict]) -> Optional[str]:
    """The error line when the last two starts failed alike at their start (the program's own exit
    code, an error line, each within START_S), else None."""
    if len(starts) < 2:
        return None
    a, b = starts[-2], starts[-1]
    alike = a.get("error") and a.get("error") == b.get("error")
    own = all(1 <= int(s.get("code", 0)) <= 125 for s in (a, b))
    early = all(float(s.get("seconds", START_S + 1)) <= START_S for s in (a, b))
    return b["error"] if alike and own and early else None


def is_trainer(argv: list[str]) -> bool:
    return len(argv) >= 3 and argv[1:3] == ["-m", "trainer"]


def read_state(path: Path = STATE) -> dict:
    try:
        doc = json.loads(path.read_text())
        return doc if isinstance(doc, dict) and isinstance(doc.get("starts", []), list) else {"starts": []}
    except (OSError, ValueError):
        return {"starts": []}


def write_state(doc: dict, path: Path = STATE) -> None:
    try:
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(doc))
        os.replace(tmp, path)
    except OSError:
        pass            # the record is a courtesy: a read-only /tmp must not stop the program


def environment(argv: list[str], first: bool, say) -> dict:
    """The program's environment: tf.keras as tf_keras unless it chose (said on its first start)."""
    env = dict(os.environ)
    if "TF_USE_LEGACY_KERAS" not in env and not is_trainer(argv):
        env["TF_USE_LEGACY_KERAS"] = "1"
        if first:
            say(f"{PREFIX} tf.keras is tf_keras here (TF_USE_LEGACY_KERAS=1, as the built-in trainer: Keras 3's "
                "model.fit fails under MultiWorkerMirroredStrategy on TensorFlow 2.21); for Keras 3 set "
                'TF_USE_LEGACY_KERAS: "0" in the inventory\'s run.env')
    return env


def run(argv: list[str], state: Path = STATE, err=None) -> int:
    """Run `argv` as this container's program; its exit code (or REPEATED)."""
    err = err or sys.stderr.buffer

    def say(line: str) -> None:
        err.write((line + "\n").encode())
        err.flush()
    doc = read_state(state)
    if doc.get("gave_up"):
        say(not_again_line("a restart repeats it; fix it, then `tfcompose up --wait` again", str(doc["gave_up"])))
        return REPEATED
    env = environment(argv, first=not doc["starts"], say=say)
    began = time.monotonic()
    code, tail = _child(argv, env, err)
    if code == 0:
        leave_after_the_chief(argv, os.environ)
        return 0
    seconds = time.monotonic() - began
    error = error_line(tail) if code > 0 else ""
    say(failed_line(code if code > 0 else 128 - code, seconds, error))
    doc["starts"] = (doc["starts"] + [{"code": code, "seconds": round(seconds, 1), "error": error}])[-5:]
    again = repeated(doc["starts"])
    if again:
        doc["gave_up"] = again
        say(not_again_line("the restarts are for a host's troubles, not a deterministic exception", again))
    write_state(doc, state)
    return REPEATED if again else (code if code > 0 else 128 - code)


def leave_after_the_chief(argv: list[str], env) -> None:
    """A worker whose program ended well leaves once its chief has stopped listening (bounded), as
    the built-in trainer does (trainer/main.py `leave`): a worker that ends first makes `docker
    compose up --exit-code-from chief` (`make sim`) stop the chief while it still writes."""
    if env.get("TFC_IS_CHIEF") == "0" and env.get("TFC_CHIEF_ADDR") and not is_trainer(argv):
        wait_until_gone(env["TFC_CHIEF_ADDR"])


def _child(argv: list[str], env: dict, err) -> tuple[int, str]:
    """The program with our stdout and its stderr through us (passed on as it comes, its end kept);
    SIGTERM and SIGINT passed to it. Its exit code (negative: the signal that ended it)."""
    try:
        child = subprocess.Popen(argv, env=env, stderr=subprocess.PIPE)
    except OSError as exc:
        line = f"{PREFIX} cannot start {argv[0]!r}: {exc.strerror or exc}"
        err.write((line + "\n").encode())
        return 127, line
    # Passed on while it runs; ours again once it ended (the handlers are the process's, not the child's).
    before = {sig: signal.signal(sig, lambda number, _frame: child.send_signal(number))
              for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        return _pumped(child, err)
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def _pumped(child: subprocess.Popen, err) -> tuple[int, str]:
    """The child's exit code and the end of its stderr, passed on to `err` as it comes."""
    import threading
    kept = bytearray()

    def pump() -> None:
        while chunk := os.read(child.stderr.fileno(), 65536):
            err.write(chunk)
            err.flush()
            kept.extend(chunk)
            del kept[:-KEPT]
    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    code = child.wait()
    reader.join(DRAIN_S)        # what it wrote last; a process it left holding stderr open is not waited for
    return code, bytes(kept).decode("utf-8", "replace")


def main(argv: Optional[list[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        sys.stderr.write(f"{PREFIX} no command given\n")
        return 2
    return run(argv)


if __name__ == "__main__":
    sys.exit(main())
