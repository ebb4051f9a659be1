"""Hooks: `on_finish:` and `on_failure:` commands of the inventory, run on this machine by
`up --wait` once the run is collected (a desktop notification, a chat message). They get the run
folder and the outcome in their environment; a hook that fails or hangs is a warning, never a
change to the run's own outcome."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Optional

HOOK_TIMEOUT_S = 120


def after_run(plan, failed: bool, message: str, run_dir: Path) -> Optional[str]:
    """Run the matching hook, if any; a warning when it did not succeed."""
    spec = plan.cluster.spec
    command = spec.on_failure if failed else spec.on_finish
    if not command:
        return None
    env = {**os.environ, "TFC_RUN_DIR": str(Path(run_dir).resolve()), "TFC_OUTCOME": "failed" if failed else "finished",
           "TFC_MESSAGE": message.splitlines()[0] if message else "", "TFC_CLUSTER": plan.cluster.name,
           "TFC_RUN_ID": plan.run_id}
    name = "on_failure" if failed else "on_finish"
    try:
        proc = subprocess.run(["sh", "-c", command], env=env, cwd=plan.cluster.folder,
                              capture_output=True, text=True, timeout=HOOK_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return f"{name} did not finish within {HOOK_TIMEOUT_S} s; left it"
    except OSError as exc:
        return f"{name} could not run ({exc})"
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or [""]
        return f"{name} exited with status {proc.returncode}: {tail[0][:200]}"
    return None
