"""The cluster's life: preflight → push → image → start → wait → collect, and status/logs/down.

Core functions return data and raise launcher errors; they never print. Progress goes to a
Reporter (see progress.py); the CLI decides how it looks.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import json
import time
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Optional

from launcher import images, render, report
from launcher.errors import ClusterFailed, GroupError, PreflightError, RemoteError
from launcher.fanout import fan_out
from launcher.inventory import Cluster, Host
from launcher.progress import NullReporter, Reporter
from launcher.remote import Connection

MIN_FREE_GB = 2
CLOCK_WARN_S = 1.0
HASH_FILE = ".tfcompose-bundle"


class Session:
    """One lazily opened SSH connection per host for the length of a command."""

    def __init__(self, cluster: Cluster, reporter: Reporter | None = None, parallel: Optional[int] = None):
        self.cluster, self.reporter, self.parallel = cluster, reporter or NullReporter(), parallel
        self._stack = ExitStack()
        self._conns = {h.name: self._stack.enter_context(Connection.for_host(cluster, h)) for h in cluster.hosts}

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc) -> None:
        self._stack.close()

    def conn(self, host: Host) -> Connection:
        return self._conns[host.name]

    def each(self, step: str, fn: Callable[[Host, Connection], object], hosts=None, error=GroupError,
             raise_on_error: bool = True) -> dict:
        return fan_out(hosts or self.cluster.hosts, step, lambda h: fn(h, self.conn(h)), self.parallel,
                       error=error, raise_on_error=raise_on_error)


# --- preflight ----------------------------------------------------------------------------------

PREFLIGHT_SCRIPT = r"""
workdir=$1 data_dir=$2 tf_port=$3 cluster=$4 host=$5
say() { printf '%s=%s\n' "$1" "$2"; }
if out=$(docker info --format '{{json .Runtimes}}' 2>&1); then say docker ok; say runtimes "$out"
else say docker "$(printf '%s' "$out" | tail -n 1)"; fi
say compose "$(docker compose version --short 2>/dev/null || echo missing)"
say gpu_count "$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)"
say own_running "$(docker ps -q --filter "label=tfcompose.cluster=$cluster" --filter "label=tfcompose.host=$host" 2>/dev/null | wc -l)"
if command -v ss >/dev/null 2>&1; then say port_busy "$(ss -Hltn "sport = :$tf_port" | wc -l)"; else say port_busy unknown; fi
if mkdir -p "$workdir" 2>/dev/null && [ -w "$workdir" ]; then say workdir ok; else say workdir "not writable"; fi
say free_kb "$(df -Pk "$workdir" 2>/dev/null | awk 'NR==2 {print $4}')"
if [ -n "$data_dir" ]; then if [ -d "$data_dir" ]; then say data_dir ok; else say data_dir missing; fi; fi
say uid "$(id -u):$(id -g)"
say clock "$(date +%s.%N)"
"""


@dataclass
class HostReady:
    host: str
    facts: dict
    warnings: list = field(default_factory=list)


def preflight_host(host: Host, conn: Connection, cluster: str, reporter: Reporter) -> HostReady:
    reporter.stage(host.name, "connect")
    conn.client  # noqa: B018  (connect now, so SSH problems are reported as such)
    reporter.stage(host.name, "preflight")
    sent = time.time()
    result = conn.run(["sh", "-c", PREFLIGHT_SCRIPT, "tfcompose-preflight", host.workdir, host.data_dir or "",
                       str(host.tf_port), cluster, host.name], check=False, timeout=60)
    facts = dict(line.split("=", 1) for line in result.stdout.splitlines() if "=" in line)
    problems, warnings = judge(host, facts, midpoint=(sent + time.time()) / 2)
    for warning in warnings:
        reporter.warn(host.name, warning)
    if problems:
        raise RemoteError(host.name, reason="not ready: " + "; ".join(problems))
    return HostReady(host.name, facts, warnings)


def judge(host: Host, facts: dict, midpoint: float) -> tuple[list[str], list[str]]:
    """Problems (block the start) and warnings from one host's preflight facts."""
    problems, warnings = [], []
    if facts.get("docker") != "ok":
        problems.append(f"`docker info` fails for this user ({facts.get('docker', 'no answer')})")
    if not facts.get("compose", "missing").split(".")[0].lstrip("v").isdigit() or \
            int(facts["compose"].split(".")[0].lstrip("v")) < 2:
        problems.append(f"docker compose v2 is needed (found: {facts.get('compose', 'missing')})")
    problems += _gpu_problems(host, facts)
    if facts.get("port_busy", "0") not in ("0", "unknown") and facts.get("own_running", "0") == "0":
        problems.append(f"tf_port {host.tf_port} is already in use")
    if facts.get("workdir") != "ok":
        problems.append(f"workdir {host.workdir} is not writable")
    free_kb = facts.get("free_kb", "")
    if free_kb.isdigit() and int(free_kb) < MIN_FREE_GB * 1024 * 1024:
        problems.append(f"only {int(free_kb) // 1024} MB free in {host.workdir} (need {MIN_FREE_GB} GB)")
    if host.data_dir and facts.get("data_dir") != "ok":
        problems.append(f"data_dir {host.data_dir} does not exist")
    offset = _clock_offset(facts.get("clock", ""), midpoint)
    if offset is not None and abs(offset) > CLOCK_WARN_S:
        warnings.append(f"clock is {offset:+.1f} s off this machine's (timeouts and logs may mislead; run NTP)")
    return problems, warnings


