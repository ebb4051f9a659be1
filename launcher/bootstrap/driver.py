"""The NVIDIA driver of a host with GPUs, judged from its facts alone (pure; was in decide.py):
missing, failing (its module not loaded under Secure Boot, a reboot pending) or too old for CUDA 12,
each said with the exact fix for that OS. tfcompose never installs a driver."""
from __future__ import annotations

from typing import Optional

from launcher.bootstrap.facts import Facts

MIN_DRIVER = (525, 60, 13)       # the oldest Linux driver CUDA 12 (TensorFlow 2.21's wheels) runs on


def driver_problem(f: Facts) -> Optional[str]:
    """What is wrong with the host's NVIDIA driver, with the fix, or None when it works."""
    fix = driver_fix(f.release, f.arch)
    if f.nvidia_smi == "missing":
        return f"no NVIDIA driver (an NVIDIA GPU is on the PCI bus, nvidia-smi is missing); tfcompose never installs one: {fix}"
    if f.nvidia_smi == "failed":
        said = f" (nvidia-smi: {f.nvidia_said[:120]})" if f.nvidia_said else ""
        if f.secure_boot and not f.nvidia_module:
            return (f"the NVIDIA driver is installed but its kernel module is not loaded and Secure Boot is on{said}: "
                    + secure_boot_fix(f.release))
        if f.reboot_required or (f.dkms_nvidia and not f.nvidia_module):
            pending = f" ({f.reboot_packages.strip()})" if f.reboot_packages.strip() else ""
            return (f"the NVIDIA driver is installed but not loaded{said}; a reboot is pending{pending}: reboot the host "
                    "(`sudo reboot`), then run tfcompose bootstrap again")
        return (f"the NVIDIA driver does not work{said}: see `sudo dmesg | grep -i nvidia` and `sudo modprobe nvidia` on "
                f"the host; to reinstall it: {fix}")
    driver = f.driver
    if driver is not None and driver < MIN_DRIVER:
        have = ".".join(map(str, driver))
        return (f"the NVIDIA driver {have} is older than {'.'.join(map(str, MIN_DRIVER))}, the oldest CUDA 12 "
                f"(TensorFlow's) runs on: {fix}")
    return None


def driver_fix(release: Optional[str], arch: str = "amd64") -> str:
    """The exact commands that install (or upgrade) the NVIDIA driver on this OS, then the reboot."""
    if release == "debian-12":
        return ("add `contrib non-free non-free-firmware` to the bookworm lines of /etc/apt/sources.list, then "
                f"`sudo apt update && sudo apt install linux-headers-{arch} nvidia-driver firmware-misc-nonfree` "
                "(Debian 12's driver is 535) and `sudo reboot`")
    return ("`sudo apt update && sudo ubuntu-drivers install` (Ubuntu's recommended, signed driver; or a branch of "
            "your choice, e.g. `sudo apt install nvidia-driver-550-server`), then `sudo reboot`")


def secure_boot_fix(release: Optional[str]) -> str:
    if release == "debian-12":
        return ("enroll DKMS's signing key: `sudo mokutil --import /var/lib/dkms/mok.pub` (choose a one-time password), "
                "`sudo reboot`, and in the blue MOK manager at boot choose Enroll MOK and give that password; or "
                "switch Secure Boot off in the firmware")
    return ("use Ubuntu's signed driver modules (`sudo ubuntu-drivers install`), or enroll the key DKMS signs with: "
            "`sudo mokutil --import /var/lib/shim-signed/mok/MOK.der`, `sudo reboot`, and in the blue MOK manager at "
            "boot choose Enroll MOK; or switch Secure Boot off in the firmware")
