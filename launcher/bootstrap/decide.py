"""What `tfcompose bootstrap` does to one host, decided from its facts alone (pure: no I/O).

`decide(facts, wants)` → a HostPlan: the steps to take (each with why), what is refused (nothing
is then done on that host), what is left to the admin (a driver to install, a reboot: each with
the exact fix for that OS) and notes. An empty plan is "nothing to do". The same function judges
a host again after its installation, so "ready" means exactly what a second run would find.

Where Docker comes from (the inventory's `bootstrap.docker`), for a host with no engine:
- distro (the default): the OS's own docker.io. Compose v2 from Ubuntu's docker-compose-v2; on
  Debian 12, which packages none, the next release's docker-compose (a static Go binary whose only
  dependency, libc6 ≥ 2.34, bookworm meets), fetched through the host's own mirror and verified
  against that release's signed index. Chosen as the default because it needs nothing but the
  mirror the box already uses (labs and hospitals often mirror only their distribution), adds no
  third-party key, is patched by the OS's own security updates (unattended-upgrades covers the
  distribution's security pocket, not third-party repositories), and keeps Docker's classic image
  store, which takes `up`'s layer deltas (Docker 29 from Docker's repository starts new installs
  on the containerd store, which takes only whole images).
- docker: Docker's apt repository (docker-ce, docker-ce-cli, containerd.io, the buildx and compose
  plugins): newer engines, Docker's own support.
An engine already there is kept, whichever it is: only what it lacks is added, and apt runs with
--no-remove, so no package is ever removed. The NVIDIA driver is judged by driver.py; the plan's
types are host_plan.py's.
"""
from __future__ import annotations

from typing import Optional

from launcher.bootstrap.driver import driver_problem
from launcher.bootstrap.facts import ARCHES, Facts
from launcher.bootstrap.host_plan import (ARCHIVE, DOCKER_REPO, NEXT_RELEASE, NVIDIA_REPO, ORDER, HostPlan, Step, Wants,
                                          packages_text)
from launcher.bootstrap.repositories import BY_NAME, configured

DISTRO_ENGINE = {"debian-12": [("docker.io", ARCHIVE), ("docker-compose", NEXT_RELEASE)],
                 "ubuntu-22.04": [("docker.io", ARCHIVE), ("docker-compose-v2", ARCHIVE)],
                 "ubuntu-24.04": [("docker.io", ARCHIVE), ("docker-compose-v2", ARCHIVE)]}
DOCKER_ENGINE = [(name, DOCKER_REPO) for name in ("docker-ce", "docker-ce-cli", "containerd.io",
                                                  "docker-buildx-plugin", "docker-compose-plugin")]
TOOLKIT = [("nvidia-container-toolkit", NVIDIA_REPO)]
# What bootstrap installs, and what those pull in: an interrupted dpkg run of these is ours to finish.
OURS = {"docker.io", "docker-compose", "docker-compose-v2", "docker-ce", "docker-ce-cli", "containerd.io",
        "containerd", "runc", "tini", "docker-buildx-plugin", "docker-compose-plugin", "ca-certificates",
        "nvidia-container-toolkit", "nvidia-container-toolkit-base", "libnvidia-container1",
        "libnvidia-container-tools", "iptables", "libip4tc2", "libip6tc2", "libnetfilter-conntrack3",
        "libnfnetlink0", "libnftnl11", "libnftables1", "libjansson4", "libxtables12", "netbase", "adduser",
        "libdevmapper1.02.1", "dmsetup", "libsystemd0", "pigz", "docker-ce-rootless-extras", "slirp4netns",
        "libslirp0", "libintl-perl", "libbsd0", "libmd0", "libedit2", "apparmor", "cgroupfs-mount"}

