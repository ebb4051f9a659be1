"""Which data_dirs the sync may fill: the marker and this machine's record (dataset/claims.py)."""
from __future__ import annotations

import pytest

from launcher.dataset import claims
from support.builders import host

H = host("h1", 1, data_dir="/data/oasis")
MARKER = claims.marker_text("c1", "/data/oasis", "abc")


def look(kind: str, marker: str = "", inode: str = "") -> dict:
    return {"kind": kind, "marker": marker, "inode": inode}


@pytest.mark.parametrize("seen, recorded, verdict, says", [
    (look("absent"), set(), claims.FRESH, ""),
    (look("empty"), set(), claims.FRESH, ""),
    (look("marked", MARKER, "42"), {claims.Claim("abc", 42)}, claims.OURS, ""),
    (look("marked", MARKER, "43"), {claims.Claim("abc", 42)}, "foreign", "did not write there"),  # cp -a: a new inode
    (look("marked", MARKER, "42"), set(), "foreign", "did not write there"),                    # never recorded here
    (look("marked", claims.marker_text("c2", "/data/oasis", "abc"), "42"), {claims.Claim("abc", 42)}, "foreign",
     "another cluster or folder"),
    (look("marked", "junk", "42"), {claims.Claim("abc", 42)}, "foreign", "did not write"),
    (look("symlink"), set(), "foreign", "symbolic link"),
    (look("foreign"), set(), "foreign", "did not put there"),
    (look("notdir"), set(), "foreign", "not a folder"),
])
def test_only_a_folder_this_machine_claimed_and_still_holding_that_very_marker_is_ours(seen, recorded, verdict, says):
    got, why = claims.ownership("c1", H, seen, frozenset(recorded))
    assert got == verdict and says in why


def test_the_record_survives_a_restart_and_a_broken_one_claims_nothing(tmp_path):
    path = tmp_path / "state" / "datasets.json"
    record = claims.Claims(path)
    record.record("c1|/data/oasis", claims.Claim("abc", 42))
    record.record("c1|/data/oasis", claims.Claim("def", 7))
    assert claims.Claims(path).get("c1|/data/oasis") == {claims.Claim("abc", 42), claims.Claim("def", 7)}
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    path.write_text('{"c1|/data/oasis": "not a list of claims"')
    assert claims.Claims(path).get("c1|/data/oasis") == frozenset()


def test_what_a_host_says_of_its_folder_is_read_as_data():
    text = "kind=marked\ninode=42\nmarker=" + MARKER + "\nextra junk line\n"
    assert claims.parse_look(text) == {"kind": "marked", "inode": "42", "marker": MARKER, "why": ""}
    assert claims.parse_look("")["kind"] == ""


def test_a_marker_read_while_another_host_rewrites_it_is_read_whole_or_said_unreadable(tmp_path):
    # Two hosts looking at one synced folder at the same moment (NFS, or two hosts on one machine)
    # once refused it as carrying "a .tfcompose-dataset that tfcompose did not write". The look reads
    # inode and text from one open file, and what it cannot read it calls unreadable, not foreign.
    import json
    import os
    import subprocess
    import threading
    from launcher import docker_commands as dc
    folder = tmp_path / "data"
    (folder / "train").mkdir(parents=True)
    text = claims.marker_text("c", str(folder), "a" * 16)
    marker = folder / ".tfcompose-dataset"
    marker.write_text(text)
    stop = threading.Event()

    def rewrite() -> None:                           # what a claim on a shared folder does
        n = 0
        while not stop.is_set():
            tmp = folder / f".tfcompose-dataset.{n % 2}"
            tmp.write_text(text)
            os.replace(tmp, marker)
            n += 1
    writer = threading.Thread(target=rewrite)
    writer.start()
    try:
        for _ in range(60):
            look = claims.parse_look(subprocess.run(dc.dataset_look(str(folder)), capture_output=True, text=True).stdout)
            assert look["kind"] == "marked" and json.loads(look["marker"])["claim"] == "a" * 16 and look["inode"].isdigit()
    finally:
        stop.set()
        writer.join()
    verdict, why = claims.ownership("c", host("h0", data_dir=str(folder)),
                                    {"kind": "unreadable", "marker": "", "inode": "", "why": "Stale file handle"}, frozenset())
    assert verdict == "foreign" and "could not be read (Stale file handle); run `up` again" in why
