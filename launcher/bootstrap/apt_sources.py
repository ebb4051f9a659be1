"""What a host's apt sources say (was in facts.py), read from the lines the probe printed of its
one-line `.list` files and its deb822 `.sources` stanzas: the archive its distribution comes from,
and every repository they name. Only URIs of the schemes apt takes, of plain characters, count."""
from __future__ import annotations

import re

URI = re.compile(r"^(?:https?|file|mirror\+https?)://[A-Za-z0-9._~:/?#@!$&'()*+,;=%-]{1,300}$")


def archive_mirror(one_line: list[str], deb822: list[str], codename: str) -> str:
    """The URI the host's apt takes its distribution's release (`codename`) from: a one-line
    `deb [opts] URI SUITE …` or a deb822 stanza whose Suites hold it. "" when none does."""
    for line in one_line:
        words = re.sub(r"\[[^]]*\]", " ", line).split()
        if len(words) >= 3 and words[0] == "deb" and words[2] == codename and URI.match(words[1]):
            return words[1].rstrip("/")
    stanza: dict[str, str] = {}
    for line in [*deb822, "--"]:
        if line == "--":
            uris, suites = stanza.get("URIs", "").split(), stanza.get("Suites", "").split()
            if codename in suites and "deb" in stanza.get("Types", "deb").split() \
                    and stanza.get("Enabled", "yes").lower() != "no" and uris and URI.match(uris[0]):
                return uris[0].rstrip("/")
            stanza = {}
            continue
        key, _, value = line.partition(":")
        stanza.setdefault(key.strip(), value.strip())
    return ""


def source_uris(one_line: list[str], deb822: list[str]) -> tuple[str, ...]:
    """Every repository URI the host's apt sources name (to tell whether Docker's or NVIDIA's is there)."""
    uris = [w for line in one_line for w in re.sub(r"\[[^]]*\]", " ", line).split()[1:2]]
    uris += [w for line in deb822 if line.startswith("URIs:") for w in line[5:].split()]
    return tuple(dict.fromkeys(u.rstrip("/") for u in uris if URI.match(u)))[:64]
