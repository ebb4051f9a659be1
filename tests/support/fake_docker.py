"""A "host" that misbehaves on purpose: a real sshd whose PATH starts with a stand-in `docker`.

The stand-in answers from files in its folder (containers' `docker inspect` JSON, log text) or,
in mode `hang`, never answers (a wedged dockerd). Tests write those files to play a tampered or
broken host; the launcher sees it only through SSH, as it would a real one.
"""
from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path

# A distinctive duration: `pgrep -f "sleep 3607"` finds what a timeout left behind; one per lane, so
# that a lane's look (and kill) never reaches the other lane's hangs.
HANG_SECONDS = 3607 + int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)

FAKE_DOCKER = f"""#!/bin/bash
d="$FAKE_DOCKER_DIR"
echo "$*" >> "$d/calls"
if [ "$(cat "$d/mode" 2>/dev/null)" = hang ]; then exec sleep {HANG_SECONDS}; fi
case "$1" in
  info) echo '{{"io.containerd.runc.v2":{{}},"runc":{{}}}}' ;;
  compose) if [ "$2" = version ]; then echo 2.26.1; fi ;;
  ps) if [ -f "$d/kill-caller" ]; then   # the probe's own shell: the topmost ancestor running it
        p=$PPID; top=""
        while [ "$p" -gt 1 ]; do
          mapfile -d '' args < "/proc/$p/cmdline"
          if [ "${{args[0]}}" = sh ] && [ "${{args[3]}}" = tfcompose-preflight ]; then top=$p; fi
          p=$(awk '{{print $4}}' "/proc/$p/stat")
        done
        [ -n "$top" ] && kill -9 "$top"
      fi
      cat "$d/ids" 2>/dev/null ;;
  inspect) cat "$d/inspect.json" 2>/dev/null || echo "[]" ;;
  logs) cat "$d/logs.txt" 2>/dev/null || true ;;
  image) echo "sha256:$(printf '%064d' 7)" ;;
  *) : ;;
esac
"""


@dataclass
class FakeDocker:
    folder: Path

    @classmethod
    def create(cls, folder: Path) -> "FakeDocker":
        (folder / "bin").mkdir(parents=True)
        script = folder / "bin" / "docker"
        script.write_text(FAKE_DOCKER)
        script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        return cls(folder)

    def env(self) -> dict[str, str]:
        return {"PATH": f"{self.folder / 'bin'}:{os.environ.get('PATH', '/usr/bin:/bin')}",
                "FAKE_DOCKER_DIR": str(self.folder), "PYTHONPATH": str(self.folder / "py")}

    def hang_python(self) -> None:
        """The host's python3 never answers (the dataset manifest runs it): a login shell may put
        its own python first on PATH, so the stand-in is a sitecustomize that every python3 loads."""
        (self.folder / "py").mkdir(exist_ok=True)
        (self.folder / "py" / "sitecustomize.py").write_text(
            f"import os\nos.execvp('sleep', ['sleep', '{HANG_SECONDS}'])\n")

    def lying_links(self, mbit_s: float) -> None:
        """The host's links probe claims every peer open at `mbit_s` (what a tampered host could say);
        every other python3 program runs as it is."""
        (self.folder / "py").mkdir(exist_ok=True)
        (self.folder / "py" / "sitecustomize.py").write_text(
            "import json, sys\n"
            "targets = sys.argv[5:] if sys.argv[:1] == ['-c'] else []\n"
            "if targets and all('|' in t for t in targets):\n"
            "    names = [t.split('|')[0] for t in targets]\n"
            f"    print(json.dumps({{'reach': {{n: 'open' for n in names}}, 'mbit_s': {{n: {mbit_s!r} for n in names}}}}))\n"
            "    sys.stdout.flush()\n    import os\n    os._exit(0)\n")

    def kill_caller_on_ps(self) -> None:
        """`docker ps` ends the shell that called it (a probe cut short midway, its output kept)."""
        (self.folder / "kill-caller").write_text("")

    def hang(self, on: bool = True) -> None:
        (self.folder / "mode").write_text("hang" if on else "normal")

    def containers(self, *found: dict) -> None:
        (self.folder / "ids").write_text("".join(c["Id"][:12] + "\n" for c in found))
        (self.folder / "inspect.json").write_text(json.dumps(list(found)))

    def raw_inspect(self, text: str) -> None:
        (self.folder / "ids").write_text("0123456789ab\n")
        (self.folder / "inspect.json").write_text(text)

    def logs(self, text: str) -> None:
        (self.folder / "logs.txt").write_text(text)

    def calls(self) -> list[str]:
        path = self.folder / "calls"
        return path.read_text().splitlines() if path.exists() else []


def container(cluster: str, host: str, run: str, state: str = "exited", exit_code: int = 0, n: int = 1) -> dict:
    """`docker inspect` of one container, as Docker writes it (the fields tfcompose reads)."""
    return {"Id": f"{n:012x}" + "f" * 52, "Created": f"2026-11-23T10:00:0{n}Z", "RestartCount": 0,
            "State": {"Status": state, "ExitCode": exit_code, "StartedAt": "2026-11-23T00:00:00Z",
                      "FinishedAt": "2026-11-23T10:05:00Z"},
            "Config": {"Labels": {"tfcompose.cluster": cluster, "tfcompose.host": host, "tfcompose.run": run}}}
