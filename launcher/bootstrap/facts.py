"""What a host is, read once: the answer of the probe (probe.py) that `tfcompose bootstrap` and
`tfcompose init` run on each host, parsed into `Facts` (its apt sources read by apt_sources.py).

What a host answers is hostile input: the answer is read up to ANSWER_LIMIT bytes, only the keys
below are taken (the first of each, or up to a bound for the repeated ones), every value is made
printable and cut to VALUE_LIMIT characters, and every number is checked before it is one. A value
that cannot be read becomes "unknown", which the decisions (decide.py) treat with care: a host
whose OS cannot be read is refused, not guessed at.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional

from launcher.bootstrap.apt_sources import archive_mirror, source_uris
from launcher.text import printable

ANSWER_LIMIT = 64 << 10     # the probe's whole answer
VALUE_LIMIT = 300           # one value, after it is made printable
REPEATED_LIMIT = 64         # lines of a repeated key (GPUs, packages, apt sources)
STATE_DIR = "/var/log/tfcompose-bootstrap"     # the install's log, status and pid on the host (commands.py)

# The keys taken, and how many lines of each (1: the first only).
KEYS = {
    "os_id": 1, "os_version": 1, "os_codename": 1, "os_name": 1, "arch": 1, "foreign_archs": 1, "user": 1, "uid": 1,
    "home": 1, "groups": 1, "groups_db": 1, "sudo": 1, "sudo_said": 1, "docker_cli": 1, "dockerd": 1,
    "docker_user": 1, "docker_info": 1, "compose": 1, "docker_active": 1, "docker_enabled": 1,
    "pkg": REPEATED_LIMIT, "dpkg_broken": REPEATED_LIMIT, "apt_lock": 8, "running": 1, "last_status": 1,
    "apt_lists": 1, "source": REPEATED_LIMIT, "source822": REPEATED_LIMIT, "reboot": 1, "reboot_pkgs": 1,
    "kernel": 1, "gpu_pci": 1, "nvidia_smi": 1, "nvidia_said": 16, "nvidia_module": 1, "nvidia_ctk": 1,
    "dkms_nvidia": 1, "secure_boot": 1, "free_docker": 1, "free_apt": 1, "free_usr": 1,
    "free_home": 1, "workdir": 1, "data_dir": 1, "end": 1, "hostname": 1, "nic": 32, "route": 1,
}

NAME = re.compile(r"^[a-z0-9][a-z0-9+.~-]{0,99}$")             # a Debian package name
VERSION = re.compile(r"^[A-Za-z0-9.+~:-]{1,100}$")               # a Debian version
DRIVER = re.compile(r"^(\d{1,4})\.(\d{1,4})(?:\.(\d{1,4}))?$")  # an NVIDIA driver version
USER_OR_GROUP = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,31}\$?$")
SUPPORTED = {("debian", "12"): "debian-12", ("ubuntu", "22.04"): "ubuntu-22.04", ("ubuntu", "24.04"): "ubuntu-24.04"}
ARCHES = ("amd64", "arm64")


@dataclass(frozen=True)
class Package:
    name: str
    version: str
    status: str      # dpkg's abbreviation: "ii " installed, "rc " config files only, "iF " half-configured…

    @property
    def installed(self) -> bool:
        return self.status[:2] == "ii"


@dataclass(frozen=True)
class Gpu:
    driver: str
    name: str
    memory_mib: Optional[int] = None


@dataclass(frozen=True)
class Nic:
    """A network interface: its name, state (up, down…), link speed (Mbit/s, when the driver says)
    and IPv4 address with its prefix."""
    name: str
    state: str
    speed_mbit: Optional[int]
    address: str = ""


@dataclass(frozen=True)
class LockHolder:
    pid: int
    command: str
    lock: str

    def __str__(self) -> str:
        return f"{self.command or 'a process'} (pid {self.pid}) holds {self.lock}"


@dataclass(frozen=True)
class Facts:
    """One host, as its probe found it. Every field has been checked; `unknown` means unreadable."""

    os_id: str = "unknown"
    os_version: str = "unknown"
    os_codename: str = ""
    os_name: str = "unknown"
    arch: str = "unknown"
    foreign_archs: tuple[str, ...] = ()
    user: str = "unknown"
    uid: Optional[int] = None
    home: str = ""
    groups: tuple[str, ...] = ()       # this session's
    groups_db: tuple[str, ...] = ()    # the group database's (a new login's)
    sudo: str = "unknown"              # root | ok | password | denied | missing | unknown
    sudo_said: str = ""
    docker_cli: bool = False
    dockerd: bool = False
    docker_user: bool = False          # `docker info` works for this user as is
    engine_version: str = ""           # the running engine's, as the user or root sees it ("" when none answers)
    docker_root: str = "/var/lib/docker"
    runtimes: tuple[str, ...] = ()
    compose: str = ""                  # `docker compose version --short`
    docker_active: str = ""
    docker_enabled: str = ""
    packages: dict = field(default_factory=dict)       # name → Package (the ones the probe asks about)
    dpkg_broken: tuple[tuple[str, str], ...] = ()      # (package, dpkg's status) not fully installed
    apt_locks: tuple[LockHolder, ...] = ()
    running_pid: Optional[int] = None  # an earlier bootstrap's installation still at work on the host
    last_status: str = ""
    apt_lists: int = 0
    mirror: str = ""                   # the distribution's archive the host's apt uses
    repositories: tuple[str, ...] = () # every URI the host's apt sources name
    reboot_required: bool = False
    reboot_packages: str = ""
    kernel: str = ""
    gpu_pci: int = 0                   # NVIDIA display controllers on the PCI bus
    nvidia_smi: str = "missing"        # ok | failed | missing
    gpus: tuple[Gpu, ...] = ()
    nvidia_said: str = ""              # what a failing nvidia-smi said
    nvidia_module: bool = False
    nvidia_ctk: str = ""               # `nvidia-ctk --version`'s first line
    dkms_nvidia: str = ""
    secure_boot: Optional[bool] = None
    free_kb: dict = field(default_factory=dict)        # docker | apt | usr | home → KiB free (None: unknown)
    folders: dict = field(default_factory=dict)        # workdir | data_dir → writable | absent | not-writable | none
    hostname: str = ""
    nics: tuple[Nic, ...] = ()
    route_nic: str = ""                # the interface the route to the peer asked about leaves by
    complete: bool = False             # the probe ran to its end

    @property
    def release(self) -> Optional[str]:
        """debian-12, ubuntu-22.04 or ubuntu-24.04; None for anything else."""
        return SUPPORTED.get((self.os_id, self.os_version))

    @property
    def driver(self) -> Optional[tuple[int, ...]]:
        """The NVIDIA driver's version as numbers (the lowest of the GPUs'), if nvidia-smi answered."""
        versions = [tuple(int(p) for p in m.groups() if p is not None) for g in self.gpus if (m := DRIVER.match(g.driver))]
        return min(versions) if versions else None

    def installed(self, name: str) -> bool:
        pkg = self.packages.get(name)
        return pkg is not None and pkg.installed

    def in_docker_group(self, session: bool = True) -> bool:
        return "docker" in (self.groups if session else self.groups_db)


def parse(text: str) -> Facts:
    """The probe's answer → Facts. Never raises: what is missing or malformed stays `unknown`."""
    raw = _lines(text[:ANSWER_LIMIT])
    one = {k: v[0] for k, v in raw.items() if v}
    info = one.get("docker_info", "").split("|")
    return Facts(
        os_id=_word(one.get("os_id")), os_version=_word(one.get("os_version"), r"[0-9.]{1,10}"),
        os_codename=_word(one.get("os_codename"), default=""), os_name=one.get("os_name") or "unknown",
        arch=_word(one.get("arch")), foreign_archs=tuple(a for a in one.get("foreign_archs", "").split()
                                                          if re.fullmatch(r"[a-z0-9-]{1,20}", a))[:8],
        user=_word(one.get("user"), USER_OR_GROUP.pattern[1:-1]), uid=_int(one.get("uid")),
        home=one.get("home", "") if re.fullmatch(r"/[A-Za-z0-9._@+/-]{0,250}", one.get("home", "")) else "",
        groups=_groups(one.get("groups")), groups_db=_groups(one.get("groups_db")),
        sudo=_sudo(one.get("sudo"), one.get("sudo_said", "")), sudo_said=one.get("sudo_said", ""),
        docker_cli=bool(one.get("docker_cli")), dockerd=bool(one.get("dockerd")),
        docker_user=one.get("docker_user") == "ok",
        engine_version=info[0] if VERSION.fullmatch(info[0] or "-") else "",
        docker_root=info[1] if len(info) > 1 and re.fullmatch(r"/[A-Za-z0-9._/+-]{0,250}", info[1]) else "/var/lib/docker",
        runtimes=tuple(r for r in (info[2].split(",") if len(info) > 2 else []) if re.fullmatch(r"[A-Za-z0-9._-]{1,40}", r))[:16],
        compose=one.get("compose", "") if VERSION.fullmatch(one.get("compose", "") or "-") else "",
        docker_active=_word(one.get("docker_active"), default=""), docker_enabled=_word(one.get("docker_enabled"), default=""),
        packages=_packages(raw.get("pkg", [])), dpkg_broken=_broken(raw.get("dpkg_broken", [])),
        apt_locks=_locks(raw.get("apt_lock", [])), running_pid=_int(one.get("running")),
        last_status=_word(one.get("last_status"), r"[0-9]{1,3}", ""), apt_lists=_int(one.get("apt_lists")) or 0,
        mirror=archive_mirror(raw.get("source", []), raw.get("source822", []), _word(one.get("os_codename"), default="")),
        repositories=source_uris(raw.get("source", []), raw.get("source822", [])),
        reboot_required=one.get("reboot") == "yes", reboot_packages=one.get("reboot_pkgs", "")[:200],
        kernel=_word(one.get("kernel"), r"[A-Za-z0-9._+~-]{1,100}", ""), gpu_pci=min(_int(one.get("gpu_pci")) or 0, 64),
        nvidia_smi=one.get("nvidia_smi") if one.get("nvidia_smi") in ("ok", "failed", "missing") else "missing",
        gpus=_gpus(raw.get("nvidia_said", [])) if one.get("nvidia_smi") == "ok" else (),
        nvidia_said=" ".join(raw.get("nvidia_said", [])[:3])[:VALUE_LIMIT] if one.get("nvidia_smi") == "failed" else "",
        nvidia_module=one.get("nvidia_module") == "loaded", nvidia_ctk=one.get("nvidia_ctk", ""),
        dkms_nvidia=one.get("dkms_nvidia", ""), secure_boot=_secure_boot(one.get("secure_boot", "")),
        free_kb={k: _int(one.get(f"free_{k}")) for k in ("docker", "apt", "usr", "home")},
        folders={k: one.get(k) if one.get(k) in ("writable", "absent", "not-writable", "none") else "unknown"
                 for k in ("workdir", "data_dir")},
        hostname=_word(one.get("hostname"), r"[A-Za-z0-9][A-Za-z0-9._-]{0,252}", ""), nics=_nics(raw.get("nic", [])),
        route_nic=_route_nic(one.get("route", "")),
        complete=one.get("end") == "probe")


