"""What a host's apt sources say (launcher/bootstrap/apt_sources.py): the archive found in one-line
and deb822 sources, a disabled stanza skipped, a URI that is not one refused."""
from __future__ import annotations

from launcher.bootstrap import apt_sources


def test_the_archive_is_found_in_one_line_and_deb822_sources_and_a_disabled_stanza_is_skipped():
    assert apt_sources.archive_mirror(["deb [arch=amd64 signed-by=/x.gpg] http://mirror.lan/debian/ bookworm main"], [],
                                      "bookworm") == "http://mirror.lan/debian"
    stanzas = ["Types: deb", "URIs: http://old.example/ubuntu", "Suites: noble", "Enabled: no", "--",
               "Types: deb", "URIs: http://archive.ubuntu.com/ubuntu/", "Suites: noble noble-updates", "--"]
    assert apt_sources.archive_mirror([], stanzas, "noble") == "http://archive.ubuntu.com/ubuntu"
    assert apt_sources.archive_mirror(["deb http://x.example/debian trixie main"], [], "bookworm") == ""
    assert apt_sources.archive_mirror(["deb $(reboot) bookworm main"], [], "bookworm") == ""
