"""Offline bundles: the sources apt resolves against, apt's answer turned into checked files,
a resolution cached by everything it depends on, and only what a host lacks sent (resumed)."""
from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from launcher.bootstrap import offline
from launcher.bootstrap.offline import Request

DEBIAN = Request("debian-12", "debian", "bookworm", "amd64", (), (("docker.io", "archive"), ("docker-compose", "next-release")),
                 b"Package: dpkg\nStatus: install ok installed\n\n")


def test_the_release_archive_and_the_next_release_for_debians_compose():
    text = offline.archive_sources(DEBIAN)
    assert "Suites: bookworm bookworm-updates\n" in text and "Suites: bookworm-security\n" in text
    assert "Suites: trixie\n" in text and text.count("Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg") == 3
    assert offline.wanted_names(DEBIAN) == ["docker.io", "docker-compose/trixie"]
    arm = Request("ubuntu-24.04", "ubuntu", "noble", "arm64", ("armhf",), (("docker.io", "archive"),), b"")
    assert "http://ports.ubuntu.com/ubuntu-ports" in offline.archive_sources(arm)
    assert "Components: main universe" in offline.archive_sources(arm) and "trixie" not in offline.archive_sources(arm)
    conf = offline.apt_conf(arm)
    assert 'APT::Architecture "arm64";' in conf and 'APT::Architectures { "arm64"; "armhf"; };' in conf
    assert 'Dir::State::status "/work/status";' in conf


APT_SAYS = """USER nvidia-container-toolkit 1.17.8-1 amd64 /user/0/nvidia-container-toolkit_1.17.8-1_amd64.deb
Inst runc (1.1.5+ds1-1+deb12u1 Debian:12.12/stable [amd64])
Inst libc6 [2.36-9] (2.36-9+deb12u3 Debian:12.12/stable [amd64])
Inst docker-compose (2.26.1-4 Debian:13.1/stable [amd64])
Inst tini (1:0.19.0-1 Debian:12.12/stable [amd64])
Inst nvidia-container-toolkit (1.17.8-1 localhost [amd64])
Conf runc (1.1.5+ds1-1+deb12u1 Debian:12.12/stable [amd64])
"""


def fake_container(archives: list[str]):
    calls = []

    def run(request, cache: Path, work: Path) -> str:
        calls.append(request)
        folder = cache / "archives" / f"{request.release}-{request.arch}"
        folder.mkdir(parents=True, exist_ok=True)
        for name in archives:
            (folder / name).write_bytes(name.encode())
        assert (work / "status").read_bytes() == request.status and "docker-compose/trixie" in (work / "names").read_text()
        return APT_SAYS
    return run, calls


def test_apts_answer_becomes_the_files_and_an_identical_host_costs_nothing_more(tmp_path):
    user = tmp_path / "mine"
    user.mkdir()
    (user / "nvidia-container-toolkit_1.17.8-1_amd64.deb").write_bytes(b"toolkit")
    request = Request(**{**DEBIAN.__dict__, "user_debs": (user,)})
    run, calls = fake_container(["runc_1.1.5+ds1-1+deb12u1_amd64.deb", "libc6_2.36-9+deb12u3_amd64.deb",
                                 "docker-compose_2.26.1-4_amd64.deb", "tini_1%3a0.19.0-1_amd64.deb"])
    bundle = offline.resolve(request, tmp_path / "cache", run_container=run)
    assert [d.name for d in bundle.debs] == ["runc_1.1.5+ds1-1+deb12u1_amd64.deb", "libc6_2.36-9+deb12u3_amd64.deb",
                                              "docker-compose_2.26.1-4_amd64.deb", "tini_1%3a0.19.0-1_amd64.deb",
                                              "nvidia-container-toolkit_1.17.8-1_amd64.deb"]
    assert bundle.debs[-1].path == user / "nvidia-container-toolkit_1.17.8-1_amd64.deb"
    assert bundle.debs[0].sha256 == hashlib.sha256(b"runc_1.1.5+ds1-1+deb12u1_amd64.deb").hexdigest()
    assert bundle.names == ("docker.io", "docker-compose")
    assert offline.resolve(request, tmp_path / "cache", run_container=run) == bundle and len(calls) == 1
    changed = Request(**{**request.__dict__, "status": request.status + b"Package: x\n\n"})
    offline.resolve(changed, tmp_path / "cache", run_container=run)
    assert len(calls) == 2                                  # another host's database: resolved again


def test_a_file_apt_chose_but_that_is_not_there_is_an_error(tmp_path):
    run, _ = fake_container(["runc_1.1.5+ds1-1+deb12u1_amd64.deb"])
    with pytest.raises(offline.ResolveError, match="apt chose libc6 2.36-9"):
        offline.resolve(DEBIAN, tmp_path, run_container=run)
