"""The connection's command bounds."""
from __future__ import annotations

import subprocess
from launcher.ssh.connection import bounded


def test_a_bounded_command_is_ended_by_the_hosts_timeout(tmp_path):
    # Run what the host would run, locally: the bound ends it and nothing of it is left.
    marker = tmp_path / "still-running"
    cmd = bounded(["sh", "-c", 'sleep 30; touch "$1"', "sh", str(marker)], 1)
    proc = subprocess.run(["sh", "-c", cmd], timeout=20)
    assert proc.returncode == 124 and not marker.exists()
