"""The relayed ship's policy, key lines and shell pieces (the hop script and the authorized_keys
edits run for real in sh here, with a stand-in `ssh` and `docker`); the chain over real sshd and
Docker engines in network namespaces is tests/integration/test_relay_lab.py."""
from __future__ import annotations

import gzip
import os
import stat
import subprocess
from pathlib import Path
import pytest
from launcher.image import relay
from support.builders import chain_hosts


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


def run_hop(tmp_path: Path, ssh_body: str, payload: bytes) -> subprocess.CompletedProcess:
    folder = tmp_path / "relay"
    folder.mkdir()
    hop = relay.Hop(A, str(folder), after=B)
    (folder / "hop.sh").write_text(relay.hop_script(hop))
    return subprocess.run(["sh", str(folder / "hop.sh")], input=gzip.compress(payload), env=stand_ins(tmp_path, ssh_body),
                          capture_output=True, timeout=60)


def test_a_hop_loads_what_arrives_and_passes_the_same_bytes_on(tmp_path):
    payload = os.urandom(3 << 20)
    proc = run_hop(tmp_path, 'cat > "$OUT/forwarded"', payload)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "loaded").read_bytes() == payload
    assert gzip.decompress((tmp_path / "forwarded").read_bytes()) == payload
    assert (tmp_path / "relay" / "next.status").read_text().strip() == "0"


def test_a_broken_next_hop_does_not_stop_this_host_loading(tmp_path):
    payload = os.urandom(3 << 20)
    proc = run_hop(tmp_path, 'echo "Host key verification failed." >&2; exit 255', payload)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "loaded").read_bytes() == payload
    report = subprocess.run(relay.hop_report_command(str(tmp_path / "relay")), capture_output=True, text=True).stdout
    assert relay.why_broken(report) == "the hop ended with status 255: Host key verification failed."


def shell(command: list[str], home: Path) -> subprocess.CompletedProcess:
    return subprocess.run(command, env={**os.environ, "HOME": str(home)}, capture_output=True, text=True, check=True)


def test_keys_are_added_then_removed_leaving_every_other_line(tmp_path):
    (tmp_path / ".ssh").mkdir()
    keys = tmp_path / ".ssh" / "authorized_keys"
    keys.write_text("ssh-ed25519 AAAAuser me@laptop")         # no newline at the end
    keys.chmod(0o600)
    ours = relay.marker("c1", "t0k")
    shell(relay.authorize_command(f"restrict ssh-ed25519 AAAAhop {ours}"), tmp_path)
    shell(relay.authorize_command(f"restrict ssh-ed25519 AAAAother {relay.marker('c10', 'x')}"), tmp_path)
    assert keys.read_text().splitlines()[0] == "ssh-ed25519 AAAAuser me@laptop" and ours in keys.read_text()
    folder = tmp_path / "c1" / ".relay-t0k"
    folder.mkdir(parents=True)
    (folder / "key").write_text("secret")
    shell(relay.revoke_command(relay.marker("c1"), str(tmp_path / "c1")), tmp_path)
    assert keys.read_text().splitlines() == ["ssh-ed25519 AAAAuser me@laptop",
                                             f"restrict ssh-ed25519 AAAAother {relay.marker('c10', 'x')}"]
    assert stat.S_IMODE(keys.stat().st_mode) == 0o600 and not folder.exists()


def test_removing_keys_where_there_is_no_authorized_keys_file_is_fine(tmp_path):
    shell(relay.revoke_command(relay.marker("c1"), str(tmp_path / "nothing")), tmp_path)
