"""The rank shim: TF_CONFIG from what a scheduler says, when no TF_CONFIG is given.

- Kubernetes Indexed Job / JobSet: JOB_COMPLETION_INDEX is this pod's index; the peers' stable
  DNS names follow TFC_PEER_PATTERN (`tfcompose render --target jobset` writes
  `<jobset>-worker-0-{index}.<jobset>`), TFC_NUM_WORKERS of them.
- Slurm (one task per node): SLURM_PROCID is this task's index, SLURM_NTASKS the count, and the
  peers are the nodes of SLURM_JOB_NODELIST, expanded in order (as TensorFlow's
  SlurmClusterResolver does).

The port is TFC_TF_PORT (default 2222). The same TFC_* variables are set as under the launcher.
`python -m trainer.cluster.rank` prints them as shell `export` lines (the image's entrypoint uses it for
`run:` scripts); it imports no TensorFlow.
"""
from __future__ import annotations

import itertools
import json
import re
import shlex
import sys
from typing import Mapping, MutableMapping, Optional

from trainer.spec.errors import ConfigError

DEFAULT_PORT = 2222
MAX_WORKERS = 4096


def expand_nodelist(nodelist: str) -> list[str]:
    """Slurm's compressed host list: `gpu[01-03,07],cpu-a` → gpu01, gpu02, gpu03, gpu07, cpu-a."""
    names, depth, start = [], 0, 0
    for i, ch in enumerate(nodelist + ","):
        depth += (ch == "[") - (ch == "]")
        if ch == "," and depth == 0:
            if nodelist[start:i]:
                names += _expand_one(nodelist[start:i])
            start = i + 1
    if depth != 0 or len(names) > MAX_WORKERS:
        raise ConfigError(f"SLURM_JOB_NODELIST: Received {nodelist[:80]!r}. Expected a Slurm host list.")
    return names


def _expand_one(pattern: str) -> list[str]:
    parts = re.split(r"(\[[^\]]*\])", pattern)
    choices = [_ranges(p[1:-1], pattern) if p.startswith("[") else [p] for p in parts]
    return ["".join(combo) for combo in itertools.product(*choices)]


def _ranges(spec: str, pattern: str) -> list[str]:
    out = []
    for item in spec.split(","):
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", item)
        if not m or (m.group(2) and int(m.group(2)) - int(m.group(1)) > MAX_WORKERS):
            raise ConfigError(f"SLURM_JOB_NODELIST: Received {pattern!r}. Expected ranges like [01-04,07].")
        lo, hi = m.group(1), m.group(2) or m.group(1)
        out += [str(n).zfill(len(lo)) for n in range(int(lo), int(hi) + 1)]
    return out


def from_scheduler(env: Mapping[str, str]) -> Optional[tuple[list[str], int]]:
    """(worker addresses, this task's index) from Kubernetes or Slurm variables, or None."""
    port = _int(env, "TFC_TF_PORT", DEFAULT_PORT)
    if "JOB_COMPLETION_INDEX" in env and "TFC_PEER_PATTERN" in env:
        count = _int(env, "TFC_NUM_WORKERS", 0)
        pattern = env["TFC_PEER_PATTERN"]
        if "{index}" not in pattern:
            raise ConfigError(f"TFC_PEER_PATTERN: Received {pattern!r}. Expected a host name with {{index}}.")
        return [f"{pattern.format(index=i)}:{port}" for i in range(count)], _int(env, "JOB_COMPLETION_INDEX", 0)
    if "SLURM_PROCID" in env and "SLURM_JOB_NODELIST" in env:
        nodes = expand_nodelist(env["SLURM_JOB_NODELIST"])[: _int(env, "SLURM_NTASKS", 0) or None]
        return [f"{node}:{port}" for node in nodes], _int(env, "SLURM_PROCID", 0)
    return None


def _int(env: Mapping[str, str], name: str, default: int) -> int:
    value = env.get(name, "")
    if value == "":
        return default
    if not value.isdigit() or int(value) > 65535:
        raise ConfigError(f"{name}: Received {value[:40]!r}. Expected a whole number.")
    return int(value)


def apply(env: MutableMapping[str, str]) -> bool:
    """Set TF_CONFIG and the TFC_* variables from the scheduler's, unless TF_CONFIG is given."""
    if env.get("TF_CONFIG"):
        return False
    found = from_scheduler(env)
    if found is None:
        return False
    workers, index = found
    if not 0 <= index < len(workers):
        raise ConfigError(f"this task's index {index} is not among the {len(workers)} workers the scheduler names.")
    env["TF_CONFIG"] = json.dumps({"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}})
    env.update({"TFC_TASK_TYPE": "worker", "TFC_TASK_INDEX": str(index), "TFC_NUM_WORKERS": str(len(workers)),
                "TFC_IS_CHIEF": "1" if index == 0 else "0", "TFC_CHIEF_ADDR": workers[0]})
    env.setdefault("TFC_HOST", workers[index].rsplit(":", 1)[0])
    return True


NAMES = ("TF_CONFIG", "TFC_TASK_TYPE", "TFC_TASK_INDEX", "TFC_NUM_WORKERS", "TFC_IS_CHIEF", "TFC_CHIEF_ADDR", "TFC_HOST")


def main() -> int:
    import os
    env = dict(os.environ)
    try:
        applied = apply(env)
    except ConfigError as exc:
        print(f"tfcompose rank: {exc}", file=sys.stderr)
        return 2
    if applied:
        print("".join(f"export {name}={shlex.quote(env[name])}\n" for name in NAMES), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