MIN_INSTALL_KB = 1 << 20         # free space where packages unpack (/usr) and download (/var/cache/apt)
MIN_DOCKER_ROOT_KB = 8 << 20     # below this at Docker's root, say that the trainer image will not fit well
# `systemctl is-enabled docker` answers that start it at boot ("": no systemctl to ask).
BOOTS = ("enabled", "enabled-runtime", "static", "indirect", "generated", "alias", "")
RELEASE_NAMES = "Debian 12 and Ubuntu 22.04 and 24.04"


def decide(host: str, f: Facts, w: Wants) -> HostPlan:
    """One host's plan from its facts and what the inventory wants of it."""
    if not f.complete:
        return HostPlan(host, refused="its answer to the probe was cut short or unreadable; nothing was changed")
    if f.release is None:
        said = f"{f.os_name} ({f.os_id} {f.os_version})" if f.os_name != "unknown" else "an OS without a readable /etc/os-release"
        return HostPlan(host, refused=f"runs {said}; tfcompose bootstrap supports {RELEASE_NAMES}")
    if f.arch not in ARCHES:
        return HostPlan(host, f.release, f.arch, refused=f"is {f.arch}; tfcompose bootstrap supports amd64 and arm64")
    if f.running_pid is not None:
        return HostPlan(host, f.release, f.arch, steps=(Step("follow", f"follow the installation an earlier tfcompose "
                        f"bootstrap left running (pid {f.running_pid}) to its end, then look again"),))
    broken = _broken_dpkg(f)
    if isinstance(broken, str):
        return HostPlan(host, f.release, f.arch, refused=broken)
    blockers: list[str] = []
    docker_steps = _docker_steps(f, w, blockers)
    gpu_steps, gpu_blockers, gpu_notes = _gpu_part(f, w)
    installs = [s for s in docker_steps + gpu_steps if s.kind == "install"]
    steps = (list(broken) + _repository_step(installs, f, w) + installs
             + [s for s in docker_steps + gpu_steps if s.kind != "install"] + _folder_steps(f, w, blockers))
    steps.sort(key=lambda s: ORDER.index(s.kind))
    blockers += gpu_blockers
    notes = gpu_notes + _notes(f, w)
    refused = _refusal(f, w, steps)
    return HostPlan(host, f.release, f.arch, tuple(steps) if refused is None else (), refused, tuple(blockers),
                    tuple(notes), tuple(str(h) for h in f.apt_locks) if _installs(steps) else ())


def _installs(steps: list[Step]) -> bool:
    return any(s.kind in ("install", "finish-dpkg", "repository") for s in steps)


def _broken_dpkg(f: Facts) -> list[Step] | str:
    """An interrupted dpkg run: ours (the packages bootstrap installs) is finished; anything else is
    the admin's, and refused."""
    if not f.dpkg_broken:
        return []
    listed = ", ".join(f"{name} ({_DPKG_STATE.get(state[1], state)})" for name, state in f.dpkg_broken[:6])
    if all(name.split(":")[0] in OURS for name, _ in f.dpkg_broken):
        return [Step("finish-dpkg", "finish the installation an interrupted run left (dpkg --configure -a)", listed)]
    return (f"dpkg has unfinished work tfcompose did not start: {listed}. Finish it first (on the host: "
            "`sudo dpkg --configure -a`, then `sudo apt-get -f install`), then run tfcompose bootstrap again; "
            "nothing was changed")


_DPKG_STATE = {"U": "unpacked", "F": "half-configured", "H": "half-installed", "W": "awaiting triggers",
               "T": "triggers pending"}


def engine_flavour(f: Facts) -> Optional[str]:
    """distro (docker.io), docker (docker-ce), other (a dockerd no package owns: a snap, a static
    binary) or None (no engine)."""
    if f.installed("docker.io"):
        return "distro"
    if f.installed("docker-ce"):
        return "docker"
    return "other" if f.dockerd or f.engine_version else None


def compose_v2(f: Facts) -> bool:
    head = f.compose.lstrip("v").split(".")[0]
    return head.isdigit() and int(head) >= 2