def _lines(text: str) -> dict[str, list[str]]:
    """key → its values in order (each printable, bounded); unknown keys and extra lines dropped."""
    found: dict[str, list[str]] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if not sep or key not in KEYS or len(found.get(key, [])) >= KEYS[key]:
            continue
        found.setdefault(key, []).append(printable(value).replace("\t", " ").strip()[:VALUE_LIMIT])
    return found


def _word(value: Optional[str], pattern: str = r"[a-z0-9._-]{1,40}", default: str = "unknown") -> str:
    return value if value is not None and re.fullmatch(pattern, value) else default


def _int(value: Optional[str]) -> Optional[int]:
    return int(value) if value is not None and re.fullmatch(r"[0-9]{1,15}", value) else None


def _groups(value: Optional[str]) -> tuple[str, ...]:
    return tuple(g for g in (value or "").split() if USER_OR_GROUP.fullmatch(g))[:64]


def _sudo(value: Optional[str], said: str) -> str:
    if value in ("root", "ok", "missing"):
        return value
    if value == "refused":
        return "password" if "password" in said.lower() else "denied"
    return "unknown"


def _packages(lines: list[str]) -> dict[str, Package]:
    found = {}
    for line in lines:
        parts = line.split(" ", 2)
        if len(parts) == 3 and NAME.fullmatch(parts[0]) and VERSION.fullmatch(parts[1]) \
                and re.fullmatch(r"[uihrp][ncUFHWTi]?[ R]?", parts[2].ljust(3)[:3]):
            found.setdefault(parts[0], Package(parts[0], parts[1], parts[2].ljust(3)[:3]))
    return found


