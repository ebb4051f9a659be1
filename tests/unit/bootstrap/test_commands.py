"""The commands bootstrap runs on a host: POSIX shell (dash), values only as arguments or plan
lines that are checked, sudo that never takes a password from the command line, and the pieces
that move files run here for real in a folder (resume, a damaged file refused)."""
from __future__ import annotations

import hashlib
import shlex
import subprocess

import pytest

from launcher.bootstrap import commands
from launcher.ssh.connection import quote_command


def sh(argv: list[str], stdin: bytes = b"") -> subprocess.CompletedProcess:
    """A command as the host's `sh` runs it: the quoted line through dash."""
    return subprocess.run(["dash", "-c", quote_command(argv)], input=stdin, capture_output=True, timeout=60)


@pytest.mark.parametrize("script", [commands.APPLY, commands.START, commands.look(0)[2], commands.receive_deb("/s", "a_1_all.deb", "0" * 64, 0)[2],
                                    commands.debs_present("/s", [])[2], commands.prepare_stage("/s")[2]])
def test_every_script_is_posix_shell(script):
    assert subprocess.run(["dash", "-n"], input=script, text=True, capture_output=True).returncode == 0


def test_sudo_never_waits_for_a_password_and_takes_one_on_stdin_only():
    assert commands.sudo(["true"], with_password=False) == ["sudo", "-n", "--", "true"]
    assert commands.sudo(["true"], with_password=True) == ["sudo", "-S", "-p", "", "--", "true"]
    started = commands.start_apply("/home/admin/.cache/tfcompose/bootstrap/plan", with_password=True)
    assert started[:5] == ["sudo", "-S", "-p", "", "--"] and started[-1] == "/home/admin/.cache/tfcompose/bootstrap/plan"


def test_the_plan_file_says_what_to_do_one_checked_value_a_line():
    text = commands.plan_text(user="admin", stage="/home/admin/.cache/tfcompose/bootstrap", lock_wait_s=300.7,
                              offline=False, mirror="http://deb.debian.org/debian", repositories=[("docker", "docker.asc", "docker.sources")],
                              next_release=("trixie", ["docker-compose"]), install=["docker.io", "docker-compose"],
                              debs=[("ab" * 32, "x_1.0_amd64.deb")], start=True, group=True, folders=["/opt/tfcompose"])
    assert text.splitlines() == [
        "user admin", "stage /home/admin/.cache/tfcompose/bootstrap", "lock_wait 300", "offline 0",
        "mirror http://deb.debian.org/debian", "repo docker docker.asc docker.sources", "next trixie docker-compose",
        "install docker.io", "install docker-compose", f"deb {'ab' * 32} x_1.0_amd64.deb", "start", "group",
        "folder /opt/tfcompose"]
    for bad in ("a b", "a\nfinish_dpkg", "$(reboot)", "x;y", "", "a`b`"):
        with pytest.raises(commands.Unsafe):
            commands.plan_text(user="admin", stage="/s", lock_wait_s=1, offline=True, folders=[bad])


def test_a_deb_arrives_whole_or_resumes_from_its_part_and_a_damaged_one_is_dropped(tmp_path):
    stage = str(tmp_path)
    assert sh(commands.prepare_stage(stage)).returncode == 0
    data = bytes(range(256)) * 4000
    digest = hashlib.sha256(data).hexdigest()
    name = "docker.io_20.10.24+dfsg1-1_amd64.deb"
    assert sh(commands.debs_present(stage, [name])).stdout == b""
    (tmp_path / "debs" / f".{name}.part").write_bytes(data[:300_000])        # a cut transfer left this
    assert sh(commands.debs_present(stage, [name])).stdout.decode().split() == ["part", "300000", name]
    done = sh(commands.receive_deb(stage, name, digest, 300_000), data[300_000:])
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "debs" / name).read_bytes() == data and not (tmp_path / "debs" / f".{name}.part").exists()
    assert sh(commands.debs_present(stage, [name])).stdout.decode().split() == [digest, name]
    bad = sh(commands.receive_deb(stage, "other_1_all.deb", digest, 0), data[:-1] + b"x")
    assert bad.returncode == 4 and b"arrived damaged" in bad.stderr
    assert sorted(p.name for p in (tmp_path / "debs").iterdir()) == [name]
    wrong_offset = sh(commands.receive_deb(stage, "third_1_all.deb", digest, 10), b"rest")
    assert wrong_offset.returncode == 3


def test_looking_at_the_install_reads_its_log_from_an_offset_up_to_its_size(tmp_path):
    (tmp_path / "run.log").write_bytes(b"TFC-STEP install docker.io\n\xff\xfebinary\nTFC-DONE\n")
    (tmp_path / "status").write_text("0\n")
    out = sh(commands.look(0, str(tmp_path))).stdout
    head, _, log = out.partition(b"---\n")
    assert b"status=0" in head and b"alive=no" in head and b"size=45" in head
    assert log == (tmp_path / "run.log").read_bytes()
    assert sh(commands.look(27, str(tmp_path))).stdout.partition(b"---\n")[2] == b"\xff\xfebinary\nTFC-DONE\n"
    assert sh(commands.look(45, str(tmp_path))).stdout.partition(b"---\n")[2] == b""


def test_the_probe_and_every_command_quote_their_values():
    argv = commands.probe("/opt/a b;reboot", "", "10.0.0.2;reboot")
    assert shlex.split(quote_command(argv))[-4] == "/opt/a b;reboot"
    assert shlex.split(quote_command(argv))[-1] == "10.0.0.2;reboot"
