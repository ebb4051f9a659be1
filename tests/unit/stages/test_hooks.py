"""on_finish / on_failure hooks."""
from __future__ import annotations

from launcher import plan as plan_mod
from launcher.stages import hooks
from support.builders import cluster


def test_hooks_get_the_run_folder_and_outcome_and_a_failing_hook_is_a_warning(tmp_path):
    marker = tmp_path / "hook.txt"
    c = cluster(1, on_finish=f'echo "$TFC_OUTCOME $TFC_RUN_DIR $TFC_RUN_ID" >> {marker}',
                on_failure="exit 3")
    plan = plan_mod.make(c)
    assert hooks.after_run(plan, False, "chief finished", tmp_path / "run") is None
    assert marker.read_text() == f"finished {(tmp_path / 'run').resolve()} {plan.run_id}\n"
    assert "on_failure exited with status 3" in hooks.after_run(plan, True, "h1 failed", tmp_path / "run")
    assert marker.read_text().count("\n") == 1   # on_finish ran once, not for the failure