def _docker_steps(f: Facts, w: Wants, blockers: list[str]) -> list[Step]:
    flavour = engine_flavour(f)
    packages: list[tuple[str, str]] = []
    if flavour is None:
        packages = list(DISTRO_ENGINE[f.release] if w.docker == "distro" else DOCKER_ENGINE)
    elif not compose_v2(f):
        if flavour == "other":
            blockers.append("Docker here comes from no package tfcompose knows (a snap or a static install) and has no "
                            "compose v2: install the compose plugin for it yourself (docs.docker.com/compose/install/linux)")
        else:
            packages = [p for p in (DISTRO_ENGINE[f.release] if flavour == "distro" else DOCKER_ENGINE)
                        if "compose" in p[0]]
    steps = []
    if packages:
        steps.append(Step("install", "install " + packages_text(packages, f.release), _engine_why(flavour, w, f),
                          packages=tuple(packages)))
    if flavour != "other" and (flavour is None or not f.engine_version or f.docker_enabled not in BOOTS):
        steps.append(Step("start", "enable Docker at boot and start it"))
    if f.uid != 0 and not f.in_docker_group(session=False):
        steps.append(Step("group", f"add {f.user} to the docker group", "so it may use Docker without sudo; "
                          "tfcompose then logs in again"))
    return steps


def _engine_why(flavour: Optional[str], w: Wants, f: Facts) -> str:
    if flavour is None:
        return f"no Docker Engine yet (bootstrap.docker: {w.docker})"
    found = f"found: {f.compose}" if f.compose else "none found"
    return f"Docker {f.engine_version or 'is installed'} but no compose v2 ({found})"


def _folder_steps(f: Facts, w: Wants, blockers: list[str]) -> list[Step]:
    """The folders `up` writes, made (owned by the SSH user) when absent; an existing one that user
    cannot write is the admin's to change, never chowned here."""
    missing = []
    for what, path in w.folders:
        state = f.folders.get(what, "unknown")
        if state == "absent":
            missing.append(path)
        elif state == "not-writable":
            blockers.append(f"{what} {path} exists but {f.user} cannot write it: `sudo chown {f.user} {path}` on the "
                            f"host, or choose another {what}")
    return [Step("folders", "make " + ", ".join(missing) + f" (owned by {f.user})", "`up` writes there",
                 paths=tuple(missing))] if missing else []


def _gpu_part(f: Facts, w: Wants) -> tuple[list[Step], list[str], list[str]]:
    """The NVIDIA part: the toolkit and Docker's nvidia runtime on a host with GPUs and a working
    driver. The driver itself is never installed here: what is wrong with it is said, with the fix."""
    if w.gpus == 0:
        return [], [], (["NVIDIA GPUs present but not asked for (gpus: 0): the NVIDIA part is skipped"]
                        if f.gpus or f.gpu_pci else [])
    if not (f.gpus or f.gpu_pci or f.nvidia_smi != "missing"):
        return [], [f"no NVIDIA GPU found (no nvidia-smi, no NVIDIA display controller on the PCI bus), but the "
                    f"inventory asks for gpus: {w.gpus} here: set `gpus: 0` for this host (CPU only)"], []
    problem = driver_problem(f)
    if problem:
        return [], [problem], []
    steps = []
    if not (f.nvidia_ctk or f.installed("nvidia-container-toolkit")):
        origin = NVIDIA_REPO if not w.toolkit_in_debs else "debs"
        packages = (("nvidia-container-toolkit", origin),)
        steps.append(Step("install", "install " + packages_text(packages, f.release), "GPUs in containers",
                          packages=packages))
    if "nvidia" not in f.runtimes:
        steps.append(Step("nvidia-runtime", "give Docker the nvidia runtime (nvidia-ctk runtime configure "
                          "--runtime=docker) and restart it"))
    if steps:
        steps.append(Step("gpu-check", "check that a container sees the GPUs", f"nvidia-smi lists {len(f.gpus)}"))
    want = _gpus_wanted(w.gpus)
    blockers = [f"the inventory asks for {want} GPU(s) here but nvidia-smi lists {len(f.gpus)}"] if want > len(f.gpus) else []
    return steps, blockers, []


