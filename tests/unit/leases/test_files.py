"""The lease folder's files as the host lists them: hostile input, taken only when it is what
tfcompose writes (bounded, type-checked, named after its content and its owner)."""
from __future__ import annotations

import json

import pytest

from launcher.leases import files as lf
from launcher.leases.files import Entry, Gpus, Lease, Tombstone, Unreadable
from support.lease_host import demo_lease


def entry(text: str, name: str = "demo.h1.1000.lease", uid: int = 1000) -> Entry:
    return Entry(name, uid, "alice", text)


def test_what_tfcompose_writes_it_reads_back_the_same():
    lease = demo_lease()
    read = lf.parse_entry(entry(lf.lease_text(lease)))
    assert read == Lease(**{**vars(lease), "text": lf.lease_text(lease)})
    stone = Tombstone("0123456789abcdef", "bob", "bob@desk", 1_700_000_100, uid=1001, file="0123456789abcdef.1001.broken")
    assert lf.parse_entry(Entry(stone.file, 1001, "bob", lf.tombstone_text(stone))) == stone


def test_a_lease_names_the_run_as_up_names_it():
    # The run id `up` chose is what the lease holds; a lease the reader refused would hide a live run.
    import datetime as dt

    from launcher import runs
    run = runs.new_run_id("983df86f0a1b", dt.datetime(2026, 11, 25, 17, 20, 51, tzinfo=dt.timezone.utc))
    lease = demo_lease(run=run)
    assert lf.parse_entry(entry(lf.lease_text(lease))).run == run


@pytest.mark.parametrize("inventory, ids, every", [
    ("all", set(), True), (0, set(), False), (2, {0, 1}, False), ([1, 3], {1, 3}, False)])
def test_the_inventorys_gpus_as_a_set(inventory, ids, every):
    # A count N is the first N GPUs: what Docker's `count: N` gives a container.
    assert lf.gpus_of(inventory) == Gpus(every=every, ids=frozenset(ids))


@pytest.mark.parametrize("a, b, overlap", [
    ("all", "all", True), ("all", [3], True), ("all", 0, False), (0, 0, False), ([0, 1], [1, 2], True),
    ([0, 1], [2, 3], False), (2, [1], True), (2, [2], False)])
def test_gpu_sets_overlap_when_they_share_a_gpu(a, b, overlap):
    assert lf.gpus_of(a).overlaps(lf.gpus_of(b)) is overlap
    assert lf.gpus_of(b).overlaps(lf.gpus_of(a)) is overlap


def doc(**changes) -> str:
    base = json.loads(lf.lease_text(demo_lease()))
    base.update(changes)
    return json.dumps(base)


HOSTILE = [
    ("not json", "{not json", "not JSON"),
    ("a list", "[]", "not a tfcompose lease"),
    ("another schema", doc(schema=2), "not a tfcompose lease"),
    ("a ticket named as a lease", doc(tfcompose="ticket"), "not a tfcompose lease"),
    ("cluster with a newline", doc(cluster="demo\nx"), "cluster"),
    ("cluster is a path", doc(cluster="../../etc"), "cluster"),
    ("run with escape sequences", doc(run="\x1b]0;owned\x07"), "run"),
    ("launcher with a bidi override", doc(launcher="alice\u202e@laptop"), "launcher"),
    ("since is a string", doc(since="yesterday"), "since"),
    ("since is a bool", doc(since=True), "since"),
    ("since far in the future", doc(since=10 ** 15), "since"),
    ("gpus is a dict", doc(gpus={"0": 1}), "gpus"),
    ("gpus holds a negative id", doc(gpus=[-1]), "gpus"),
    ("gpus holds a bool", doc(gpus=[True]), "gpus"),
    ("gpus is huge", doc(gpus=list(range(1100))), "gpus"),
    ("ports out of range", doc(ports=[70000]), "ports"),
    ("ports are strings", doc(ports=["2222"]), "ports"),
    ("a field missing", json.dumps({k: v for k, v in json.loads(doc()).items() if k != "session"}), "session"),
    ("megabytes of padding", doc(launcher="a" * 9000), "longer than"),
]


@pytest.mark.parametrize("case, text, why", HOSTILE, ids=[c[0] for c in HOSTILE])
def test_a_hostile_lease_file_is_unreadable_and_says_why(case, text, why):
    found = lf.parse_entry(entry(text))
    assert isinstance(found, Unreadable) and why in found.why


def test_a_lease_is_its_owners_only_under_its_own_name():
    text = lf.lease_text(demo_lease())
    # Written by bob (uid 1001) under alice's name: the file system says who wrote it.
    assert isinstance(lf.parse_entry(entry(text, uid=1001)), Unreadable)
    assert isinstance(lf.parse_entry(entry(text, name="other.h1.1000.lease")), Unreadable)
    assert isinstance(lf.parse_entry(entry(text, name="demo.h1.1000.ticket")), Unreadable)
