"""Docker's and NVIDIA's apt repositories: where they are for each release, their signing keys
(fetched on this machine over HTTPS and accepted only when the key's fingerprint is the one each
vendor publishes), and the deb822 source a host gets for them.

The key goes to the host as an ASCII-armoured file (`Signed-By:` takes .asc files from apt 1.4 on;
every supported release has 2.4 or later), so the host needs neither curl nor gpg. The source and
the key are written beside their final names and renamed (commands.py), so a host never holds half
an apt source; a source already naming the repository (added by hand) is left alone, as a second
one with another Signed-By would make apt refuse both.
"""
from __future__ import annotations

import base64
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from launcher.files import write_atomic

KEY_LIMIT = 256 << 10     # an armoured public key is a few KB; a larger answer is not one


@dataclass(frozen=True)
class Repository:
    name: str              # docker | nvidia (names the key and source files on the host)
    key_url: str
    fingerprint: str       # the primary key's, as the vendor publishes it
    base: str              # what a host's sources must name for it to count as configured

    def uri(self, os_id: str, arch: str) -> str:
        if self.name == "docker":
            return f"{self.base}/{os_id}"
        return f"{self.base}/stable/deb/{arch}"

    def suite(self, codename: str) -> str:
        return codename if self.name == "docker" else "/"

    def components(self) -> str:
        return "stable" if self.name == "docker" else ""


DOCKER = Repository("docker", "https://download.docker.com/linux/{os_id}/gpg", "9DC858229FC7DD38854AE2D88D81803C0EBFCD88",
                    "https://download.docker.com/linux")
NVIDIA = Repository("nvidia", "https://nvidia.github.io/libnvidia-container/gpgkey",
                    "C95B321B61E88C1809C4F759DDCAE044F796ECB0", "https://nvidia.github.io/libnvidia-container")
BY_NAME = {"docker": DOCKER, "nvidia": NVIDIA}


def configured(repo: Repository, uris: tuple[str, ...]) -> bool:
    """The host's apt sources already name this repository."""
    return any(u.startswith(repo.base) for u in uris)


def deb822(repo: Repository, os_id: str, codename: str, arch: str, key_path: str) -> str:
    """The host's source for the repository (a flat repository, NVIDIA's, has no components)."""
    lines = ["Types: deb", f"URIs: {repo.uri(os_id, arch)}", f"Suites: {repo.suite(codename)}"]
    if repo.components():
        lines.append(f"Components: {repo.components()}")
    lines += [f"Architectures: {arch}", f"Signed-By: {key_path}"]
    return "\n".join(lines) + "\n"


class KeyError_(ValueError):
    """A fetched key is not the vendor's."""


def dearmor(text: str) -> bytes:
    """The binary packets of an ASCII-armoured OpenPGP public key block (its CRC line dropped)."""
    match = re.search(r"-----BEGIN PGP PUBLIC KEY BLOCK-----\r?\n(.*?)-----END PGP PUBLIC KEY BLOCK-----", text, re.S)
    if not match:
        raise KeyError_("not an ASCII-armoured OpenPGP public key")
    body = match.group(1).replace("\r", "")
    lines = body.split("\n\n", 1)[-1] if "\n\n" in body else body      # armour headers end at a blank line
    data = "".join(line.strip() for line in lines.splitlines() if line.strip() and not line.startswith("="))
    try:
        return base64.b64decode(data, validate=True)
    except ValueError as exc:
        raise KeyError_(f"its armour is not base64 ({exc})") from None


def packets(data: bytes):
    """(tag, body) of each OpenPGP packet, old or new header format (RFC 4880 §4.2)."""
    i = 0
    while i < len(data):
        head = data[i]
        if not head & 0x80:
            raise KeyError_("not an OpenPGP packet")
        if head & 0x40:                        # new format
            tag, i = head & 0x3F, i + 1
            first = data[i]
            if first < 192:
                length, i = first, i + 1
            elif first < 224:
                length, i = ((first - 192) << 8) + data[i + 1] + 192, i + 2
            elif first == 255:
                length, i = int.from_bytes(data[i + 1:i + 5], "big"), i + 5
            else:
                raise KeyError_("partial-length packets do not occur in a public key")
        else:                                  # old format
            tag, kind, i = (head >> 2) & 0x0F, head & 0x03, i + 1
            if kind == 3:
                raise KeyError_("indeterminate-length packets do not occur in a public key")
            size = (1, 2, 4)[kind]
            length, i = int.from_bytes(data[i:i + size], "big"), i + size
        if i + length > len(data):
            raise KeyError_("a packet runs past the end of the key")
        yield tag, data[i:i + length]
        i += length


def fingerprint(armoured: str) -> str:
    """The v4 fingerprint of the first (primary) public key: SHA-1 of 0x99, its length, its body."""
    for tag, body in packets(dearmor(armoured)):
        if tag == 6:
            if not body or body[0] != 4:
                raise KeyError_("not a version 4 key")
            return hashlib.sha1(b"\x99" + len(body).to_bytes(2, "big") + body).hexdigest().upper()
    raise KeyError_("no public key packet in it")


def checked_key(repo: Repository, armoured: str) -> str:
    """The key if it is the vendor's (its fingerprint is the published one), else KeyError_."""
    found = fingerprint(armoured)
    if found != repo.fingerprint:
        raise KeyError_(f"its fingerprint {found} is not {repo.name}'s published {repo.fingerprint}")
    return armoured


def key_for(repo: Repository, os_id: str, cache: Path,
            fetch: Optional[Callable[[str], bytes]] = None) -> str:
    """The repository's checked key: from the cache, else fetched over HTTPS (and cached)."""
    path = cache / f"{repo.name}-{os_id}.asc"
    try:
        return checked_key(repo, path.read_text())
    except (OSError, UnicodeDecodeError, KeyError_):
        pass
    url = repo.key_url.format(os_id=os_id)
    raw = (fetch or _https)(url)
    try:
        text = checked_key(repo, raw.decode("ascii"))
    except UnicodeDecodeError:
        raise KeyError_(f"{url} did not answer with an ASCII-armoured key") from None
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, text.encode())
    return text


def _https(url: str) -> bytes:
    import urllib.request
    with urllib.request.urlopen(url, timeout=30) as answer:    # certificate checked by default
        data = answer.read(KEY_LIMIT + 1)
    if len(data) > KEY_LIMIT:
        raise KeyError_(f"{url} answered more than {KEY_LIMIT:,} bytes, which is no key")
    return data
