"""`tfcompose bootstrap`: bare Debian 12 / Ubuntu 22.04, 24.04 boxes → ready tfcompose hosts.

On every host at once (the Group): read its facts once (facts.py), decide (decide.py), and, with
`--yes`, do it: ship what the host needs from here (keys of Docker's or NVIDIA's repository,
your .debs, or for offline hosts every .deb it lacks: offline.py), start the installation on the
host (commands.APPLY, detached, so a lost link does not cut it off), follow it (follow.py), then log in again
(so the docker group counts) and judge the host again from fresh facts: ready is what a second
run would call "nothing to do". Each host stands alone: one host's failure stops no other.
"""
from __future__ import annotations

import contextlib

import time
from dataclasses import dataclass, field, replace
from typing import Optional

from launcher.bootstrap import commands, facts as facts_mod, offline as offline_mod, ship_debs
from launcher.bootstrap.decide import decide
from launcher.bootstrap.follow import follow
from launcher.bootstrap.host_plan import NEXT, NEXT_RELEASE, HostPlan, Wants
from launcher.bootstrap.repositories import BY_NAME, KeyError_, deb822, key_for
from launcher.errors import RemoteError, summary
from launcher.files import cache_root
from launcher.inventory.checks import bootstrap_debs
from launcher.inventory.model import Cluster, Host
from launcher.reporter import transfer_reporter
from launcher.ssh.group import Group
from launcher.text import hide, one_line


class Secret:
    """The sudo password: given to sudo on stdin only; never printed, logged or put on a command line,
    and masked in whatever a host says back (a sudo that repeats it on stderr: launcher/text.py)."""

    def __init__(self, value: str):
        self._value = value
        hide([value])

    def stdin(self) -> bytes:
        return (self._value + "\n").encode()

    def __repr__(self) -> str:
        return "Secret(…)"

    __str__ = __repr__


@dataclass(frozen=True)
class Options:
    yes: bool = False
    offline: Optional[bool] = None         # None: the inventory's bootstrap.offline
    become_pass: Optional[Secret] = None


@dataclass
class HostResult:
    host: str
    facts: Optional[facts_mod.Facts] = None
    plan: Optional[HostPlan] = None        # what the first look decided
    error: Optional[str] = None            # one line: could not be looked at, or the work failed
    done: list[str] = field(default_factory=list)     # what was done, as the plan said it
    after: Optional[HostPlan] = None       # judged again once the work was done
    seconds: float = 0.0
    bundle: Optional[offline_mod.Bundle] = None
    shipped: Optional[ship_debs.Shipped] = None

    @property
    def state(self) -> str:
        """unreachable | refused | failed | blocked (left to the admin) | ready | nothing | planned."""
        final = self.after or self.plan
        if self.plan is None:
            return "unreachable"
        if self.plan.refused or (final and final.refused):
            return "refused"
        if self.error:
            return "failed"
        if final.blockers:
            return "blocked"
        if self.after is not None:
            return "ready" if final.ready else "failed"
        return "nothing" if self.plan.nothing_to_do else "planned"

    @property
    def ok(self) -> bool:
        return self.state in ("ready", "nothing", "planned")


@dataclass
class Outcome:
    hosts: dict[str, HostResult]
    applied: bool
    offline: bool

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.hosts.values())


def bootstrap(cluster: Cluster, reporter=None, options: Options = Options(), parallel: Optional[int] = None) -> Outcome:
    offline = cluster.spec.bootstrap.offline if options.offline is None else options.offline
    with Group(cluster, reporter, parallel) as group:
        looked = group.run("facts", lambda h, c: look_at(cluster, h, c, options, offline, group.reporter))
        results = {h.name: looked.succeeded.get(h.name) or HostResult(h.name, error=summary(looked.failed[h.name]))
                   for h in cluster.hosts}
        if not options.yes:
            return Outcome(results, applied=False, offline=offline)
        todo = [h for h in cluster.hosts if results[h.name].plan and results[h.name].plan.steps
                and not results[h.name].plan.refused]
        if offline and todo:
            todo = _bundles(group, cluster, todo, results)
        # hosts sent the same .debs at once: each file read from the disk once for all of them
        takers = ship_debs.takers({h.name: [d.path for d in results[h.name].bundle.debs] if results[h.name].bundle else []
                                   for h in todo})
        worked = group.run("bootstrap", lambda h, c: work_on(cluster, h, c, results[h.name], options, offline,
                                                             group.reporter, takers[h.name]), todo)
        for name, exc in worked.failed.items():
            if isinstance(exc, KeyboardInterrupt):
                raise exc
            results[name].error = summary(exc)
        for name, result in worked.succeeded.items():
            results[name] = result
        return Outcome(results, applied=True, offline=offline)


