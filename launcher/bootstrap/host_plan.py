"""A host's bootstrap plan as data (was in decide.py): what the inventory wants of the host
(`Wants`), each step (`Step`) in the order steps are taken (`ORDER`), the plan itself (`HostPlan`:
its steps, a refusal, what is left to the admin, notes), and where a package comes from, said as a
person reads it (`packages_text`)."""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Optional

# Where a package comes from: the host's distribution archive, the next release's (Debian 12's
# compose), Docker's or NVIDIA's apt repository.
ARCHIVE, NEXT_RELEASE, DOCKER_REPO, NVIDIA_REPO = "archive", "next-release", "docker", "nvidia"
NEXT = {"debian-12": "trixie"}
# The order steps are taken in on a host (commands.APPLY runs them in this order too).
ORDER = ("follow", "finish-dpkg", "repository", "install", "start", "group", "folders", "nvidia-runtime", "gpu-check")


@dataclass(frozen=True)
class Wants:
    """What the inventory asks of one host."""

    gpus: object = 0                       # the host's `gpus` (0: CPU only)
    folders: tuple[tuple[str, str], ...] = ()   # (what, path): workdir, and data_dir when `up` fills it
    docker: str = "distro"                 # distro | docker: where an engine comes from
    offline: bool = False
    become_pass: bool = False              # a sudo password was given (--ask-become-pass)
    toolkit_in_debs: bool = False          # bootstrap.debs holds nvidia-container-toolkit


@dataclass(frozen=True)
class Step:
    kind: str                  # follow | finish-dpkg | repository | install | start | group | folders | nvidia-runtime | gpu-check
    what: str                  # what is done, as a person says it
    why: str = ""
    packages: tuple[tuple[str, str], ...] = ()     # install: (name, origin)
    paths: tuple[str, ...] = ()                    # folders: the paths
    repositories: tuple[str, ...] = ()             # repository: docker | nvidia

    def line(self) -> str:
        return self.what + (f" — {self.why}" if self.why else "")


@dataclass(frozen=True)
class HostPlan:
    host: str
    release: Optional[str] = None
    arch: str = ""
    steps: tuple[Step, ...] = ()
    refused: Optional[str] = None          # nothing is done on this host, and why
    blockers: tuple[str, ...] = ()         # what the admin must do (with the fix); the host is not ready until then
    notes: tuple[str, ...] = ()
    waits_for: tuple[str, ...] = ()        # who holds apt's lock now

    @property
    def nothing_to_do(self) -> bool:
        return not self.steps and self.refused is None

    @property
    def ready(self) -> bool:
        return self.nothing_to_do and not self.blockers

    @property
    def packages(self) -> tuple[tuple[str, str], ...]:
        return tuple(p for s in self.steps for p in s.packages)

    def kinds(self) -> list[str]:
        return [s.kind for s in self.steps]


def packages_text(packages, release: Optional[str]) -> str:
    """`docker.io, docker-compose (compose v2, from Debian trixie: …)`: the names, each run of them
    from one place followed by where from."""
    where = {NEXT_RELEASE: f"compose v2, from Debian {NEXT.get(release, 'the next release')}: Debian 12 packages none",
             DOCKER_REPO: "Docker's repository", NVIDIA_REPO: "NVIDIA's repository", "debs": "from bootstrap.debs"}
    parts = []
    for origin, run in itertools.groupby(packages, key=lambda p: p[1]):
        parts.append(", ".join(name for name, _ in run) + (f" ({where[origin]})" if origin in where else ""))
    return ", ".join(parts)
