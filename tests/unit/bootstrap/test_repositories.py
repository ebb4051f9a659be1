"""Docker's and NVIDIA's repositories: a key is taken only when its fingerprint is the vendor's,
and the source a host gets for each (Docker's per release, NVIDIA's flat)."""
from __future__ import annotations

from dataclasses import replace

import pytest

from launcher.bootstrap import repositories as repos
from support.common import DATA

KEYS = DATA / "bootstrap"
ED25519 = "0902BEF868F2A090D8CFDA8F73D12BFCB761A79D"   # as gpg --list-keys prints them
RSA = "6EFCAB62C50EAF0CF31AE3C49D56C6C5DDBD0035"


def test_the_fingerprint_is_gpgs_for_old_and_new_key_kinds():
    assert repos.fingerprint((KEYS / "ed25519-key.asc").read_text()) == ED25519
    assert repos.fingerprint((KEYS / "rsa-key.asc").read_text()) == RSA


def test_a_key_is_taken_only_if_it_is_the_vendors(tmp_path):
    mine = replace(repos.DOCKER, fingerprint=RSA)
    text = (KEYS / "rsa-key.asc").read_text()
    assert repos.checked_key(mine, text) == text
    with pytest.raises(repos.KeyError_, match="is not docker's published 9DC858229FC7DD38854AE2D88D81803C0EBFCD88"):
        repos.checked_key(repos.DOCKER, text)
    for broken in ("not a key", text.replace("mQENB", "mQENA", 1), text[:200] + "\n-----END PGP PUBLIC KEY BLOCK-----\n"):
        with pytest.raises(repos.KeyError_):
            repos.checked_key(mine, broken)


def test_a_fetched_key_is_checked_then_cached_and_a_wrong_one_never_cached(tmp_path):
    mine = replace(repos.DOCKER, fingerprint=RSA)
    asked = []

    def fetch(url: str) -> bytes:
        asked.append(url)
        return (KEYS / "rsa-key.asc").read_bytes()
    assert repos.key_for(mine, "ubuntu", tmp_path, fetch) == (KEYS / "rsa-key.asc").read_text()
    assert asked == ["https://download.docker.com/linux/ubuntu/gpg"]
    repos.key_for(mine, "ubuntu", tmp_path, fetch)
    assert len(asked) == 1                                    # from the cache the second time
    with pytest.raises(repos.KeyError_):
        repos.key_for(repos.NVIDIA, "ubuntu", tmp_path / "other", lambda url: (KEYS / "ed25519-key.asc").read_bytes())
    assert not (tmp_path / "other" / "nvidia-ubuntu.asc").exists()


def test_the_sources_a_host_gets():
    assert repos.deb822(repos.DOCKER, "debian", "bookworm", "amd64", "/etc/apt/keyrings/tfcompose-docker.asc") == (
        "Types: deb\nURIs: https://download.docker.com/linux/debian\nSuites: bookworm\nComponents: stable\n"
        "Architectures: amd64\nSigned-By: /etc/apt/keyrings/tfcompose-docker.asc\n")
    assert repos.deb822(repos.NVIDIA, "ubuntu", "noble", "arm64", "/k.asc") == (
        "Types: deb\nURIs: https://nvidia.github.io/libnvidia-container/stable/deb/arm64\nSuites: /\n"
        "Architectures: arm64\nSigned-By: /k.asc\n")
    assert repos.configured(repos.DOCKER, ("http://deb.debian.org/debian", "https://download.docker.com/linux/ubuntu"))
    assert not repos.configured(repos.NVIDIA, ("http://deb.debian.org/debian",))