def _broken(lines: list[str]) -> tuple[tuple[str, str], ...]:
    found = []
    for line in lines:
        parts = line.split(" ", 1)
        if len(parts) == 2 and NAME.fullmatch(parts[0].split(":")[0]) and re.fullmatch(r"[a-z][A-Za-z][ R]?", parts[1]):
            found.append((parts[0], parts[1]))
    return tuple(found)


def _locks(lines: list[str]) -> tuple[LockHolder, ...]:
    found = []
    for line in lines:
        parts = line.split(" ")
        if len(parts) >= 3 and re.fullmatch(r"[0-9]{1,10}", parts[0]) and parts[-1].startswith("/var/"):
            command = " ".join(parts[1:-1])
            found.append(LockHolder(int(parts[0]), command[:40] if re.fullmatch(r"[\x20-\x7e]{0,40}", command) else "",
                                    parts[-1]))
    return tuple(found)


def _gpus(lines: list[str]) -> tuple[Gpu, ...]:
    """`driver, name[, memory MiB]` per GPU (the memory only when nvidia-smi was asked for it)."""
    gpus = []
    for line in lines:
        driver, sep, rest = line.partition(",")
        if not (sep and DRIVER.fullmatch(driver.strip())):
            continue
        name, comma, memory = rest.rpartition(",")
        size = re.fullmatch(r"\s*(\d{1,7}) MiB\s*", memory) if comma else None
        gpus.append(Gpu(driver.strip(), (name if size else rest).strip()[:80], int(size.group(1)) if size else None))
    return tuple(gpus)


