"""The host's answer to `look` (launcher/leases/look.py): parsed line by line, what host.sh does not
write skipped, and the fingerprint of what it listed computed as the host computes it."""
from __future__ import annotations

import base64

from launcher.leases import files as lf, look
from support.lease_host import demo_lease


def look_line(name: str, uid: int, owner: str, text: bytes) -> str:
    return f"entry {name} {uid} {owner} {base64.b64encode(text).decode()}"


def test_the_hosts_answer_is_parsed_line_by_line_and_lines_it_does_not_write_are_skipped():
    good = lf.lease_text(demo_lease())
    answer = "\n".join([
        "user 1001 bob", "now 1700000500",
        look_line("demo.h1.1000.lease", 1000, "alice", good.encode()),
        look_line("x.lease", 1000, "alice", b"\xff\xfe not utf-8"),
        look_line("y.lease", 1000, "\x1b[31malice", b"{}"),       # an owner name that is no name
        "entry ../../etc/passwd 0 root cm9vdA==",                  # a name host.sh never lists
        "entry z.lease 0 root !!!notbase64",
        "session fedcba9876543210 alive", "session 0000000000000000 dead", "session $(id) alive",
        "fingerprint abc", "garbage line", "user x y"])
    folder = look.parse_look(answer)
    assert (folder.uid, folder.user, folder.now, folder.exists) == (1001, "bob", 1_700_000_500, True)
    assert [lease.id for lease in folder.leases] == ["0123456789abcdef"]
    assert {u.file: u.why for u in folder.unreadable} == {
        "x.lease": "not UTF-8 text", "y.lease": "not a tfcompose lease (schema 1)", "z.lease": "not UTF-8 text"}
    assert next(u for u in folder.unreadable if u.file == "y.lease").owner == "uid 1000"
    assert folder.sessions == {"fedcba9876543210": True, "0000000000000000": False}
    assert len(folder.lines) == 5      # every entry line the host listed counts in the fingerprint


def test_the_fingerprint_is_the_hosts_and_leaves_out_this_ups_own_files():
    import hashlib
    lines = [look_line("a.lease", 1, "u", b"{}"), look_line("b.lease", 1, "u", b"{}")]
    folder = look.parse_look("\n".join(lines))
    assert look.fingerprint(folder, set()) == hashlib.sha256("".join(f"{x}\n" for x in lines).encode()).hexdigest()
    assert look.fingerprint(folder, {"a.lease"}) == hashlib.sha256(f"{lines[1]}\n".encode()).hexdigest()
    assert look.fingerprint(look.parse_look(""), set()) == hashlib.sha256(b"").hexdigest()
