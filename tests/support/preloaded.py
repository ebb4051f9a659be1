"""tfcompose's command line started as the hostile corpus needs it, some 250 times a run: a new
process for each case, with the case's arguments, environment, folder, no terminal and no stdin,
but forked from a process that has already imported what every command imports (pydantic, PyYAML,
Jinja, Typer, Rich, Paramiko, and the launcher's CLI, plan and view). Python's start and those
imports, about 0.35 s of CPU per command here (0.1 s is left), are paid once per lane instead of
once per case.

What the case sees is what a fresh `python -c "from launcher.cli import run; run()"` sees: the
launcher's modules read nothing of the environment, the folder or the terminal at import (all of
that is read when a command runs, in the child, after the case's are in place); an uncaught
exception prints its traceback and exits 1; `atexit` handlers run; the exit code is the process's.
Not preloaded: matplotlib (it reads MPLCONFIGDIR at import) and anything that starts a thread
(a fork keeps only the calling thread).
"""
from __future__ import annotations

import atexit
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from support.common import REPO

PRELOAD = ("pydantic", "yaml", "jinja2", "typer", "rich.console", "rich.table", "paramiko", "launcher.cli", "launcher.plan", "launcher.view")

SERVER = r"""
import atexit, builtins, importlib, json, os, sys, traceback
for name in sys.argv[1:]:
    importlib.import_module(name)
reply = os.fdopen(os.dup(1), "w")
os.dup2(os.open(os.devnull, os.O_WRONLY), 1)       # nothing of ours reaches the reply channel


def case(req):
    os.setsid()                                    # its own group: a timeout ends all it started
    os.chdir(req["cwd"])
    os.environ.clear()
    os.environ.update(req["env"])
    for fd, path, flags in ((0, os.devnull, os.O_RDONLY), (1, req["out"], os.O_WRONLY | os.O_TRUNC),
                            (2, req["err"], os.O_WRONLY | os.O_TRUNC)):
        opened = os.open(path, flags)
        os.dup2(opened, fd)
        os.close(opened)
    sys.stdin = open(os.devnull)
    sys.argv = ["-c", *req["args"]]
    sys.path[0] = ""                               # python -c: the current folder first
    sys.path_importer_cache.clear()
    importlib.invalidate_caches()
    try:
        exec(compile(req["code"], "<string>", "exec"), {"__name__": "__main__", "__builtins__": builtins})
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
        if not isinstance(exc.code, (int, type(None))):
            print(exc.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
        code = 1
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    return code


for line in sys.stdin:
    req = json.loads(line)
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        reply.close()
        os._exit(case(req) & 0xFF)
    reply.write(json.dumps({"pid": pid}) + "\n")
    reply.flush()
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    reply.write(json.dumps({"code": code}) + "\n")
    reply.flush()
"""


class Preloaded:
    """One server per lane, started on first use, ended with the lane."""

    _server: subprocess.Popen | None = None

    @classmethod
    def server(cls) -> subprocess.Popen:
        if cls._server is None or cls._server.poll() is not None:
            env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(REPO), "HOME": tempfile.gettempdir()}
            cls._server = subprocess.Popen([sys.executable, "-c", SERVER, *PRELOAD], stdin=subprocess.PIPE,
                                           stdout=subprocess.PIPE, bufsize=0, env=env, cwd=tempfile.gettempdir())
            atexit.register(cls._server.kill)
        return cls._server


def run(code: str, args: list[str], cwd: Path, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    """`python -c code *args` in cwd with env (and no stdin), as subprocess.run would give it back;
    subprocess.TimeoutExpired after `timeout` seconds (the case's process group killed first)."""
    server = Preloaded.server()
    with tempfile.TemporaryDirectory(prefix="tfc-case-") as tmp:
        out, err = Path(tmp) / "out", Path(tmp) / "err"
        out.touch()
        err.touch()
        request = {"code": code, "args": args, "cwd": str(cwd), "env": env, "out": str(out), "err": str(err)}
        payload = (json.dumps(request) + "\n").encode()
        assert server.stdin.write(payload) == len(payload)
        pid = _answer(server)["pid"]
        ready, _, _ = select.select([server.stdout], [], [], timeout)
        if not ready:
            os.killpg(pid, signal.SIGKILL)
            _answer(server)
            raise subprocess.TimeoutExpired(["python", "-c", code, *args], timeout)
        returncode = _answer(server)["code"]
        return subprocess.CompletedProcess(["python", "-c", code, *args], returncode, out.read_text(), err.read_text())


def _answer(server: subprocess.Popen) -> dict:
    """One line from the server, read unbuffered (so that select sees what is left)."""
    line = b""
    while not line.endswith(b"\n"):
        byte = server.stdout.read(1)
        if not byte:
            raise RuntimeError(f"the preloaded server ended ({server.poll()})")
        line += byte
    return json.loads(line)