def wants(cluster: Cluster, host: Host, options: Options, offline: bool) -> Wants:
    folders = [("workdir", host.workdir)] + ([("data_dir", host.data_dir)] if cluster.dataset_source and host.data_dir else [])
    toolkit = any(p.name.startswith("nvidia-container-toolkit_") for d in bootstrap_debs(cluster) for p in d.glob("*.deb"))
    return Wants(gpus=host.gpus, folders=tuple(folders), docker=cluster.spec.bootstrap.docker, offline=offline,
                 become_pass=options.become_pass is not None, toolkit_in_debs=toolkit)


def look_at(cluster: Cluster, host: Host, conn, options: Options, offline: bool, reporter) -> HostResult:
    """Connect, read the host's facts once and decide."""
    reporter.stage(host.name, "connect")
    conn.client  # noqa: B018  (connect now, so SSH problems are said as such)
    reporter.stage(host.name, "facts")
    found = probe(cluster, host, conn)
    if found.sudo == "password" and options.become_pass is not None:
        checked = conn.run(commands.check_password(), check=False, stdin=options.become_pass.stdin(), limit=64 << 10)
        if not checked.ok:
            return HostResult(host.name, found, HostPlan(host.name, found.release, found.arch, refused=(
                "sudo refused the password given with --ask-become-pass; nothing was changed")))
    plan = decide(host.name, found, wants(cluster, host, options, offline))
    reporter.stage(host.name, _plan_stage(plan))
    return HostResult(host.name, found, plan)


def probe(cluster: Cluster, host: Host, conn) -> facts_mod.Facts:
    data_dir = host.data_dir if cluster.dataset_source and host.data_dir else ""
    result = conn.run(commands.probe(host.workdir, data_dir or ""), check=False, limit=facts_mod.ANSWER_LIMIT)
    return facts_mod.parse(result.stdout)


def _plan_stage(plan: HostPlan) -> str:
    if plan.refused:
        return "refused"
    if plan.nothing_to_do:
        return "nothing to do" if not plan.blockers else "left to you"
    return f"{len(plan.steps)} step(s) to take"


# --- offline: resolve here, then ship --------------------------------------------------------

def _bundles(group: Group, cluster: Cluster, todo: list[Host], results: dict[str, HostResult]) -> list[Host]:
    """Each offline host's bundle, resolved here (hosts alike share one resolution); a host whose
    bundle cannot be made fails alone."""
    installing = [h for h in todo if results[h.name].plan.packages]
    statuses = group.run("bundle", lambda h, c: offline_mod.fetch_status(c), installing)
    ready = [h for h in todo if not results[h.name].plan.packages]      # nothing to install: no bundle needed
    for host in installing:
        result = results[host.name]
        if host.name in statuses.failed:
            result.error = summary(statuses.failed[host.name])
            continue
        group.reporter.stage(host.name, "resolving", "the .deb files it lacks, on this machine")
        try:
            result.bundle = offline_mod.resolve(_request(cluster, result, statuses.succeeded[host.name]), keys=_keys(result))
        except (offline_mod.ResolveError, KeyError_, OSError) as exc:
            result.error = one_line(str(exc), 600)
            continue
        group.reporter.stage(host.name, "resolved", offline_mod.bundle_text(result.bundle))
        ready.append(host)
    return ready


def _request(cluster: Cluster, result: HostResult, status: bytes) -> offline_mod.Request:
    f, plan = result.facts, result.plan
    packages = tuple(p for p in plan.packages if p[1] != "debs") + tuple((n, "archive") for n, o in plan.packages if o == "debs")
    return offline_mod.Request(plan.release, f.os_id, f.os_codename, f.arch, f.foreign_archs, packages, status,
                               tuple(bootstrap_debs(cluster)), cluster.spec.bootstrap.resolver_images.get(plan.release, ""))


def _keys(result: HostResult) -> dict[str, str]:
    """The checked keys of the vendor repositories this host's packages come from."""
    origins = {origin for _, origin in result.plan.packages}
    return {name: key_for(BY_NAME[name], result.facts.os_id, cache_root() / "bootstrap" / "keys")
            for name in ("docker", "nvidia") if name in origins}


# --- doing it on one host ---------------------------------------------------------------------

def work_on(cluster: Cluster, host: Host, conn, result: HostResult, options: Options, offline: bool, reporter,
            taker: Optional[ship_debs.Taker] = None) -> HostResult:
    """The host's plan carried out, followed to its end, and the host judged again. `taker`: its
    part in the bundle's files read once for all hosts (left, whatever happens, when this ends)."""
    with taker or contextlib.nullcontext():
        return _work_on(cluster, host, conn, result, options, offline, reporter, taker)


def _work_on(cluster: Cluster, host: Host, conn, result: HostResult, options: Options, offline: bool, reporter,
             taker: Optional[ship_debs.Taker]) -> HostResult:
    start = time.monotonic()
    result = replace(result, done=list(result.done))
    plan, applied = result.plan, 0
    while plan.steps and not plan.refused:
        if plan.kinds() == ["follow"]:
            reporter.stage(host.name, "following", "an installation an earlier run left going")
            follow(conn, host, cluster.spec.bootstrap.install_timeout_s, reporter)
        elif applied >= 1:
            raise RemoteError(host.name, reason="after the installation, still to do: "
                              + "; ".join(s.what for s in plan.steps))
        else:
            apply(cluster, host, conn, result, plan, options, offline, reporter, taker)
            result.done += [s.what for s in plan.steps]
            applied += 1
        conn.close()            # a new login: the docker group counts from then on
        reporter.stage(host.name, "checking")
        result.facts = probe(cluster, host, conn)
        plan = decide(host.name, result.facts, wants(cluster, host, options, offline))
    result.after, result.seconds = plan, time.monotonic() - start
    reporter.stage(host.name, result.state, f"{result.seconds:.0f} s")
    return result


