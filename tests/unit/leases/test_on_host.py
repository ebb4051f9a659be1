"""The lease stage's host side (launcher/leases/host.sh through on_host.py, run here with sh as it
runs on a host) and its answers read back: sessions that end with their launcher, check-and-write
that two launchers cannot both pass, a folder every user writes and nobody can empty for another."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from launcher.leases import files as lf, look, on_host
from support.common import IN_CI
from support.lease_host import UID, Session, a_lease, host, looked, writes


def test_a_session_makes_a_folder_everyone_writes_and_ends_with_its_launcher(tmp_path):
    folder = tmp_path / "var" / "leases"
    session = Session(folder, "a" * 16)
    assert session.said == "held"
    assert oct(folder.stat().st_mode & 0o7777) == "0o1777"       # like /tmp: sticky, everyone writes
    assert looked(folder).sessions == {"a" * 16: True}
    session.end()
    assert not (folder / ("a" * 16 + ".session")).exists()
    assert looked(folder).sessions == {}


def test_a_session_lives_on_its_launchers_heartbeat_and_ends_when_it_stops_though_its_stdin_stays_open(tmp_path):
    # A launcher cut off from the host (a link down when it ended): sshd may not notice for hours,
    # and the next `up` of the cluster would be refused as long ("another `up` … is at work").
    session = Session(tmp_path, "d" * 16, silence_s=1)
    for _ in range(8):                                   # 2 s of beats: alive throughout
        session.proc.stdin.write(b".")
        session.proc.stdin.flush()
        time.sleep(0.25)
    assert session.proc.poll() is None and looked(tmp_path).sessions == {"d" * 16: True}
    assert session.proc.wait(10) == 0                    # then silence, its stdin still open: it ends
    assert looked(tmp_path).sessions == {}


def test_a_session_whose_processes_were_killed_is_dead_though_its_file_is_left(tmp_path):
    session = Session(tmp_path, "b" * 16)
    os.killpg(session.proc.pid, signal.SIGKILL)          # sshd restarted, the host rebooted…
    session.proc.wait(10)
    assert (tmp_path / ("b" * 16 + ".session")).exists()
    assert looked(tmp_path).sessions == {"b" * 16: False}


def test_check_and_write_refuses_when_the_files_changed_since_the_look(tmp_path):
    Session(tmp_path, "c" * 16).end()
    before = looked(tmp_path)
    name = lf.lease_file("demo", "h0", UID)
    print_ = look.fingerprint(before, set())
    assert host(tmp_path, "change", print_, stdin=writes((name, lf.lease_text(a_lease())))).stdout == "done\n"
    again = host(tmp_path, "change", print_, stdin=writes(("other.h0.0.lease", "{}")))
    assert (again.returncode, again.stdout) == (4, "changed\n") and not (tmp_path / "other.h0.0.lease").exists()
    # The files this change writes itself (other hosts of the same `up` in this folder) do not count.
    assert host(tmp_path, "change", print_, name, stdin=writes(("x.h1.0.lease", "{}"))).returncode == 0


def test_of_two_launchers_checking_and_writing_at_once_exactly_one_wins(tmp_path):
    Session(tmp_path, "d" * 16).end()
    print_ = look.fingerprint(looked(tmp_path), set())
    results = []

    def take(cluster: str) -> None:
        results.append(host(tmp_path, "change", print_, stdin=writes((lf.lease_file(cluster, "h0", UID), "{}"))).returncode)

    for _ in range(5):
        for f in tmp_path.glob("*.lease"):
            f.unlink()
        print_ = look.fingerprint(looked(tmp_path), set())
        results.clear()
        threads = [threading.Thread(target=take, args=(c,)) for c in ("one", "two", "three")]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(results) == [0, 4, 4] and len(list(tmp_path.glob("*.lease"))) == 1


def test_what_look_lists_is_bounded_and_only_regular_files_with_plain_names(tmp_path):
    Session(tmp_path, "e" * 16).end()
    (tmp_path / "ok.h0.0.lease").write_text("{}")
    (tmp_path / "link.h0.0.lease").symlink_to("/etc/shadow")
    os.mkfifo(tmp_path / "pipe.h0.0.lease")
    (tmp_path / "we$(id)ird.lease").write_text("{}")
    (tmp_path / "big.h0.0.lease").write_text("x" * 100_000)
    start = time.monotonic()
    folder = looked(tmp_path)
    assert time.monotonic() - start < 5                    # a FIFO is never opened
    names = [line.split()[1] for line in folder.lines]
    assert names == ["big.h0.0.lease", "ok.h0.0.lease"]
    big = next(u for u in folder.unreadable if u.file == "big.h0.0.lease")
    assert big.why.startswith("longer than")


def test_a_folder_that_cannot_be_used_is_named_with_what_to_do(tmp_path):
    (tmp_path / "file").write_text("")
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    for folder, says in ((tmp_path / "file" / "leases", "cannot make the lease folder"),
                         (tmp_path / "link", "is a symbolic link")):
        session = Session(folder, "f" * 16)
        assert session.said == "" and says in session.proc.stderr.read().decode()
        assert session.proc.wait(10) == 3


# Skipped without root on a developer's machine; under CI=true it runs and fails instead.
needs_root = pytest.mark.skipif(not IN_CI and (os.getuid() != 0 or shutil.which("setpriv") is None),
                                reason="plays a second user with setpriv (root only)")


@pytest.fixture
def shared():
    """A folder other users can write in, as /var/tmp (pytest's own are root's alone)."""
    folder = Path(tempfile.mkdtemp(prefix="tfc-leases-", dir="/tmp"))
    folder.chmod(0o1777)
    yield folder
    shutil.rmtree(folder)


@needs_root
def test_another_users_lease_is_never_removed_or_replaced_and_its_break_is_a_tombstone(shared):
    folder = shared / "leases"
    Session(folder, "1" * 16).end()                         # root made the folder: mode 1777, root's
    lease = a_lease(uid=65534)
    name = lf.lease_file("demo", "h0", 65534)
    assert host(folder, "change", "-", stdin=writes((name, lf.lease_text(lease))), user="65534").returncode == 0
    # Another user (not root: root may do anything) cannot remove it, nor write under its name.
    other = "65533"
    assert host(folder, "change", "-", stdin=f"remove {name}\n", user=other).returncode == 0
    assert (folder / name).exists()
    refused = host(folder, "change", "-", stdin=writes((name, "{}")), user=other)
    assert refused.returncode == 3 and "cannot write" in refused.stderr and (folder / name).read_text() != "{}"
    # What breaking does instead: a tombstone of its own, beside it.
    stone = lf.tombstone_file(lease.id, 65533)
    assert host(folder, "change", "-", stdin=writes((stone, "{}")), user=other).returncode == 0
    assert (folder / stone).stat().st_uid == 65533
    assert host(folder, "release", "demo", "h0", user=other).stdout == "released 0\n"
    assert host(folder, "release", "demo", "h0", user="65534").stdout == "released 1\n"


@needs_root
def test_a_folder_another_user_made_private_is_refused_naming_owner_and_mode(shared):
    folder = shared / "leases"
    folder.mkdir(mode=0o755)
    session = Session(folder, "2" * 16, user="65534")
    said = session.proc.stderr.read().decode()
    assert session.said == "" and "cannot write in the lease folder" in said and "(owner root, mode 755)" in said
    assert "set lease_dir in the inventory" in said


@needs_root
def test_a_folder_another_account_owns_or_can_empty_is_refused_naming_the_fix(shared):
    # Made first by another account (1777, theirs): they could remove anyone's lease in it.
    folder = shared / "theirs"
    Session(folder, "4" * 16, user="65534").end()
    assert oct(folder.stat().st_mode & 0o7777) == "0o755" and folder.stat().st_uid == 65534   # theirs alone
    folder.chmod(0o1777)
    refused = host(folder, "change", "-", stdin=writes(("x.h0.65533.lease", "{}")), user="65533")
    assert refused.returncode == 3 and "belongs to" in refused.stderr and "could remove or replace anyone's lease" \
        in refused.stderr and f"sudo chown root:root {folder} && sudo chmod 1777 {folder}" in refused.stderr
    assert not (folder / "x.h0.65533.lease").exists()
    assert Session(folder, "5" * 16, user="65534").said == "held"          # its owner may use it: theirs alone
    # Root's, but writable by all and not sticky: anyone could remove a lease.
    loose = shared / "loose"
    loose.mkdir(mode=0o777)
    loose.chmod(0o777)
    session = Session(loose, "6" * 16, user="65533")
    said = session.proc.stderr.read().decode()
    assert session.said == "" and "is writable by others but not sticky (owner root, mode 777)" in said and "chmod +t" in said
    # Inside a folder another account may rename things in: the lease folder could be moved away.
    (shared / "open").mkdir(mode=0o777)
    (shared / "open").chmod(0o777)
    session = Session(shared / "open" / "leases", "7" * 16)
    said = session.proc.stderr.read().decode()
    assert session.said == "" and f"{shared / 'open'}, above the lease folder" in said and "not sticky" in said


@needs_root
def test_a_folder_planted_at_a_lease_name_is_refused_and_swallows_nothing(shared):
    folder = shared / "leases"
    Session(folder, "8" * 16).end()
    name = lf.lease_file("demo", "h0", 65533)
    planted = folder / name
    subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "mkdir", "-m", "777", str(planted)],
                   check=True)
    refused = host(folder, "change", "-", stdin=writes((name, lf.lease_text(a_lease(uid=65533)))), user="65533")
    assert refused.returncode == 3 and f"{planted} is not a file" in refused.stderr, refused.stderr
    assert list(planted.iterdir()) == [] and not list(folder.glob(".tfc-*"))        # nothing moved inside


def test_more_lease_files_than_it_lists_hide_nothing_the_host_is_refused(tmp_path):
    Session(tmp_path, "9" * 16).end()
    (tmp_path / lf.lease_file("zz-real", "h0", UID)).write_text(lf.lease_text(replace(a_lease(), cluster="zz-real")))
    for i in range(on_host.MAX_FILES):                                       # junk that sorts first
        (tmp_path / f"a{i:04d}.h0.{UID}.lease").write_text("{}")
    folder = looked(tmp_path)
    assert folder.leases == [] and folder.unreadable == [] and folder.lines == []
    assert folder.crowded == [("lease", on_host.MAX_FILES + 1, "root", on_host.MAX_FILES + 1)]
    assert 'MAX_FILES=%d' % on_host.MAX_FILES in on_host.HOST_SCRIPT.read_text()


def test_the_host_tells_its_clock_in_milliseconds(tmp_path):
    folder = looked(tmp_path)
    assert abs(folder.clock_ms - time.time() * 1000) < 5000 and folder.clock_ms // 1000 in (folder.now, folder.now + 1)


def test_the_change_script_writes_only_lease_folder_names(tmp_path):
    Session(tmp_path, "3" * 16).end()
    for bad in ("../x.lease", ".hidden.lease", "x.sh", "a b.lease"):
        answer = host(tmp_path, "change", "-", stdin=writes((bad, "{}")))
        assert answer.returncode == 2, bad
    assert sorted(p.name for p in tmp_path.iterdir()) == []
