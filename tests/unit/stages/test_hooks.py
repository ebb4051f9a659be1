"""on_finish / on_failure hooks."""
from __future__ import annotations

import subprocess
import time

from launcher import plan as plan_mod
from launcher.stages import hooks
from support.builders import cluster


def test_hooks_get_the_run_folder_and_outcome_and_a_failing_hook_is_a_warning(tmp_path):
    marker = tmp_path / "hook.txt"
    c = cluster(1, on_finish=f'echo "$TFC_OUTCOME $TFC_RUN_DIR $TFC_RUN_ID" >> {marker}',
                on_failure="exit 3")
    plan = plan_mod.make(c)
    assert hooks.after_run(plan, False, "chief finished", tmp_path / "run") is None
    assert marker.read_text() == f"finished {(tmp_path / 'run').resolve()} {plan.run}\n"
    assert "on_failure exited with status 3" in hooks.after_run(plan, True, "h1 failed", tmp_path / "run")
    assert marker.read_text().count("\n") == 1   # on_finish ran once, not for the failure


def test_a_hook_never_sees_the_key_passphrase(tmp_path, monkeypatch):
    monkeypatch.setenv("TFC_SSH_PASSPHRASE", "s3cret-Passphrase-42")
    seen = tmp_path / "env.txt"
    plan = plan_mod.make(cluster(1, on_finish=f"env > {seen}"))
    assert hooks.after_run(plan, False, "done", tmp_path / "run") is None
    assert "s3cret" not in seen.read_text() and "TFC_RUN_ID=" in seen.read_text()


def test_a_hook_never_sees_the_trackers_token_or_password(tmp_path, monkeypatch):
    from dataclasses import replace
    from launcher.inventory.model import TrackerSettings
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", "tok-4f3e2d1c")
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", "basic-8a7b6c5d")
    monkeypatch.setenv("LAB_TOKEN", "pw-1a2b3c4d")           # what the inventory's uri took with ${LAB_TOKEN}
    seen = tmp_path / "env.txt"
    c = replace(cluster(1, on_finish=f"env > {seen}"), tracking=TrackerSettings("https://me:pw-1a2b3c4d@mlflow.lab", "x"))
    assert hooks.after_run(plan_mod.make(c), False, "done", tmp_path / "run") is None
    text = seen.read_text()
    assert "TFC_RUN_ID=" in text and not any(s in text for s in ("tok-4f3e2d1c", "basic-8a7b6c5d", "pw-1a2b3c4d"))


def test_a_hook_that_leaves_a_child_running_is_not_waited_for(tmp_path):
    plan = plan_mod.make(cluster(1, on_finish="sleep 300 & echo started"))
    started = time.monotonic()
    assert hooks.after_run(plan, False, "done", tmp_path / "run") is None
    assert time.monotonic() - started < hooks.HOOK_TIMEOUT_S / 2       # not held until the child ends
    subprocess.run(["pkill", "-f", "^sleep 300$"], check=False)


def test_a_hook_saying_bytes_that_are_not_text_is_a_warning_not_a_crash(tmp_path):
    plan = plan_mod.make(cluster(1, on_failure=r"printf '\377\033]52;c;eA==\007oops\n'; exit 4"))
    warning = hooks.after_run(plan, True, "failed", tmp_path / "run")
    assert warning.startswith("on_failure exited with status 4: ") and "oops" in warning and "\x1b" not in warning
