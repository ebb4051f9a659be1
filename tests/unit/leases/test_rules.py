"""Who may take what on a shared host: clashes, live and stale leases, the queue's order."""
from __future__ import annotations

from dataclasses import replace

import pytest

from launcher.leases import rules as rules
from launcher.leases.files import Gpus, Lease, Needs, Ticket, Tombstone, gpus_of
from launcher.leases.look import Folder

ALICE, BOB = 1000, 1001
NOW = 1_700_000_600


def needs(cluster="mine", host="h0", gpus=0, ports=(2222,)) -> Needs:
    return Needs(cluster, host, gpus_of(gpus), frozenset(ports))


def lease(cluster="theirs", host="h0", gpus=0, ports=(2222,), uid=BOB, session="a" * 16, lid="1" * 16, run="3f2a1b2c3d4e",
          since=1_700_000_000) -> Lease:
    owner = {ALICE: "alice", BOB: "bob"}[uid]
    return Lease(lid, cluster, host, run, owner, f"{owner}@desk", session, since, gpus_of(gpus), frozenset(ports),
                 uid=uid, owner=owner, file=f"{cluster}.{host}.{uid}.lease", text="{}")


def ticket(key, cluster="theirs", host="h0", gpus=0, ports=(2222,), uid=BOB, session="b" * 16) -> Ticket:
    owner = {ALICE: "alice", BOB: "bob"}[uid]
    return Ticket(key, cluster, host, owner, f"{owner}@desk", session, 1_700_000_300, gpus_of(gpus), frozenset(ports),
                  uid=uid, owner=owner, file=f"{key}.{host}.ticket")


def taker(key="1700000000500-aaaaaaaa", session="c" * 16) -> rules.Taker:
    return rules.Taker(ALICE, "alice", "alice@laptop", session, key)


def folder(*docs, alive=()) -> Folder:
    f = Folder(uid=ALICE, user="alice", now=NOW)
    for d in docs:
        {Lease: f.leases, Ticket: f.tickets, Tombstone: f.tombstones}[type(d)].append(d)
    f.sessions = {s: True for s in alive}
    return f


def decide(mine, f, containers=None, break_stale=False, who=None):
    return rules.decide(mine, who or taker(), f, {} if containers is None else containers, break_stale, "9" * 16)


@pytest.mark.parametrize("mine, theirs, clash", [
    (needs(gpus=[0, 1], ports=[2222]), needs("theirs", gpus=[1, 2], ports=[3333]), "GPUs 1"),
    (needs(gpus=[0], ports=[2222]), needs("theirs", gpus=[1], ports=[2222]), "port 2222"),
    (needs(gpus="all", ports=[2222, 2223]), needs("theirs", gpus=2, ports=[2223]), "GPUs 0,1 and port 2223"),
    (needs(gpus=[0], ports=[2222]), needs("theirs", gpus=[1], ports=[3333]), ""),
    (needs(gpus=0, ports=[2222]), needs("theirs", gpus="all", ports=[3333]), ""),    # a CPU-only cluster
    (needs(gpus=0, ports=[]), needs("theirs", gpus=0, ports=[]), ""),              # listens on nothing
    (needs(gpus=[0], ports=[2222]), needs("mine", gpus=[1], ports=[3333]), "the cluster name mine"),
])
def test_two_clusters_clash_on_common_gpus_ports_or_name(mine, theirs, clash):
    assert rules.clash(mine, theirs, same_owner=False) == clash


def test_a_live_lease_on_common_gpus_refuses_the_host_naming_who_since_when_and_what():
    f = folder(lease(gpus=[0, 1], ports=[3333]), alive=["a" * 16])
    d = decide(needs(gpus=[1, 2]), f)
    assert not d.free and d.lease is None and d.changes == []
    text = d.blockers[0].text(NOW)
    assert text.startswith("in use by bob's cluster theirs (run 3f2a1b2c3d4e, from bob@desk) since ")
    assert text.endswith("(0:10:00 ago): GPUs 1")


def test_disjoint_gpus_and_ports_share_a_host():
    f = folder(lease(gpus=[0], ports=[2222]), alive=["a" * 16])
    d = decide(needs(gpus=[1], ports=[2223]), f)
    assert d.free and d.changes[0][0:2] == ("write", f"mine.h0.{ALICE}.lease")
    assert d.lease.gpus == Gpus(ids=frozenset({1})) and d.lease.session == "c" * 16 and d.lease.since == NOW


@pytest.mark.parametrize("states, live, why", [
    ([], False, "stale: its containers are gone"),
    (["exited", "exited"], False, "stale: its run has ended (its containers exited)"),
    (["exited", "running"], True, "its containers run"),
    (["restarting"], True, "its containers run"),
    (["paused"], True, "its containers run"),
    (["created"], False, "stale: its run has ended (its containers exited)"),
])
def test_a_lease_whose_up_has_ended_lives_as_long_as_its_containers_run(states, live, why):
    held = lease()
    containers = {("theirs", "h0"): states} if states else {("theirs", "h1"): ["running"]}
    assert rules.lease_state(held, folder(held), containers) == rules.State(live, why)


def test_a_lease_whose_up_is_at_work_is_live_without_containers_and_unknown_docker_is_live():
    held = lease()
    assert rules.lease_state(held, folder(held, alive=["a" * 16]), {}).live
    assert rules.lease_state(held, folder(held), None) == rules.State(True, "taken as live: Docker did not answer")