NIC_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,30}$")


def _nics(lines: list[str]) -> tuple[Nic, ...]:
    """`name state speed address` lines; a speed the driver does not know (-1, -) is None."""
    found = []
    for line in lines:
        parts = line.split()
        if len(parts) != 4 or not NIC_NAME.match(parts[0]) or not re.fullmatch(r"[a-z]{1,20}", parts[1]):
            continue
        speed = int(parts[2]) if re.fullmatch(r"[0-9]{1,7}", parts[2]) and int(parts[2]) > 0 else None
        address = parts[3] if re.fullmatch(r"[0-9.]{7,15}/[0-9]{1,2}", parts[3]) else ""
        found.append(Nic(parts[0], parts[1], speed, address))
    return tuple(found)


def _route_nic(route: str) -> str:
    """The `dev` of `ip -o route get`'s line."""
    match = re.search(r"\bdev\s+(\S+)", route)
    return match.group(1) if match and NIC_NAME.match(match.group(1)) else ""


def _secure_boot(text: str) -> Optional[bool]:
    """mokutil's `SecureBoot enabled|disabled`, or the EFI variable's fifth byte (1: on)."""
    lowered = text.lower()
    if "secureboot enabled" in lowered:
        return True
    if "secureboot disabled" in lowered or "not supported" in lowered:
        return False
    if lowered.startswith("efivar"):
        value = lowered[len("efivar"):].strip()
        return None if not value else value == "1"
    return None
