"""Hooks: `on_finish:` and `on_failure:` commands of the inventory, run on this machine by
`up --wait` once the run is collected (a desktop notification, a chat message). They get the run
folder and the outcome in their environment — never the SSH key's passphrase nor the tracker's
secrets; a hook that fails or hangs is a warning, never a change to the run's own outcome. Waiting
ends when the hook's own shell does: a child it leaves in the background runs on, unwaited for."""
from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path
from typing import Optional

from launcher.ssh.explain import PASSPHRASE_ENV
from launcher.text import one_line
from launcher.tracking.secrets import without_secrets

HOOK_TIMEOUT_S = 120


def hook_environment(plan, failed: bool, message: str, run_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != PASSPHRASE_ENV}
    if plan.cluster.tracking is not None:     # nor the tracker's token or password
        env = without_secrets(env, plan.cluster.tracking.uri)
    return {**env, "TFC_RUN_DIR": str(Path(run_dir).resolve()), "TFC_OUTCOME": "failed" if failed else "finished",
            "TFC_MESSAGE": message.splitlines()[0] if message else "", "TFC_CLUSTER": plan.cluster.name,
            "TFC_RUN_ID": plan.run}


def after_run(plan, failed: bool, message: str, run_dir: Path) -> Optional[str]:
    """Run the matching hook, if any; a warning when it did not succeed."""
    spec = plan.cluster.spec
    command, name = (spec.on_failure, "on_failure") if failed else (spec.on_finish, "on_finish")
    if not command:
        return None
    # Its output goes to a file, not a pipe: a pipe stays open as long as any background child
    # of the hook holds it, and reading it to the end would wait for that child.
    with tempfile.TemporaryFile() as output:
        try:
            proc = subprocess.Popen(["sh", "-c", command], env=hook_environment(plan, failed, message, run_dir),
                                    cwd=plan.cluster.folder, stdin=subprocess.DEVNULL, stdout=output,
                                    stderr=subprocess.STDOUT, start_new_session=True)
            status = proc.wait(timeout=HOOK_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return f"{name} did not finish within {HOOK_TIMEOUT_S} s; left it"
        except OSError as exc:
            return f"{name} could not run ({exc.strerror or exc})"
        if status == 0:
            return None
        output.seek(0)
        said = output.read()[-4096:].decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
    return f"{name} exited with status {status}: {one_line(said[0], 200)}"
