"""The relayed ship's policy, key lines and shell pieces (the hop script and the authorized_keys
edits run for real in sh here, with a stand-in `ssh` and `docker`); the chain over real sshd and
Docker engines in network namespaces is tests/integration/test_relay_lab.py."""
from __future__ import annotations

import gzip
import io
import json
import os
import stat
import subprocess
import tarfile
from pathlib import Path

import pytest

from launcher.image import hop_check, layers, relay
from support.common import require
from support.builders import BLOBS, chain_hosts, chunks_of, docker_save


A, B, C = chain_hosts()


@pytest.mark.parametrize("setting, lacking, chain", [
    ("auto", ["a", "b"], []), ("auto", ["a", "b", "c"], ["a", "b", "c"]), ("on", ["a"], []),
    ("on", ["a", "b"], ["a", "b"]), ("off", ["a", "b", "c", "d"], [])])
def test_a_chain_only_where_the_setting_says_it_is_worth_it(setting, lacking, chain):
    assert relay.chain_for(setting, lacking) == chain


def test_the_key_line_allows_only_the_hop_script_from_the_previous_host():
    key = relay.make_key()
    hops = relay.plan_hops([A, B, C], "t0k")
    line = relay.authorized_line(key, hops[1], "c1", "t0k")
    assert line.startswith('command="sh /srv/tfc/c1/.relay-t0k/hop.sh",from="10.0.0.2",restrict ssh-ed25519 ')
    assert line.endswith(" tfcompose-relay:c1:t0k") and key.public in line
    assert "PRIVATE" not in line and "PRIVATE" not in repr(key) and "BEGIN OPENSSH PRIVATE KEY" in key.private


def test_a_host_name_is_allowed_by_every_address_it_resolves_to():
    assert relay.from_pattern("lab-c.example", lambda name: ["10.0.0.4", "10.0.0.4", "fd00::4"]) == "10.0.0.4,fd00::4"
    assert relay.from_pattern("fd00::4") == "fd00::4"


def test_each_hop_knows_only_its_next_host():
    hops = relay.plan_hops([A, B, C], "t0k")
    assert [(h.before and h.before.name, h.after and h.after.name) for h in hops] == [(None, "b"), ("a", "c"), ("b", None)]
    script = relay.hop_script(hops[0])
    assert "-p 2222 " in script and " tfc@10.0.0.3 <" in script and "StrictHostKeyChecking=yes" in script
    assert "ssh" not in relay.hop_script(hops[2])