def _gpus_wanted(gpus) -> int:
    if gpus == "all":
        return 1
    if isinstance(gpus, (list, tuple)):
        return max(gpus) + 1
    return gpus if isinstance(gpus, int) else 0


def _repository_step(steps: list[Step], f: Facts, w: Wants) -> list[Step]:
    """Docker's and NVIDIA's repositories, where packages come from them, the host fetches them
    itself (online) and its sources do not name them yet; offline, this machine resolves them."""
    origins = {origin for s in steps for _, origin in s.packages}
    wanted = [r for r in (DOCKER_REPO, NVIDIA_REPO) if r in origins and not configured(BY_NAME[r], f.repositories)]
    if not wanted or w.offline:
        return []
    names = {DOCKER_REPO: "Docker's", NVIDIA_REPO: "NVIDIA's"}
    return [Step("repository", "add " + " and ".join(names[r] for r in wanted) + " apt repository", "its key checked "
                 "against the published fingerprint", repositories=tuple(wanted))]


def _refusal(f: Facts, w: Wants, steps: list[Step]) -> Optional[str]:
    """Why nothing may be done on this host, if anything: root is needed and not to be had, or
    there is no room to install."""
    if not steps or f.sudo in ("root", "ok") or (f.sudo == "password" and w.become_pass):
        return _disk_refusal(f, w, steps)
    if f.sudo == "password":
        return (f"sudo asks {f.user} for a password. Either let {f.user} use sudo without one there (`sudo visudo -f "
                f"/etc/sudoers.d/tfcompose` with the line `{f.user} ALL=(ALL) NOPASSWD: ALL`), or run `tfcompose "
                "bootstrap --ask-become-pass`, which asks for it once; nothing was changed")
    why = {"missing": "sudo is not installed", "denied": f"{f.user} may not use sudo ({f.sudo_said[:100]})"}.get(
        f.sudo, "whether sudo works could not be read")
    return (f"{why}, and installing needs root: log in as a user who may use sudo (ssh.user, or this host's "
            "ssh_user); nothing was changed")


def _disk_refusal(f: Facts, w: Wants, steps: list[Step]) -> Optional[str]:
    if not _installs(steps):
        return None
    places = [("usr", "/usr", "packages unpack")] + ([] if w.offline else [("apt", "/var/cache/apt/archives",
                                                                            "apt downloads")])
    for key, path, what in places:
        free = f.free_kb.get(key)
        if free is not None and free < MIN_INSTALL_KB:
            return (f"only {free / 1024:,.0f} MB free at {path} ({what}); installing needs about "
                    f"{MIN_INSTALL_KB // 1024:,} MB: free some space (`sudo apt-get clean`, old kernels, /var/log), "
                    "then run tfcompose bootstrap again; nothing was changed")
    return None


def _notes(f: Facts, w: Wants) -> list[str]:
    notes = []
    free = f.free_kb.get("docker")
    if free is not None and free < MIN_DOCKER_ROOT_KB:
        notes.append(f"only {free / (1 << 20):.1f} GB free at {f.docker_root} (Docker's root): the trainer image takes "
                     "about 3 GB there, and `up` wants 2 GB more in the workdir")
    if f.reboot_required and not f.gpus:
        pending = f" ({f.reboot_packages.strip()})" if f.reboot_packages.strip() else ""
        notes.append(f"a reboot is pending{pending}; Docker works without it")
    if f.release == "debian-12" and f.installed("docker-compose") and not compose_v2(f) and engine_flavour(f) != "docker":
        notes.append("Debian 12's docker-compose 1.x (the `docker-compose` command) is upgraded to 2.x, whose command "
                     "is `docker compose`")
    return notes
