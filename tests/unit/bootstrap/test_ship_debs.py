"""An offline bundle's .deb files sent (launcher/bootstrap/ship_debs.py): only what the host lacks,
a part file resumed, what a host says that is not so ignored; hosts sent the same files at once
have each file read from the disk once, and nothing kept for a host once it is done or gone."""
from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path

import pytest

from launcher.bootstrap import ship_debs
from launcher.bootstrap.offline import Deb
from launcher.errors import RemoteError
from launcher.files import CHUNK
from launcher.ssh.connection import Result
from support.fakes import FakeConnection


def debs(tmp_path: Path, sizes: dict[str, int], fill=lambda size: b"x" * size) -> list[Deb]:
    out = []
    for name, size in sizes.items():
        path = tmp_path / name
        path.write_bytes(fill(size))
        out.append(Deb(name, path, hashlib.sha256(path.read_bytes()).hexdigest(), size))
    return out


def holding(*held: str, parts: dict[str, int] | None = None) -> FakeConnection:
    """A host that holds the files `held` (and the part files `parts`), answering as the real one."""
    def answer(command):
        if "sha256sum" in command[2]:
            return Result(0, "".join(f"{h}  {n}\n" for h, n in held) + "".join(
                f"part {size} {name}\n" for name, size in (parts or {}).items()), "")
        return Result(0, "", "")
    return FakeConnection(answer)


def received(conn: FakeConnection) -> dict[str, bytes]:
    return {cmd[5]: data for cmd, data in conn.streams}


def bundle(tmp_path: Path) -> list[Deb]:
    """Three files, the first over two chunks: 5 chunks in all."""
    return debs(tmp_path, {"a_1_all.deb": 2 * CHUNK + 5, "b_1_all.deb": CHUNK, "c_1_all.deb": 10}, os.urandom)


def test_only_what_the_host_lacks_is_sent_and_a_part_file_is_resumed(tmp_path):
    a, b, c = debs(tmp_path, {"a_1_all.deb": 1000, "b_1_all.deb": 5000, "c_1_all.deb": 300})

    def answer(command):
        if "sha256sum" in command[2]:      # what the host holds: a whole, b in part; and junk a host may say
            return Result(0, f"{a.sha256}  a_1_all.deb\npart 4000 b_1_all.deb\n{'0' * 64}  c_1_all.deb\n"
                             "part 999999 c_1_all.deb\n\x1b[31m  evil\n", "")
        return Result(0, "", "")
    conn = FakeConnection(answer)
    progress = []
    shipped = ship_debs.ship(conn, "/home/admin/.cache/tfcompose/bootstrap", [a, b, c], lambda done, total: progress.append((done, total)))
    sent = {cmd[5]: (cmd[7], data) for cmd, data in conn.streams}
    assert sent == {"b_1_all.deb": ("4000", b"x" * 1000), "c_1_all.deb": ("0", b"x" * 300)}
    assert shipped == ship_debs.Shipped(2, 1300, 1) and progress[-1] == (1300, 1300)



def takers(files: list[Deb], hosts: int, cap: int = 256 << 20) -> tuple[ship_debs.OneRead, list]:
    """A OneRead and each host's part in it, all made before any host starts (as the stage does)."""
    made = ship_debs.takers({f"h{i}": [d.path for d in files] for i in range(hosts)}, cap)
    return made["h0"].reads, list(made.values())


class CutAfter(FakeConnection):
    """A host whose link goes after it has been sent `chunks` chunks of its first file."""

    def __init__(self, chunks: int):
        super().__init__(holding().answer)
        self.left = chunks

    def stream(self, command, on_output, stdin_chunks=(), check: bool = True, **kw):
        for _ in stdin_chunks:
            self.left -= 1
            if self.left <= 0:
                raise RemoteError("h2", reason="the link went")
        return super().stream(command, on_output, (), check)


def test_hosts_sent_the_same_files_at_once_have_each_read_from_the_disk_once(tmp_path):
    files = bundle(tmp_path)
    reads, parts = takers(files, 3)
    hosts = [holding() for _ in range(3)]
    threads = [threading.Thread(target=ship_debs.ship, args=(h, "/s", files), kwargs={"taker": t})
               for h, t in zip(hosts, parts)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    whole = {d.name: d.path.read_bytes() for d in files}
    assert all(received(h) == whole for h in hosts)
    assert reads.disk_reads == 5 and reads.held == 0          # without OneRead: 15 reads


def test_a_host_that_holds_a_file_or_resumes_one_is_kept_nothing(tmp_path):
    a, b, c = files = bundle(tmp_path)
    reads, (first, second) = takers(files, 2)
    ship_debs.ship(holding(), "/s", files, taker=first)
    assert reads.held == a.size + b.size + c.size  # kept for the second host, until it says what it holds
    conn = holding((a.sha256, a.name), parts={b.name: 100})
    while_sending = []
    conn.on_stream = lambda command, data: while_sending.append(reads.held)
    ship_debs.ship(conn, "/s", files, taker=second)
    assert received(conn) == {b.name: b.path.read_bytes()[100:], c.name: c.path.read_bytes()}
    assert while_sending[0] == c.size      # once it said what it holds: a and b let go at once, c still kept
    assert reads.held == 0


@pytest.mark.parametrize("where", ["mid-file", "before any file"])
def test_a_host_cut_off_leaves_nothing_kept_for_it(tmp_path, where):
    files = bundle(tmp_path)
    reads, (first, second) = takers(files, 2)
    ship_debs.ship(holding(), "/s", files, taker=first)
    assert reads.held == sum(d.size for d in files)
    gone = CutAfter(1) if where == "mid-file" else FakeConnection(lambda command: Result(1, "", "no such folder"))
    with pytest.raises(RemoteError):
        ship_debs.ship(gone, "/s", files, taker=second)
    assert reads.held == 0            # neither the file it was in nor those it never reached


def test_past_its_cap_each_host_reads_for_itself_and_nothing_is_kept_for_a_host_ahead(tmp_path):
    a = bundle(tmp_path)[0]                      # three chunks
    reads, parts = takers([a], 3, cap=CHUNK)
    ahead, behind, last = (t.chunks(a.path) for t in parts)
    got = {"ahead": next(ahead) + next(ahead)}   # chunk 0 kept for the two behind; chunk 1 past the cap
    got["behind"], got["last"] = next(behind), next(last)
    got["behind"] += next(behind)                # read again: not kept for `ahead`, which is past it
    for name, chunks in (("ahead", ahead), ("behind", behind), ("last", last)):
        got[name] += b"".join(chunks)
    assert set(got.values()) == {a.path.read_bytes()}
    assert reads.held == 0 and reads.disk_reads == 2 + 3      # chunk 1 read by each host, chunks 0 and 2 once


def test_a_host_cut_off_mid_file_takes_nothing_more_from_those_behind_it(tmp_path):
    a = bundle(tmp_path)[0]                      # three chunks
    reads, (ahead, cut, behind) = takers([a], 3)
    ship_debs.ship(holding(), "/s", [a], taker=ahead)
    with pytest.raises(RemoteError):
        ship_debs.ship(CutAfter(2), "/s", [a], taker=cut)
    ship_debs.ship(last := holding(), "/s", [a], taker=behind)
    assert received(last) == {a.name: a.path.read_bytes()}
    assert reads.disk_reads == 3 and reads.held == 0      # the last host's whole file from what was read first
