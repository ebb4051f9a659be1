"""The bootstrap stage on one host, through the one fake connection: the plan file it writes, sudo
with the password on stdin only, the install followed through its log to its end or its failure,
and the host judged again once the work is done."""
from __future__ import annotations

import hashlib
import threading

import pytest

from launcher.bootstrap import commands, stage
from launcher.bootstrap.offline import Bundle, Deb
from launcher.bootstrap.ship_debs import OneRead
from launcher.bootstrap.probe import PROBE
from launcher.errors import RemoteError
from launcher.inventory.load import load_cluster
from launcher.reporter import RecordingReporter
from launcher.ssh.connection import Result
from support.fakes import FakeConnection, FakeGroup

BARE = """os_id=debian\nos_version=12\nos_codename=bookworm\nos_name=Debian GNU/Linux 12 (bookworm)\narch=amd64
user=admin\nuid=1000\nhome=/home/admin\ngroups=admin\ngroups_db=admin\nsudo={sudo}\ndocker_user=no\ncompose=
source=deb http://mirror.lan/debian bookworm main\nfree_usr=40000000\nfree_apt=40000000\nworkdir=absent\ndata_dir=none
end=probe
"""
READY = """os_id=debian\nos_version=12\nos_codename=bookworm\nos_name=Debian GNU/Linux 12 (bookworm)\narch=amd64
user=admin\nuid=1000\nhome=/home/admin\ngroups=admin docker\ngroups_db=admin docker\nsudo={sudo}\ndockerd=/usr/sbin/dockerd
docker_user=ok\ndocker_info=20.10.24|/var/lib/docker|runc,\ncompose=2.26.1-4\ndocker_enabled=enabled
pkg=docker.io 20.10.24 ii \npkg=docker-compose 2.26.1-4 ii \nworkdir=writable\ndata_dir=none\nend=probe
"""


class Host(FakeConnection):
    """A host answering the bootstrap's commands: its facts before and after, and an install log."""

    def __init__(self, logs: list[tuple[str, str]], sudo: str = "ok", name: str = "h1"):
        super().__init__(self.answer_for, host=name)
        self.facts = [BARE.format(sudo=sudo), READY.format(sudo=sudo)]
        self.logs, self.stdins, self.closed = logs, [], 0
        self.cancel = threading.Event()

    client = property(lambda self: self)

    def close(self):
        self.closed += 1

    def check_cancel(self, *_):
        pass

    def run(self, command, check=True, stdin=None, **kw):
        self.stdins.append(stdin)
        return super().run(command, check=check, **kw)

    def answer_for(self, command) -> Result:
        if command[2:3] == [PROBE]:
            return Result(0, self.facts[min(self.closed, 1)], "")
        if "alive=" in str(command):
            status, text = self.logs.pop(0) if self.logs else ("0", "")
            size = len(text.encode())
            return Result(0, f"status={status}\nalive={'no' if status else 'yes'}\nsize={int(command[5]) + size}\n---\n{text}", "")
        if commands.START in command:
            return Result(0, "started\n", "")
        if command[:3] == ["sudo", "-S", "-p"] and command[-1] == "true":
            return Result(0 if self.stdins[-1] == b"s3cret\n" else 1, "", "")
        return Result(0, "", "")


@pytest.fixture
def cluster(tmp_path):
    (tmp_path / "inv.yaml").write_text("cluster: c\nssh: {user: admin, config_file: ./none}\ndefaults: {gpus: 0}\n"
                                       "bootstrap: {apt_lock_wait_s: 30}\nhosts:\n  - {name: h1, address: 10.0.0.1}\n")
    return load_cluster(tmp_path / "inv.yaml")


def run_one(cluster, conn, options=stage.Options(yes=True)):
    rep = RecordingReporter()
    looked = stage.look_at(cluster, cluster.hosts[0], conn, options, False, rep)
    if looked.plan.refused:
        return looked, rep
    return stage.work_on(cluster, cluster.hosts[0], conn, looked, options, False, rep), rep


def test_the_host_is_installed_from_its_plan_file_followed_and_judged_ready(cluster):
    conn = Host([("", "TFC-STEP install docker.io docker-compose\nUnpacking docker.io (20.10.24) ...\n"),
                 ("0", "TFC-STEP start docker\nTFC-STEP group admin\nTFC-DONE\n")])
    result, rep = run_one(cluster, conn)
    assert result.state == "ready" and result.after.ready and conn.closed == 1        # logged in again to check
    plan = conn.uploads["/home/admin/.cache/tfcompose/bootstrap/plan"].splitlines()
    assert plan == ["user admin", "stage /home/admin/.cache/tfcompose/bootstrap", "lock_wait 30", "offline 0",
                    "mirror http://mirror.lan/debian", "next trixie docker-compose", "install docker.io",
                    "install docker-compose", "start", "group", "folder /opt/tfcompose"]
    started = next(c for c in conn.commands if commands.START in c)
    assert started[:3] == ["sudo", "-n", "--"]
    assert ("h1", "installing", "docker.io docker-compose") in rep.events and ("h1", "group", "admin") in rep.events


