"""`tfcompose init`'s decisions, in pure code: from what each host said it is (facts.py) to a
starter inventory's text, every choice commented so that the user can see why and change it.

- a host's name: its own host name, made a valid name (lowercase letters, digits, `-`), or `hN`;
- its GPUs: as many as `nvidia-smi` lists (0: CPU only), their model and memory in a comment;
- the chief: the best-connected host: the fastest link the route to the others leaves by, then
  the most GPUs, then the first given;
- `nic`: the interface that route leaves by, unless it is a loopback or virtual one (then a
  comment says to set it);
- `bootstrap:`: a hint for each host without a usable Docker or compose v2;
- a small search: two built-in candidates, two learning rates, 3 epochs on generated images, so
  that the first `up` shows the cluster working before any data is copied; in parallel mode when
  the hosts' GPU counts differ (sync needs equal replica counts).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from launcher.bootstrap.facts import Facts

VIRTUAL = re.compile(r"^(lo|docker\d*|br-.*|virbr\d*|veth.*|cni\d*|flannel.*|cali.*|vxlan.*|podman\d*|lxcbr\d*)$")
YAML_PLAIN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/@:+~-]*$")


@dataclass(frozen=True)
class Target:
    """A host as given on the command line: `[user@]host[:port]`."""
    address: str
    user: Optional[str] = None
    port: Optional[int] = None


@dataclass(frozen=True)
class Seen:
    """One host and what its probe found."""
    target: Target
    facts: Facts


def parse_target(text: str) -> Target:
    """`[user@]host[:port]`; ValueError names what is wrong."""
    user, at, rest = text.rpartition("@")
    host, port = rest, None
    if rest.count(":") == 1:
        host, _, number = rest.partition(":")
        if not number.isdigit() or not 1 <= int(number) <= 65535:
            raise ValueError(f"{text!r}: the port after ':' must be a number 1–65535")
        port = int(number)
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,252}", host):
        raise ValueError(f"{text!r}: expected [user@]host[:port], a host name or IP address")
    if at and not re.fullmatch(r"[a-z_][a-z0-9_-]{0,31}", user):
        raise ValueError(f"{text!r}: the user before '@' must be a user name of lowercase letters, digits, _ and -")
    return Target(host, user or None, port)


def names(seen: list[Seen]) -> list[str]:
    """Each host's name in the inventory: its own short host name made valid, else its address's,
    else hN; the second of two alike gets -2."""
    out: list[str] = []
    for i, s in enumerate(seen):
        base = _as_name(s.facts.hostname.split(".")[0]) or _as_name(s.target.address.split(".")[0]) or f"h{i}"
        name, n = base, 2
        while name in out:
            name, n = f"{base[:37]}-{n}", n + 1
        out.append(name)
    return out


def _as_name(text: str) -> str:
    name = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")[:40].strip("-")
    return name if name and not name.isdigit() else ""


def link_speed(facts: Facts) -> int:
    """The Mbit/s of the interface the route to the others leaves by (0: unknown)."""
    nic = next((n for n in facts.nics if n.name == facts.route_nic), None)
    return nic.speed_mbit or 0 if nic else 0


def chief_index(seen: list[Seen]) -> int:
    """The best-connected host: the fastest route link, then the most GPUs, then the first given."""
    return max(range(len(seen)), key=lambda i: (link_speed(seen[i].facts), len(seen[i].facts.gpus), -i))


def docker_ready(facts: Facts) -> bool:
    return bool(facts.engine_version) and facts.docker_user and facts.compose[:1].isdigit() and int(
        facts.compose.split(".")[0]) >= 2


def _gpu_comment(facts: Facts) -> str:
    if not facts.gpus:
        return "no GPU found (nvidia-smi " + {"missing": "absent", "failed": "failed"}.get(facts.nvidia_smi, "said none") + ")"
    models = {}
    for gpu in facts.gpus:
        memory = f", {gpu.memory_mib / 1024:.0f} GiB" if gpu.memory_mib else ""
        models[f"{gpu.name}{memory}"] = models.get(f"{gpu.name}{memory}", 0) + 1
    return "; ".join(f"{n}× {model}" for model, n in models.items()) + f"; driver {facts.gpus[0].driver}"


def _free(facts: Facts) -> str:
    parts = [f"{kb / 1048576:.0f} GB free {where}" for key, where in (("docker", "at Docker's root"), ("home", "in ~"))
             if (kb := facts.free_kb.get(key))]
    return ", ".join(parts) or "free space unknown"


def _docker_comment(facts: Facts) -> str:
    if docker_ready(facts):
        return f"Docker {facts.engine_version}, compose {facts.compose}"
    if not facts.engine_version and not facts.docker_cli:
        return "no Docker: `tfcompose bootstrap` installs it"
    if not facts.docker_user:
        return "Docker there, but not usable by this user (not in the docker group): `tfcompose bootstrap` adds it"
    return f"Docker {facts.engine_version or '?'} without compose v2: `tfcompose bootstrap` adds it"


def _nic_lines(facts: Facts) -> tuple[Optional[str], str]:
    """(the nic to write, or None; the comment saying why)."""
    if not facts.route_nic:
        return None, "the route to the other hosts could not be read (no `ip` there, or a single host): `nic` unset"
    speed = link_speed(facts)
    said = f"the route to the other hosts leaves by {facts.route_nic}" + (f" ({speed} Mbit/s)" if speed else "")
    if VIRTUAL.match(facts.route_nic):
        return None, said + ", a loopback or virtual interface: set `nic` to the one that reaches the others"
    return facts.route_nic, said


def _q(value: str) -> str:
    return value if YAML_PLAIN.match(value) else "'" + value.replace("'", "''") + "'"


def inventory_text(seen: list[Seen], cluster: str, schema: str, ssh: dict, command: str) -> str:
    """The starter inventory, every choice commented. `ssh`: the ssh: settings to write (user,
    identity_file, known_hosts); `command`: how it was made, for its header."""
    host_names, chief = names(seen), chief_index(seen)
    counts = {len(s.facts.gpus) for s in seen}
    need_bootstrap = [n for n, s in zip(host_names, seen) if not docker_ready(s.facts)]
    out = [f"# yaml-language-server: $schema={schema}",
           f"# A starter inventory written by `{command}` from what each host said it is.",
           "# Every key, its default and what it does: inventory.example.yaml, or `tfcompose schema`.",
           "#   tfcompose validate -i THIS_FILE     (checks it; contacts nothing)",
           "#   tfcompose up -i THIS_FILE --wait    (trains on every host, then collects into runs/)", "",
           f"cluster: {cluster}", ""]
    if ssh:
        out.append("ssh:")
        out += [f"  {key}: {_q(str(value))}" for key, value in ssh.items()]
        out.append("")
    out += ["defaults:", "  gpus: all                      # each host's own count below", ""]
    out.append("hosts:                           # the chief (task 0) is the best-connected host: the fastest link, then the most GPUs")
    for i, (name, s) in enumerate(zip(host_names, seen)):
        out += _host_lines(name, s, i == chief, _shared_port(seen, i))
    if need_bootstrap:
        out += ["", f"# {', '.join(need_bootstrap)}: no usable Docker with compose v2 yet. `tfcompose bootstrap -i THIS_FILE`",
                "# shows what it would install there (Docker, compose v2, the docker group; the NVIDIA toolkit on GPU hosts),",
                "# and with --yes installs it.",
                "bootstrap:", "  docker: distro                 # the OS's own docker.io (docker: Docker's apt repository)"]
    out += ["", "# A small search to start with: generated images, so the first `up` needs no data on the hosts.",
            "# Your images: dataset {kind: image_folder, train_dir: /data/train} and defaults.data_dir, the folder on each host.",
            "train:", "  dataset: {kind: synthetic, image_size: [56, 56]}", "  candidates: [small_cnn, deep_cnn]",
            "  epochs: 3", "  search:"]
    if len(counts) > 1:
        out.append("    mode: parallel                 # the hosts' GPU counts differ: each host trains its own trials")
    out += ["    learning_rates: [0.01, 0.001]  # a grid: 2 candidates × 2 rates = 4 trials", ""]
    return "\n".join(out)


def _shared_port(seen: list[Seen], i: int) -> Optional[int]:
    """A tf_port of its own for the second and later host given at one address (one machine,
    several sshd): two containers with host networking cannot listen on one port."""
    before = sum(1 for s in seen[:i] if s.target.address == seen[i].target.address)
    return 2222 + 100 * before if before else None      # clear of search.port (2223)


def _host_lines(name: str, s: Seen, chief: bool, tf_port: Optional[int] = None) -> list[str]:
    f, t = s.facts, s.target
    nic, why = _nic_lines(f)
    os_name = f"{f.os_name}, {f.arch}" if f.os_name != "unknown" else "OS unknown"
    lines = [f"  - name: {name}", f"    # {os_name}; {_docker_comment(f)}; {_free(f)}",
             f"    address: {_q(t.address)}"]
    if chief:
        lines.append("    chief: true")
    if t.user:
        lines.append(f"    ssh_user: {t.user}")
    if t.port:
        lines.append(f"    ssh_port: {t.port}")
    if tf_port:
        lines.append(f"    tf_port: {tf_port}                 # another host given is at the same address: a port of its own")
    lines.append(f"    gpus: {len(f.gpus)}                        # {_gpu_comment(f)}")
    lines.append(f"    # {why}")
    if nic:
        lines.append(f"    nic: {nic}")
    return lines
