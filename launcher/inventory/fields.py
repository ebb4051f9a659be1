"""The inventory's value types (was in schema.py): names, ports, the paths on a host (never a
system folder for a workdir) and on this machine, text without control characters, a chain of jump
hosts, a host's GPUs; and, for each, the words an error uses to say what it expects."""
from __future__ import annotations

from typing import Annotated, List, Literal, Union

from pydantic import AfterValidator, Field, StringConstraints

from launcher.inventory import jumps
from trainer.spec.validation import StrictIntT

NAME_RE = r"^[a-z0-9](?:[a-z0-9-]{0,38}[a-z0-9])?$"
USER_RE = r"^[a-z_][a-z0-9_-]{0,31}$"
IMAGE_RE = (r"^[a-z0-9]+(?:[._-][a-z0-9]+)*(?::[0-9]{1,5})?(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*"
            r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[a-f0-9]{64})?$")

Name = Annotated[str, StringConstraints(pattern=NAME_RE)]
Port = Annotated[StrictIntT, Field(ge=1, le=65535)]


def _no_dot_dot(path: str) -> str:
    if ".." in path.split("/"):
        raise ValueError("no '..' component")
    return path


# Folders no workdir may be, or be inside: tfcompose writes there, and `down --purge` deletes there.
SYSTEM_TREES = ("/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/run", "/sbin",
                "/sys", "/usr", "/var/lib", "/var/run")
SYSTEM_FOLDERS = ("/", "/home", "/mnt", "/media", "/opt", "/root", "/srv", "/tmp", "/var")


def system_path(path: str) -> bool:
    """A system folder itself, or a folder inside a system tree."""
    path = path.rstrip("/") or "/"
    return path in SYSTEM_FOLDERS or any(path == t or path.startswith(t + "/") for t in SYSTEM_TREES)


def _not_system(path: str) -> str:
    if system_path(path):
        raise ValueError("a folder of its own, not a system folder such as / or /usr")
    return path


RemotePath = Annotated[str, StringConstraints(pattern=r"^/(?:[A-Za-z0-9._@+-]+/?)*$", max_length=1024),
                       AfterValidator(_no_dot_dot)]
WorkDir = Annotated[RemotePath, AfterValidator(_not_system)]
# A value that reaches a compose file and a container's environment: no control characters
# (DEL and NEL break the YAML; an escape sequence would reach every terminal that shows it).
CONTROL_CHARS = r"\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029"
PlainText = Annotated[str, StringConstraints(max_length=4096, pattern=f"^[^{CONTROL_CHARS}]*$")]
LocalPath = Annotated[str, StringConstraints(min_length=1, max_length=4096, pattern=r"^[^\x00\n]*$")]


def _each_gpu_once(ids: list[int]) -> list[int]:
    if len(set(ids)) != len(ids):
        raise ValueError("each GPU id once")
    return ids


def _jump_chain(text: str) -> str:
    jumps.parse(text)
    return text


JumpChain = Annotated[str, StringConstraints(min_length=1, max_length=1024), AfterValidator(_jump_chain)]


GpuList = Annotated[List[Annotated[StrictIntT, Field(ge=0, le=1023)]], Field(min_length=1, max_length=64),
                    AfterValidator(_each_gpu_once)]
Gpus = Union[Literal["all"], Annotated[StrictIntT, Field(ge=0, le=1024)], GpuList]

PORT = "an integer 1–65535"
GPUS = "'all', a GPU count (0 for CPU only), or a list of GPU ids like [0, 1]"
WORKDIR = "an absolute path of letters, digits and ._@+- (no '..', spaces or ':')"
WORKDIR_OWN = WORKDIR[:-1] + "; not a system folder such as /, /home or /usr)"
NIC = "a network interface name or NCCL filter such as eth0, =eth0 or ^docker,lo"
SHM = "a size such as 2g or 512m, or 'host' (ipc: host)"
USER = "a user name of lowercase letters, digits, _ and -"
JUMP = ("a jump host as [user@]host[:port], a comma-separated chain of them (first hop first), "
        "or none to connect directly")
LEASE_DIR = WORKDIR_OWN[:-1] + "; every user of the host writes there)"