def test_the_sudo_password_goes_to_sudo_on_stdin_and_nowhere_else(cluster):
    conn = Host([("0", "TFC-DONE\n")], sudo="refused\nsudo_said=sudo: a password is required")
    refused, _ = run_one(cluster, Host([], sudo="refused\nsudo_said=sudo: a password is required"))
    assert refused.state == "refused" and "--ask-become-pass" in refused.plan.refused
    result, _ = run_one(cluster, conn, stage.Options(yes=True, become_pass=stage.Secret("s3cret")))
    assert result.state == "ready"
    started = next(c for c in conn.commands if commands.START in c)
    assert started[:5] == ["sudo", "-S", "-p", "", "--"]
    assert conn.stdins[conn.commands.index(started)] == b"s3cret\n"
    assert "s3cret" not in repr(conn.commands) + repr(conn.uploads) + repr(result)
    wrong, _ = run_one(cluster, Host([], sudo="refused\nsudo_said=sudo: a password is required"),
                       stage.Options(yes=True, become_pass=stage.Secret("nope")))
    assert wrong.state == "refused" and "sudo refused the password" in wrong.plan.refused


def test_a_failed_install_is_one_line_with_its_reason(cluster):
    conn = Host([("1", "TFC-WAIT apt's lock: python3 (pid 7) holds /var/lib/dpkg/lock-frontend\n"
                       "TFC-FAIL apt's lock is still held after 30 s: python3 (pid 7) holds /var/lib/dpkg/lock-frontend\n")])
    with pytest.raises(RemoteError) as err:
        run_one(cluster, conn)
    assert err.value.summary == "h1: apt's lock is still held after 30 s: python3 (pid 7) holds /var/lib/dpkg/lock-frontend"


def test_the_plan_without_yes_changes_nothing(cluster):
    conn = Host([])
    looked = stage.look_at(cluster, cluster.hosts[0], conn, stage.Options(), False, RecordingReporter())
    assert looked.state == "planned" and conn.uploads == {} and not any(commands.START in c for c in conn.commands)


def test_a_sudo_that_repeats_the_password_on_stderr_never_has_it_shown(cluster):
    """A host whose sudo echoes what it read (#46: it reached the terminal in the error's stderr tail,
    and its install log in the lines followed): masked in the error, its summary, and the stages said."""
    from launcher.errors import summary
    password = "s3cret"                 # (the one this stand-in's sudo takes)
    conn = Host([("1", f"TFC-STEP install docker.io\nsudo echoed {password}\nTFC-FAIL apt said {password}\n")],
                sudo="refused\nsudo_said=sudo: a password is required")
    with pytest.raises(RemoteError) as err:
        run_one(cluster, conn, stage.Options(yes=True, become_pass=stage.Secret(password)))
    shown = str(err.value) + summary(err.value)
    assert password not in shown and "apt said ***" in shown, shown
    from launcher.errors import RemoteError as Raised
    echoed = Raised("h1", ["sudo", "-S", "true"], 1, f"sorry: {password}\n")
    assert password not in str(echoed) + echoed.summary and "sorry: ***" in echoed.summary


def test_offline_hosts_are_sent_their_bundle_all_at_once(tmp_path, monkeypatch):
    """Two offline hosts lacking the same packages: one resolution here, and the .debs go to both at
    the same time (each host's transfer waits here for the other's), each read from the disk once for
    both, so two hosts offline cost about what one does (#47); both are then installed and judged ready."""
    (tmp_path / "inv.yaml").write_text("cluster: c\nssh: {user: admin, config_file: ./none}\ndefaults: {gpus: 0}\n"
                                       "bootstrap: {offline: true}\nhosts:\n  - {name: h1, address: 10.0.0.1}\n"
                                       "  - {name: h2, address: 10.0.0.2}\n")
    deb = tmp_path / "docker.io_20.10.24_amd64.deb"
    deb.write_bytes(b"x" * 1000)
    bundle = Bundle("k", ("docker.io",), (Deb(deb.name, deb, hashlib.sha256(b"x" * 1000).hexdigest(), 1000),))
    resolved = []
    monkeypatch.setattr(stage.offline_mod, "fetch_status", lambda conn: b"Package: base-files\n")
    monkeypatch.setattr(stage.offline_mod, "resolve", lambda request, keys=None: resolved.append(request) or bundle)
    both = threading.Barrier(2, timeout=5)
    conns = {name: Host([("0", "TFC-DONE\n")], name=name) for name in ("h1", "h2")}
    for conn in conns.values():
        conn.on_stream = lambda command, data: both.wait() if deb.name in command else None
    cluster = load_cluster(tmp_path / "inv.yaml")
    monkeypatch.setattr(stage, "Group", lambda cluster, reporter=None, parallel=None: FakeGroup(cluster, conns))
    made = []
    monkeypatch.setattr(stage.ship_debs, "OneRead", lambda *a, **kw: made.append(OneRead(*a, **kw)) or made[-1])
    outcome = stage.bootstrap(cluster, options=stage.Options(yes=True))
    assert {name: r.state for name, r in outcome.hosts.items()} == {"h1": "ready", "h2": "ready"}, outcome
    assert all(conn.streams == [(conn.streams[0][0], b"x" * 1000)] for conn in conns.values())
    assert resolved[0] == resolved[1]           # alike hosts, one request (offline.resolve's cache serves the second)
    assert len(made) == 1 and made[0].disk_reads == 1 and made[0].held == 0     # one read for both
