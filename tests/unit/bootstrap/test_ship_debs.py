"""An offline bundle's .deb files sent (launcher/bootstrap/ship_debs.py): only what the host lacks,
a part file resumed, what a host says that is not so ignored."""
from __future__ import annotations

import hashlib
from pathlib import Path

from launcher.bootstrap import ship_debs
from launcher.bootstrap.offline import Deb
from launcher.ssh.connection import Result
from support.fakes import FakeConnection


def debs(tmp_path: Path, sizes: dict[str, int]) -> list[Deb]:
    out = []
    for name, size in sizes.items():
        path = tmp_path / name
        path.write_bytes(b"x" * size)
        out.append(Deb(name, path, hashlib.sha256(b"x" * size).hexdigest(), size))
    return out


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