def _gpu_problems(host: Host, facts: dict) -> list[str]:
    if host.gpus == 0:
        return []
    problems = []
    if "nvidia" not in facts.get("runtimes", ""):
        problems.append("gpus requested but Docker has no nvidia runtime (install the NVIDIA Container Toolkit)")
    count = int(facts["gpu_count"]) if facts.get("gpu_count", "").isdigit() else 0
    need = 1 if host.gpus == "all" else (max(host.gpus) + 1 if isinstance(host.gpus, list) else host.gpus)
    if count < need:
        problems.append(f"gpus {render.expect_gpus(host.gpus)} requested but nvidia-smi lists {count} GPU(s)")
    return problems


def _clock_offset(remote: str, midpoint: float) -> Optional[float]:
    try:
        return float(remote) - midpoint
    except ValueError:
        return None


def preflight(session: Session) -> dict[str, HostReady]:
    name = session.cluster.name
    return session.each("preflight", lambda h, c: preflight_host(h, c, name, session.reporter), error=PreflightError)


# --- push, image, start ---------------------------------------------------------------------------

def bundle_hash(files: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()


def push(host: Host, conn: Connection, files: dict[str, str], reporter: Reporter) -> int:
    """Upload the bundle (each file atomically); nothing when the host has this exact bundle."""
    reporter.stage(host.name, "push")
    digest, root = bundle_hash(files), host.bundle_dir
    conn.run(["mkdir", "-p", root, f"{root}/results", f"{root}/backup"])
    current = conn.run(["cat", f"{root}/{HASH_FILE}"], check=False).stdout.strip()
    if current == digest:
        return 0
    sent = sum(conn.put_text(text, f"{root}/{name}") for name, text in files.items())
    conn.put_text(digest + "\n", f"{root}/{HASH_FILE}")
    return sent


def provide_image(session: Session) -> dict[str, images.ImageOutcome]:
    spec = session.cluster.spec
    if spec.image_mode == "pull":
        return session.each("image", lambda h, c: _staged(session, h, "image", lambda: images.pull(c, spec.image)))
    if spec.image_mode == "build":
        tarball = images.context_tarball()
        return session.each("image", lambda h, c: _staged(
            session, h, "image", lambda: images.build_remote(c, session.cluster, h, tarball)))
    for host in session.cluster.hosts:
        session.reporter.stage(host.name, "image", "building here")
    image_id = images.build_local(session.cluster)
    if spec.run:
        image_id = images.build_code_image(session.cluster)
    archive = images.Archive(render.container_image(session.cluster), image_id)
    return session.each("image", lambda h, c: _staged(session, h, "image", lambda: images.ship(c, archive)))


def _staged(session: Session, host: Host, stage: str, fn):
    session.reporter.stage(host.name, stage)
    return fn()


def containers(conn: Connection, cluster: str, host: str) -> list[dict]:
    """`docker inspect` of this host's containers of the cluster (any run, any state)."""
    script = ('ids=$(docker ps -aq --filter "label=tfcompose.cluster=$1" --filter "label=tfcompose.host=$2"); '
              'if [ -n "$ids" ]; then docker inspect $ids; else echo "[]"; fi')
    return json.loads(conn.run(["sh", "-c", script, "sh", cluster, host]).stdout or "[]")


def start(host: Host, conn: Connection, cluster: Cluster, run: str, reporter: Reporter) -> str:
    """Start this host's container unless this run's container already exists (idempotent)."""
    reporter.stage(host.name, "start")
    existing = [c for c in containers(conn, cluster.name, host.name)
                if c["Config"]["Labels"].get("tfcompose.run") == run]
    if existing:
        return f"already {existing[0]['State']['Status']}"
    conn.run(["docker", "compose", "--project-directory", host.bundle_dir, "-f", f"{host.bundle_dir}/compose.yaml",
              "-p", cluster.name, "up", "-d", "--pull", "never", "--no-build"])
    return "started"


@dataclass
class UpReport:
    run_id: str
    bytes_pushed: dict
    images: dict
    started: dict
    outcome: Optional["RunOutcome"] = None


def up(cluster: Cluster, reporter: Reporter | None = None, parallel: Optional[int] = None,
       wait: bool = False, poll_s: float = 2.0, runs_dir: Path = Path("runs")) -> UpReport:
    """Preflight everywhere, then push, image and start everywhere; all or nothing."""
    run = render.run_id(cluster)
    bundles = render.render_cluster(cluster)
    with Session(cluster, reporter, parallel) as s:
        preflight(s)
        pushed = s.each("push", lambda h, c: push(h, c, bundles[h.name], s.reporter))
        shipped = provide_image(s)
        started = _start_all_or_nothing(s, run)
        for host in cluster.hosts:
            s.reporter.stage(host.name, "running")
        report = UpReport(run, pushed, {h: asdict(o) for h, o in shipped.items()}, started)
        if wait:
            report.outcome = wait_for_chief(s, run, poll_s)
            collect_into(s, run, runs_dir)
            if report.outcome.failed:
                raise ClusterFailed(report.outcome.message)
    return report


def _start_all_or_nothing(s: Session, run: str) -> dict:
    results = s.each("start", lambda h, c: start(h, c, s.cluster, run, s.reporter), raise_on_error=False)
    failed = {h: r for h, r in results.items() if isinstance(r, BaseException)}
    if failed:
        started = [h for h in s.cluster.hosts if results[h.name] == "started"]
        if started:
            s.each("stop", lambda h, c: remove_containers(h, c, s.cluster.name), hosts=started, raise_on_error=False)
        raise GroupError("start", results)
    return results


# --- waiting, fail-fast ---------------------------------------------------------------------------

@dataclass
class HostStatus:
    host: str
    state: str                 # running, exited, restarting, absent, unreachable, ...
    exit_code: Optional[int] = None
    restarts: int = 0
    uptime_s: Optional[float] = None
    run: str = ""
    last_line: str = ""
    container: str = ""
    error: str = ""
    finished_at: str = ""      # Docker's FinishedAt (ISO 8601), to find who failed first


PROGRESS_MARKERS = (" epoch ", " done: ", "best: ", "cluster ready", "tfcompose trainer:", "joining a cluster",
                    "importing TensorFlow", "first training step done")


def host_status(host: Host, conn: Connection, cluster: str, with_line: bool = True) -> HostStatus:
    found = containers(conn, cluster, host.name)
    if not found:
        return HostStatus(host.name, "absent")
    newest = max(found, key=lambda c: c["Created"])
    st = newest["State"]
    status = HostStatus(host.name, st["Status"], st.get("ExitCode"), newest.get("RestartCount", 0),
                        _uptime(st), newest["Config"]["Labels"].get("tfcompose.run", ""), container=newest["Id"][:12],
                        finished_at=st.get("FinishedAt", ""))
    if with_line:
        tail = conn.run(["sh", "-c", 'docker logs --tail 60 "$1" 2>&1', "sh", status.container], check=False).stdout
        status.last_line = next((line.strip() for line in reversed(tail.splitlines())
                                 if any(m in line for m in PROGRESS_MARKERS)), "")
    return status


def _uptime(state: dict) -> Optional[float]:
    if state.get("Status") != "running":
        return None
    started = dt.datetime.fromisoformat(state["StartedAt"][:26].rstrip("Z") + "+00:00")
    return (dt.datetime.now(dt.timezone.utc) - started).total_seconds()


def status(cluster: Cluster, reporter: Reporter | None = None, parallel: Optional[int] = None) -> list[HostStatus]:
    with Session(cluster, reporter, parallel) as s:
        results = s.each("status", lambda h, c: host_status(h, c, cluster.name), raise_on_error=False)
    return [r if isinstance(r, HostStatus) else HostStatus(name, "unreachable", error=str(r).splitlines()[0])
            for name, r in results.items()]


@dataclass
class RunOutcome:
    failed: bool
    message: str
    states: list = field(default_factory=list)


def final_failure(st: HostStatus, retries: int) -> bool:
    """Exited non-zero with Docker's restarts used up (or gone)."""
    if st.state in ("dead", "absent"):
        return True
    return st.state == "exited" and st.exit_code not in (0, None) and st.restarts >= retries


def port_open(host: Host, conn: Connection) -> bool:
    out = conn.run(["sh", "-c", 'ss -Hltn "sport = :$1" | wc -l', "sh", str(host.tf_port)], check=False).stdout
    return out.strip() not in ("", "0")


def deadlines(s: Session, started: float, joined: bool) -> tuple[bool, Optional[str]]:
    """For `run:` programs, which cannot hold a watchdog: (joined now?, why to stop, if so)."""
    run = s.cluster.spec.run
    if run is None:
        return True, None
    elapsed = time.monotonic() - started
    if not joined:
        opened = s.each("join", port_open, raise_on_error=False)
        missing = [h for h, ok in opened.items() if ok is not True]
        if not missing:
            return True, None
        if elapsed > run.join_timeout_s:
            tfp = {h.name: h.tf_port for h in s.cluster.hosts}
            return False, ("never opened TensorFlow's port within run.join_timeout_s "
                           f"({run.join_timeout_s:g} s): " + ", ".join(f"{h} (port {tfp[h]})" for h in missing)
                           + "; did the program create MultiWorkerMirroredStrategy on every host?")
    if elapsed > run.deadline_s:
        return joined, f"the chief had not finished after run.deadline_s ({run.deadline_s:g} s)"
    return joined, None


def wait_for_chief(s: Session, run: str, poll_s: float = 2.0) -> RunOutcome:
    """Until the chief finishes; a host that fails for good stops the whole cluster (fail fast)."""
    retries, chief = s.cluster.spec.defaults.restart_retries, s.cluster.chief.name
    started, joined = time.monotonic(), False
    while True:
        states = s.each("status", lambda h, c: host_status(h, c, s.cluster.name, with_line=False), raise_on_error=False)
        for name, st in states.items():
            if isinstance(st, HostStatus):
                s.reporter.stage(name, st.state, f"exit {st.exit_code}" if st.state == "exited" else "")
        if _finished(s.cluster, states):
            return RunOutcome(False, f"chief {chief} finished (exit 0)" if not render.parallel(s.cluster)
                              else "every host finished its trials (exit 0)", list(states.values()))
        failed = [st for st in states.values() if isinstance(st, HostStatus) and final_failure(st, retries)]
        if failed:  # name the first to fail: the others usually failed because they lost it
            failed.sort(key=lambda st: st.finished_at or "~")
            return _fail_fast(s, failed, list(states.values()))
        joined, overdue = deadlines(s, started, joined)
        if overdue:
            s.each("stop", lambda h, c: remove_containers(h, c, s.cluster.name, keep=True), raise_on_error=False)
            return RunOutcome(True, f"stopped every container of the cluster: {overdue}", list(states.values()))
        time.sleep(poll_s)


def _finished(cluster: Cluster, states: dict) -> bool:
    """Sync: the chief exited 0. Parallel: every host did (each trains its own trials)."""
    names = [h.name for h in cluster.hosts] if render.parallel(cluster) else [cluster.chief.name]
    return all(isinstance(states[n], HostStatus) and states[n].state == "exited" and states[n].exit_code == 0
               for n in names)


def _fail_fast(s: Session, failures: list[HostStatus], states: list) -> RunOutcome:
    failed = failures[0]
    host = s.cluster.host(failed.host)
    tail = ""
    if failed.container:
        tail = s.conn(host).run(["sh", "-c", 'docker logs --tail 15 "$1" 2>&1', "sh", failed.container], check=False).stdout
    s.each("stop", lambda h, c: remove_containers(h, c, s.cluster.name, keep=True), raise_on_error=False)
    detail = f"exit code {failed.exit_code}" if failed.state == "exited" else failed.state
    then = "".join(f", then {f.host} (exit code {f.exit_code})" for f in failures[1:])
    return RunOutcome(True, f"{failed.host} failed ({detail}, after {failed.restarts} restart(s)){then}; "
                            f"stopped every container of the cluster. Last lines of {failed.host}'s log:\n  "
                            + "\n  ".join(_last_lines(tail)), states)


def _last_lines(log: str, n: int = 10) -> list[str]:
    lines = [line for line in log.splitlines() if line.strip() and not line.startswith(("I0000", "W0000", "E0000"))]
    return lines[-n:]


# --- logs, collect, down ------------------------------------------------------------------------

def _newest_container(conn: Connection, cluster: str, host: str) -> str:
    found = containers(conn, cluster, host)
    if not found:
        raise RemoteError(host, reason=f"no container of cluster {cluster} on this host (run `tfcompose up` first)")
    return max(found, key=lambda c: c["Created"])["Id"][:12]


def logs(cluster: Cluster, host_name: Optional[str], follow: bool, write: Callable[[bytes], None]) -> None:
    """The container's output (stdout and stderr), followed until it ends when `follow`."""
    host = cluster.host(host_name) if host_name else cluster.chief
    with Connection.for_host(cluster, host) as conn:
        container = _newest_container(conn, cluster.name, host.name)
        flag = "--follow" if follow else "--timestamps=false"
        conn.stream(["sh", "-c", 'docker logs "$1" "$2" 2>&1', "sh", flag, container], on_output=write)


def collect_into(s: Session, run: str, runs_dir: Path) -> Path:
    """The chief's results and every host's full log into runs/<cluster>/<run>/; `latest` points there."""
    cluster, chief = s.cluster, s.cluster.chief
    run_dir = Path(runs_dir) / cluster.name / run
    for host in cluster.hosts:
        s.reporter.stage(host.name, "collect")
    if render.parallel(cluster):
        _gather_parallel(s, run_dir)
    else:
        s.conn(chief).get_tree(f"{chief.bundle_dir}/results", run_dir)

    def fetch_log(host: Host, conn: Connection) -> int:
        text = conn.run(["sh", "-c", 'docker logs "$1" 2>&1', "sh", _newest_container(conn, cluster.name, host.name)]).stdout
        path = run_dir / "logs" / f"{host.name}.log"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return len(text)

    s.each("collect", fetch_log)
    latest = run_dir.parent / "latest"
    if latest.is_symlink() or latest.exists():
        latest.unlink()
    latest.symlink_to(run, target_is_directory=True)
    if (run_dir / "results.json").is_file():
        report.write_report(run_dir)
    return run_dir


def _gather_parallel(s: Session, run_dir: Path) -> None:
    """Every host's results into hosts/<host>/, merged into one results.json; the best model copied up."""
    s.each("collect", lambda h, c: c.get_tree(f"{h.bundle_dir}/results", run_dir / "hosts" / h.name))
    docs = {h.name: json.loads((run_dir / "hosts" / h.name / "results.json").read_text())
            for h in s.cluster.hosts if (run_dir / "hosts" / h.name / "results.json").is_file()}
    if not docs:
        return
    records = [dict(r, host=h, history=f"hosts/{h}/{r['history']}") for h, d in docs.items() for r in d["candidates"]]
    order = {name: i for i, name in enumerate(n for names in render.placement(s.cluster).values() for n in names)}
    records.sort(key=lambda r: order.get(r["candidate"], len(order)))
    best = max(records, key=lambda r: r["val_accuracy"])
    first = next(iter(docs.values()))
    merged = {**first, "mode": "parallel", "candidates": records, "workers": len(docs),
              "replicas": sum(d["replicas"] for d in docs.values()),
              "best": {"candidate": best["candidate"], "val_accuracy": best["val_accuracy"], "host": best["host"]},
              "placement": render.placement(s.cluster), "restarts": max(d.get("restarts", 0) for d in docs.values()),
              "started": min(d["started"] for d in docs.values()), "finished": max(d["finished"] for d in docs.values())}
    (run_dir / "results.json").write_text(json.dumps(merged, indent=2) + "\n")
    # Each host saved its own best; the overall best comes from the host that trained it.
    for name in ("best_model.keras",):
        source = run_dir / "hosts" / best["host"] / name
        if source.is_file():
            (run_dir / name).write_bytes(source.read_bytes())


def collect(cluster: Cluster, runs_dir: Path = Path("runs"), reporter: Reporter | None = None) -> Path:
    with Session(cluster, reporter) as s:
        # The run of the chief's container, which may predate an edit of the inventory.
        chief = host_status(cluster.chief, s.conn(cluster.chief), cluster.name, with_line=False)
        return collect_into(s, chief.run or render.run_id(cluster), runs_dir)


def remove_containers(host: Host, conn: Connection, cluster: str, keep: bool = False) -> int:
    """Kill (MWMS ignores SIGTERM) and remove this host's containers of the cluster.

    keep=True stops them but keeps them, so their logs can still be collected."""
    # A paused container refuses to be killed: unpause first.
    action = ("docker unpause $ids >/dev/null 2>&1; "
              + ("docker kill $ids >/dev/null 2>&1" if keep else "docker rm -f $ids >/dev/null") + "; echo $ids | wc -w")
    script = ('ids=$(docker ps -aq --filter "label=tfcompose.cluster=$1" --filter "label=tfcompose.host=$2"); '
              f'if [ -n "$ids" ]; then {action}; else echo 0; fi')
    return int(conn.run(["sh", "-c", script, "sh", cluster, host.name]).stdout.strip() or 0)


def down_host(host: Host, conn: Connection, cluster: str, purge: bool) -> str:
    removed = remove_containers(host, conn, cluster)
    conn.run(["sh", "-c", 'nets=$(docker network ls -q --filter "label=com.docker.compose.project=$1"); '
              '[ -z "$nets" ] || docker network rm $nets >/dev/null 2>&1 || true', "sh", cluster])
    if purge:
        if host.bundle_dir.count("/") < 2 or not host.bundle_dir.endswith("/" + cluster):
            raise RemoteError(host.name, reason=f"refusing to purge {host.bundle_dir!r}")
        conn.run(["rm", "-rf", "--", host.bundle_dir])
    return f"removed {removed} container(s)" + (f", purged {host.bundle_dir}" if purge else "")


def down(cluster: Cluster, purge: bool = False, reporter: Reporter | None = None,
         parallel: Optional[int] = None) -> dict:
    """Stop and remove everywhere; an unreachable host is reported, not fatal."""
    with Session(cluster, reporter, parallel) as s:
        return s.each("down", lambda h, c: down_host(h, c, cluster.name, purge), raise_on_error=False)
