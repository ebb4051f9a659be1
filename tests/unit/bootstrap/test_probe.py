"""The probe (launcher/bootstrap/probe.py): POSIX shell that reads a host without changing it."""
from __future__ import annotations

import subprocess

from launcher.bootstrap import commands, probe
from launcher.bootstrap.facts import parse


def test_the_probe_is_posix_shell_and_reads_this_machine(tmp_path):
    """The probe runs under dash (Ubuntu's /bin/sh) and reads this Debian machine without changing it."""
    assert subprocess.run(["dash", "-n"], input=probe.PROBE, text=True).returncode == 0
    done = subprocess.run(commands.probe(str(tmp_path / "work"), ""), capture_output=True, text=True, timeout=120)
    f = parse(done.stdout)
    assert f.complete and f.os_id != "unknown" and f.folders == {"workdir": "absent", "data_dir": "none"}
    assert not (tmp_path / "work").exists()