def stage_dir(f: facts_mod.Facts) -> str:
    home = f.home or f"/home/{f.user}"
    return f"{home.rstrip('/')}/.cache/tfcompose/bootstrap"


def apply(cluster: Cluster, host: Host, conn, result: HostResult, plan: HostPlan, options: Options, offline: bool,
          reporter, taker: Optional[ship_debs.Taker] = None) -> None:
    f, stage = result.facts, stage_dir(result.facts)
    conn.run(commands.prepare_stage(stage))
    repos = _ship_keys(conn, f, plan, stage) if not offline else []
    debs = _ship_debs(cluster, host, conn, result, plan, stage, offline, reporter, taker)
    kinds = set(plan.kinds())
    names = [n for n, _ in plan.packages] if not offline else list(result.bundle.names if result.bundle else ())
    nxt = [n for n, o in plan.packages if o == NEXT_RELEASE] if not offline else []
    text = commands.plan_text(
        user=f.user, stage=stage, lock_wait_s=cluster.spec.bootstrap.apt_lock_wait_s, offline=offline,
        mirror=f.mirror or "http://deb.debian.org/debian", finish_dpkg="finish-dpkg" in kinds, repositories=repos,
        next_release=(NEXT[plan.release], nxt) if nxt else None, install=names, debs=debs, start="start" in kinds,
        group="group" in kinds, folders=[p for s in plan.steps if s.kind == "folders" for p in s.paths],
        nvidia_runtime="nvidia-runtime" in kinds, gpu_check="gpu-check" in kinds)
    conn.put_text(text, f"{stage}/plan", 0o600)
    reporter.stage(host.name, "installing", plan.steps[0].what)
    password = options.become_pass if f.sudo == "password" else None
    started = conn.run(commands.start_apply(f"{stage}/plan", password is not None),
                       stdin=password.stdin() if password else None, limit=64 << 10)
    if not started.stdout.startswith(("started", "running")):
        raise RemoteError(host.name, reason="the installation did not start", stderr=started.stderr)
    follow(conn, host, cluster.spec.bootstrap.install_timeout_s, reporter)


def _ship_keys(conn, f: facts_mod.Facts, plan: HostPlan, stage: str) -> list[tuple[str, str, str]]:
    """Each vendor repository's key (checked here) and source, into the stage's keys/."""
    repos = []
    for step in plan.steps:
        for name in step.repositories:
            try:
                key = key_for(BY_NAME[name], f.os_id, cache_root() / "bootstrap" / "keys")
            except (KeyError_, OSError) as exc:
                raise RemoteError(f"{conn.host.name}", reason=f"cannot get {name}'s signing key on this machine "
                                  f"({one_line(str(exc), 200)}); nothing was changed") from None
            conn.put_text(key, f"{stage}/keys/{name}.asc", 0o644)
            conn.put_text(deb822(BY_NAME[name], f.os_id, f.os_codename, f.arch, f"/etc/apt/keyrings/tfcompose-{name}.asc"),
                          f"{stage}/keys/{name}.sources", 0o644)
            repos.append((name, f"{name}.asc", f"{name}.sources"))
    return repos


def _ship_debs(cluster: Cluster, host: Host, conn, result: HostResult, plan: HostPlan, stage: str, offline: bool,
               reporter, taker: Optional[ship_debs.Taker] = None) -> list[tuple[str, str]]:
    """The .debs the host installs from: its offline bundle, or online your bootstrap.debs when a
    package is to come from them. Only what it lacks is sent; (sha256, name) of each."""
    if offline:
        debs = list(result.bundle.debs) if result.bundle else []
    elif any(o == "debs" for _, o in plan.packages):
        debs = _user_debs(cluster)
    else:
        return []
    if debs:
        reporter.stage(host.name, "shipping", f"{len(debs)} .deb file(s), {sum(d.size for d in debs) / 1e6:,.1f} MB")
        result.shipped = ship_debs.ship(conn, stage, debs, transfer_reporter(reporter, host.name, ".deb files"),
                                        taker if offline else None)
    return [(d.sha256, d.name) for d in debs]


def _user_debs(cluster: Cluster) -> list[offline_mod.Deb]:
    found = {}
    for folder in bootstrap_debs(cluster):
        for path in sorted(folder.glob("*.deb")):
            if offline_mod.DEB_NAME.match(path.name):
                found.setdefault(path.name, offline_mod.deb_of(path))
    return list(found.values())