def test_a_stale_lease_refuses_the_host_until_it_is_broken_and_a_live_one_is_never_broken():
    stale = lease(gpus=[0])
    d = decide(needs(gpus=[0]), folder(stale))
    assert d.blockers[0].kind == "stale" and "`up --break-lease` takes it" in d.blockers[0].text()
    d = decide(needs(gpus=[0]), folder(stale), break_stale=True)
    assert d.free and d.changes[0][:2] == ("write", f"{stale.id}.{ALICE}.broken")
    live = decide(needs(gpus=[0]), folder(stale, alive=["a" * 16]), break_stale=True)
    assert [b.kind for b in live.blockers] == ["live"]
    # Nor by a tombstone someone left: a tombstone frees only a lease that is still stale.
    stone = Tombstone(stale.id, "carol", "carol@x", NOW, uid=1002, file=f"{stale.id}.1002.broken")
    assert decide(needs(gpus=[0]), folder(stale, stone)).free
    assert not decide(needs(gpus=[0]), folder(stale, stone), containers={("theirs", "h0"): ["running"]}).free


def test_the_same_cluster_renews_its_own_lease_and_waits_only_for_another_up_of_itself():
    own = lease(cluster="mine", uid=ALICE, gpus=[0], session="d" * 16)
    d = decide(needs(gpus=[0]), folder(own))
    assert d.free and d.previous == own and d.changes[0][1] == own.file
    busy = decide(needs(gpus=[0]), folder(own, alive=["d" * 16]))
    assert [b.kind for b in busy.blockers] == ["busy"] and "another `up` of this cluster" in busy.blockers[0].text()
    # Another host of the same cluster on the same machine (one folder) is no clash.
    assert decide(needs(gpus=[0]), folder(replace(own, host="h1", file=f"mine.h1.{ALICE}.lease"))).free


def test_the_same_cluster_name_of_another_user_clashes_whatever_it_holds():
    other = lease(cluster="mine", uid=BOB, gpus=[3], ports=[4444])
    d = decide(needs(gpus=[0]), folder(other, alive=["a" * 16]))
    assert d.blockers[0].what == "the cluster name mine"


def test_tickets_come_first_in_the_order_asked_and_a_gone_waiters_ticket_counts_for_nothing():
    early = ticket("1700000000100-11111111", gpus=[0], session="e" * 16)
    late = ticket("1700000000900-22222222", gpus=[0], session="f" * 16)
    other = ticket("1700000000200-33333333", gpus=[5], ports=[9999], session="e" * 16)
    me = taker(key="1700000000500-aaaaaaaa")
    d = decide(needs(gpus=[0]), folder(late, early, other, alive=["e" * 16, "f" * 16]), who=me)
    assert [(b.kind, b.cluster) for b in d.blockers] == [("queued", "theirs")]      # early, not late nor other
    assert "asked first, at " in d.blockers[0].text()
    assert decide(needs(gpus=[0]), folder(late, early, alive=["f" * 16]), who=me).free   # early's launcher is gone
    # A plain `up` asks now: after every waiter.
    assert not decide(needs(gpus=[0]), folder(late, alive=["f" * 16]), who=taker(key="1800000000000-00000000")).free


def test_two_waiters_are_in_the_same_order_on_every_host():
    first, second = "1700000000100-11111111", "1700000000100-22222222"
    for host in ("h0", "h1"):
        f = folder(ticket(first, host=host, session="e" * 16, uid=BOB),
                   ticket(second, cluster="mine", host=host, session="c" * 16, uid=ALICE), alive=["e" * 16, "c" * 16])
        assert not decide(needs(host=host), f, who=taker(key=second)).free
        assert decide(needs("theirs", host=host), f, who=rules.Taker(BOB, "bob", "bob@desk", "e" * 16, first)).free


def test_a_running_own_cluster_renewing_does_not_queue_behind_waiters():
    own = lease(cluster="mine", uid=ALICE, session="d" * 16)
    waiting = ticket("1700000000100-11111111", session="e" * 16)
    f = folder(own, waiting, alive=["e" * 16])
    assert decide(needs(), f, containers={("mine", "h0"): ["running"]}).free
    assert not decide(needs(), f, containers={}).free


def test_taking_clears_this_users_leftovers_only():
    mine_dead = ticket("1600000000000-11111111", cluster="mine", uid=ALICE, session="9" * 16)
    theirs_dead = ticket("1600000000000-22222222", uid=BOB, session="8" * 16)
    old_stone = Tombstone("7" * 16, "alice", "alice@laptop", NOW, uid=ALICE, file=f"{'7' * 16}.{ALICE}.broken")
    d = decide(needs(), folder(mine_dead, theirs_dead, old_stone))
    assert ("remove", mine_dead.file, "") in d.changes and ("remove", old_stone.file, "") in d.changes
    assert not any(name == theirs_dead.file for _, name, _ in d.changes)


@pytest.mark.parametrize("status, state", [
    ("Up 3 minutes", "running"), ("Up 2 hours (Paused)", "paused"), ("Exited (0) 5 seconds ago", "exited"),
    ("Restarting (1) 2 seconds ago", "restarting"), ("Created", "created"), ("Dead", "dead"), ("\x1b[2J", "unknown")])
def test_dockers_status_column_as_one_word(status, state):
    assert rules.container_state(status) == state


def test_container_labels_that_are_not_names_are_skipped():
    text = "demo|h0|Up 1 second\nDEMO|h0|Up\n../x|h0|Up\ndemo|h1|Exited (1) 1 hour ago|extra\ndemo|h1|Exited (0) now\n"
    assert rules.parse_containers(text) == {("demo", "h0"): ["running"], ("demo", "h1"): ["exited"]}


def test_the_waiting_line_does_not_change_while_the_same_lease_stands_in_the_way():
    blocker = decide(needs(gpus=[0]), folder(lease(gpus=[0]), alive=["a" * 16])).blockers
    line = rules.waiting_line(blocker)
    assert line.startswith("waiting: in use by bob's cluster theirs") and "ago" not in line
