"""The NVIDIA driver judged (launcher/bootstrap/driver.py): each problem said with the fix for that OS."""
from __future__ import annotations

from launcher.bootstrap.driver import MIN_DRIVER, driver_fix, driver_problem, secure_boot_fix
from launcher.bootstrap.facts import Facts, Gpu


def test_the_oldest_driver_cuda_12_runs_on_and_the_fix_ends_in_a_reboot():
    assert MIN_DRIVER == (525, 60, 13) and "reboot" in driver_fix("ubuntu-22.04")
    assert "linux-headers-arm64" in driver_fix("debian-12", "arm64") and "ubuntu-drivers" in secure_boot_fix("ubuntu-24.04")


def test_a_working_driver_is_no_problem_and_a_missing_or_old_one_is():
    debian = Facts(os_id="debian", os_version="12", arch="amd64")
    assert driver_problem(Facts(**{**debian.__dict__, "nvidia_smi": "ok", "gpus": (Gpu("550.54.15", "L4"),)})) is None
    assert "tfcompose never installs one" in driver_problem(debian)
    old = driver_problem(Facts(**{**debian.__dict__, "nvidia_smi": "ok", "gpus": (Gpu("470.82.01", "T4"),)}))
    assert old.startswith("the NVIDIA driver 470.82.1 is older than 525.60.13")