# --- the shell, for real -----------------------------------------------------------------------
def stand_ins(tmp_path: Path, ssh_body: str) -> dict[str, str]:
    """`docker load` and `ssh` stand-ins: each writes what it reads to a file."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in {"docker": 'cat > "$OUT/loaded"', "ssh": ssh_body}.items():
        path = bin_dir / name
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "OUT": str(tmp_path)}


@pytest.fixture
def archive(tmp_path):
    """A docker-archive of three layers made as `up` makes it, and what a hop expects of it."""
    saved, image_id = docker_save(BLOBS)
    parts = layers.split_save("t:1", image_id, chunks_of(saved), tmp_path / "cache")
    return b"".join(parts.chunks([1, 2])), parts.expectation([1, 2])


def run_hop(tmp_path: Path, ssh_body: str, payload: bytes, expect: dict) -> subprocess.CompletedProcess:
    folder = tmp_path / "relay"
    folder.mkdir()
    (folder / "hop.sh").write_text(relay.hop_script(relay.Hop(A, str(folder), after=B)))
    (folder / "check.py").write_text(relay.CHECK_SCRIPT.read_text())
    (folder / "expect.json").write_text(json.dumps(expect))
    return subprocess.run(["sh", str(folder / "hop.sh")], input=payload, env=stand_ins(tmp_path, ssh_body),
                          capture_output=True, timeout=60)


def members(tar_bytes: bytes) -> list[str]:
    with tarfile.open(fileobj=io.BytesIO(tar_bytes)) as tar:
        return tar.getnames()


def test_a_hop_loads_what_arrives_and_passes_the_same_bytes_on(tmp_path, archive):
    payload, expect = archive
    proc = run_hop(tmp_path, 'cat > "$OUT/forwarded"', payload, expect)
    assert proc.returncode == 0, proc.stderr
    assert members((tmp_path / "loaded").read_bytes()) == members(gzip.decompress(payload))
    assert (tmp_path / "forwarded").read_bytes() == payload
    assert (tmp_path / "relay" / "next.status").read_text().strip() == "0"


def test_a_broken_next_hop_does_not_stop_this_host_loading(tmp_path, archive):
    payload, expect = archive
    proc = run_hop(tmp_path, 'echo "Host key verification failed." >&2; exit 255', payload, expect)
    assert proc.returncode == 0, proc.stderr
    assert members((tmp_path / "loaded").read_bytes()) == members(gzip.decompress(payload))
    report = subprocess.run(relay.hop_report_command(str(tmp_path / "relay")), capture_output=True, text=True).stdout
    assert relay.why_broken(report) == "the hop ended with status 255: Host key verification failed."


def foreign_archive(tag: str) -> bytes:
    """Another image, tagged as someone else wants: what a compromised host before this one sends."""
    saved, _ = docker_save([b"attacker layer"], tag=tag)
    return gzip.compress(saved)


@pytest.mark.parametrize("make", [
    lambda payload: foreign_archive("victim:latest"),                            # another image, another tag
    lambda payload: foreign_archive("t:1"),                                      # another image under our tag
    lambda payload: with_entry(payload, "repositories", b'{"victim": {"latest": "' + b"a" * 64 + b'"}}'),
])
def test_a_hop_loads_nothing_but_the_image_this_up_ships(tmp_path, archive, make):
    payload, expect = archive
    proc = run_hop(tmp_path, 'cat > "$OUT/forwarded"', make(payload), expect)
    assert proc.returncode == 3 and b"tfcompose relay: refused" in proc.stderr, proc.stderr
    loaded = (tmp_path / "loaded").read_bytes()
    assert b"victim" not in loaded and b"attacker layer" not in loaded


def with_entry(payload: bytes, name: str, data: bytes) -> bytes:
    """Our archive with one more entry (docker load reads legacy tags from `repositories`)."""
    out = io.BytesIO()
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(payload))) as tar, tarfile.open(fileobj=out, mode="w") as new:
        for member in tar:
            new.addfile(member, tar.extractfile(member))
        info = tarfile.TarInfo(name)
        info.size = len(data)
        new.addfile(info, io.BytesIO(data))
    return gzip.compress(out.getvalue())


def test_the_check_passes_exactly_the_expected_entries(archive):
    payload, expect = archive
    out = io.BytesIO()
    hop_check.check(expect, io.BytesIO(gzip.decompress(payload)), out)
    assert members(out.getvalue()) == members(gzip.decompress(payload))
    with pytest.raises(hop_check.Refused, match="not a layer this image ships"):
        hop_check.check({**expect, "layers": expect["layers"][:1]}, io.BytesIO(gzip.decompress(payload)), io.BytesIO())


def shell(command: list[str], home: Path, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(command, env={**os.environ, "HOME": str(home)}, capture_output=True, text=True, check=check)


def test_keys_are_added_then_removed_leaving_every_other_line(tmp_path):
    (tmp_path / ".ssh").mkdir()
    keys = tmp_path / ".ssh" / "authorized_keys"
    keys.write_text("ssh-ed25519 AAAAuser me@laptop")         # no newline at the end
    keys.chmod(0o644)
    ours = relay.marker("c1", "t0k")
    shell(relay.authorize_command(f"restrict ssh-ed25519 AAAAhop {ours}"), tmp_path)
    shell(relay.authorize_command(f"restrict ssh-ed25519 AAAAother {relay.marker('c10', 'x')}"), tmp_path)
    assert keys.read_text().splitlines()[0] == "ssh-ed25519 AAAAuser me@laptop" and ours in keys.read_text()
    folder = tmp_path / "c1" / ".relay-t0k"
    folder.mkdir(parents=True)
    (folder / "key").write_text("secret")
    (folder / relay.FOLDER_MARKER).write_text("c1 t0k\n")
    for command in relay.revoke_commands("c1", "", str(tmp_path / "c1")):
        shell(command, tmp_path)
    assert keys.read_text().splitlines() == ["ssh-ed25519 AAAAuser me@laptop",
                                             f"restrict ssh-ed25519 AAAAother {relay.marker('c10', 'x')}"]
    assert stat.S_IMODE(keys.stat().st_mode) == 0o644 and not folder.exists()
    assert [p.name for p in (tmp_path / ".ssh").iterdir()] == ["authorized_keys"]   # no temporary file left


def test_removing_keys_where_there_is_no_authorized_keys_file_is_fine(tmp_path):
    for command in relay.revoke_commands("c1", "", str(tmp_path / "nothing")):
        assert shell(command, tmp_path).stdout.strip() in ("", "0")


def test_a_folder_that_is_not_this_clusters_relay_folder_is_left_alone(tmp_path):
    notes, other = tmp_path / "c1" / ".relay-notes", tmp_path / "c1" / ".relay-abc"
    notes.mkdir(parents=True)
    (notes / "mine.txt").write_text("my notes")
    other.mkdir()
    (other / relay.FOLDER_MARKER).write_text("c2 abc\n")                    # another cluster's
    shell(relay.revoke_commands("c1", "", str(tmp_path / "c1"))[1], tmp_path)
    assert (notes / "mine.txt").read_text() == "my notes" and other.exists()


def test_a_relay_process_is_ended_even_where_the_workdir_holds_regex_characters(tmp_path):
    folder = tmp_path / "w+rk (1)" / "c1" / ".relay-t0k"
    folder.mkdir(parents=True)
    (folder / relay.FOLDER_MARKER).write_text("c1 t0k\n")
    (folder / "hop.sh").write_text("sleep 300\n")
    hop = subprocess.Popen(["sh", str(folder / "hop.sh")])
    try:
        shell(relay.revoke_commands("c1", "t0k", str(folder.parent))[1], tmp_path)
        assert hop.wait(timeout=10) is not None and not folder.exists()
    finally:
        hop.kill()


@pytest.fixture
def tiny_disk(tmp_path):
    """A home whose ~/.ssh is a real 64 KiB filesystem (tmpfs): it can be filled up."""
    require(os.getuid() == 0, "mounting a tmpfs needs root")
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(home / ".ssh")], check=True)
    yield home
    subprocess.run(["umount", str(home / ".ssh")], check=True)


def test_a_full_disk_never_empties_or_cuts_authorized_keys(tiny_disk):
    keys = tiny_disk / ".ssh" / "authorized_keys"
    original = "".join(f"ssh-ed25519 AAAA{i:04d}{'x' * 60} user{i}\n" for i in range(300))
    ours = f"restrict ssh-ed25519 AAAAhop {relay.marker('c1', 't0k')}"
    keys.write_text(original + ours + "\n")
    with open(tiny_disk / ".ssh" / "filler", "wb") as fh:        # the relayed load filled the disk
        try:
            fh.write(b"x" * (1 << 20))
        except OSError:
            pass
    removed = shell(relay.revoke_commands("c1", "t0k", str(tiny_disk / "c1"))[0], tiny_disk, check=False)
    assert removed.returncode == 3 and "left as it was" in removed.stderr
    assert keys.read_text() == original + ours + "\n"
    added = shell(relay.authorize_command(ours.replace("AAAAhop", "AAAAnext")), tiny_disk, check=False)
    assert added.returncode == 3 and keys.read_text() == original + ours + "\n"
    assert sorted(p.name for p in (tiny_disk / ".ssh").iterdir()) == ["authorized_keys", "filler"]


def test_a_folder_that_cannot_be_written_refuses_the_key_instead_of_keeping_it(tmp_path):
    require(os.getuid() == 0, "chattr needs root")
    (tmp_path / ".ssh").mkdir()
    keys = tmp_path / ".ssh" / "authorized_keys"
    keys.write_text("ssh-ed25519 AAAAuser me@laptop\n")
    subprocess.run(["chattr", "+i", str(tmp_path / ".ssh")], check=True)
    try:
        added = shell(relay.authorize_command(f"restrict ssh-ed25519 AAAAhop {relay.marker('c1', 't')}"), tmp_path,
                      check=False)
        assert added.returncode == 3 and "could not be removed again" in added.stderr
        assert keys.read_text() == "ssh-ed25519 AAAAuser me@laptop\n"
    finally:
        subprocess.run(["chattr", "-i", str(tmp_path / ".ssh")], check=True)


def test_a_linked_authorized_keys_is_edited_beside_its_target_and_stays_a_link(tmp_path):
    (tmp_path / ".ssh").mkdir()
    (tmp_path / "keys").mkdir()
    target = tmp_path / "keys" / "authorized_keys"
    target.write_text("ssh-ed25519 AAAAuser me@laptop\n")
    (tmp_path / ".ssh" / "authorized_keys").symlink_to(target)
    line = f"restrict ssh-ed25519 AAAAhop {relay.marker('c1', 't')}"
    shell(relay.authorize_command(line), tmp_path)
    assert (tmp_path / ".ssh" / "authorized_keys").is_symlink() and line in target.read_text()
    shell(relay.revoke_commands("c1", "t", str(tmp_path / "c1"))[0], tmp_path)
    assert target.read_text() == "ssh-ed25519 AAAAuser me@laptop\n"
