"""Offline hosts: the exact .deb files a host lacks, resolved and fetched on this machine, cached,
and sent to the host over SSH; the host then installs them with no network (commands.APPLY).

Resolution is apt's own, run in a throwaway container of the host's release (its apt and its
archive keyring) on this machine's Docker engine: the container's apt is pointed at the *host's*
dpkg database (fetched over SSH, bounded) and architecture, at the release's archive (plus
Docker's or NVIDIA's repository when wanted, their keys checked here first, and your
`bootstrap.debs` as a local repository), and asked to install what decide.py chose with
--download-only; `apt-get -s` then names every package it would install. So the set is exactly what
that host lacks, and every file was verified by apt against the signed indexes it came from.

Cached under ~/.cache/tfcompose/bootstrap/: the apt indexes per release, the .deb files per
release and architecture (shared by every host that needs them), and each resolution's manifest,
keyed by everything it depends on (release, architecture, the host's dpkg database, what is
wanted, your .debs), so a second identical host costs nothing here.

Sending the files is ship_debs.py's.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import re
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Optional

from launcher.bootstrap import commands
from launcher.bootstrap.host_plan import NEXT, NEXT_RELEASE
from launcher.bootstrap.repositories import BY_NAME, deb822
from launcher.errors import TfcError
from launcher.files import CHUNK, cache_root, write_atomic
from launcher.text import one_line

STATUS_LIMIT = 64 << 20          # a host's dpkg database (a few MB on a full desktop)
RESOLVE_TIMEOUT_S = 1800.0
DEB_NAME = re.compile(r"^[a-z0-9][a-z0-9+.~-]{0,99}_[A-Za-z0-9.+~%-]{1,120}_[a-z0-9-]{1,20}\.deb$")
DEFAULT_IMAGES = {"debian-12": "debian:12", "ubuntu-22.04": "ubuntu:22.04", "ubuntu-24.04": "ubuntu:24.04"}
INST = re.compile(r"^Inst (\S+) (?:\[[^]]*\] )?\((\S+) .*\[([a-z0-9-]+)\]\)")


class ResolveError(TfcError):
    """This machine could not resolve or fetch a host's packages."""


@dataclass(frozen=True)
class Deb:
    name: str          # the file's name (name_version_arch.deb, as apt names it)
    path: Path         # where it is on this machine
    sha256: str
    size: int


@dataclass(frozen=True)
class Bundle:
    key: str
    names: tuple[str, ...]      # what apt is asked to install on the host
    debs: tuple[Deb, ...]       # every file that takes

    @property
    def size(self) -> int:
        return sum(d.size for d in self.debs)


@dataclass(frozen=True)
class Request:
    """What one host needs resolved."""
    release: str                  # debian-12 | ubuntu-22.04 | ubuntu-24.04
    os_id: str
    codename: str
    arch: str
    foreign_archs: tuple[str, ...]
    packages: tuple[tuple[str, str], ...]     # (name, origin) from the plan
    status: bytes                 # the host's /var/lib/dpkg/status
    user_debs: tuple[Path, ...] = ()
    image: str = ""

    def key(self) -> str:
        parts = [self.release, self.arch, ",".join(self.foreign_archs), repr(sorted(self.packages)),
                 hashlib.sha256(self.status).hexdigest(), self.image]
        parts += [f"{p.name}:{p.stat().st_size}:{p.stat().st_mtime_ns}" for folder in self.user_debs
                  for p in sorted(folder.glob("*.deb"))]
        return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:32]


def cache_dir() -> Path:
    return cache_root() / "bootstrap"


def fetch_status(conn) -> bytes:
    """The host's dpkg database, bounded (hostile input: apt reads it in a throwaway container)."""
    result = conn.run(commands.dpkg_status(), limit=STATUS_LIMIT)
    return result.stdout.encode()


def resolve(request: Request, cache: Optional[Path] = None, keys: Optional[dict[str, str]] = None,
            run_container: Optional[Callable] = None) -> Bundle:
    """The files the host lacks: from the cache when this exact request was resolved before and
    every file is still there, else by apt in a container (`run_container`, for tests)."""
    cache = cache or cache_dir()
    key = request.key()
    manifest = cache / "bundles" / f"{key}.json"
    found = load_manifest(manifest, key)
    if found is not None:
        return found
    with _locked(cache / f"resolve-{request.release}.lock"):
        work = cache / "work" / key
        _prepare(work, request, keys or {})
        output = (run_container or _run_container)(request, cache, work)
        bundle = _bundle(key, request, output, cache)
        manifest.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(manifest, json.dumps({"key": key, "names": list(bundle.names), "debs": [
            {"name": d.name, "path": str(d.path), "sha256": d.sha256, "size": d.size} for d in bundle.debs]}).encode())
        return bundle


def load_manifest(path: Path, key: str) -> Optional[Bundle]:
    try:
        doc = json.loads(path.read_text())
        debs = tuple(Deb(d["name"], Path(d["path"]), d["sha256"], int(d["size"])) for d in doc["debs"])
        ok = doc["key"] == key and all(DEB_NAME.match(d.name) and d.path.is_file() and d.path.stat().st_size == d.size
                                       for d in debs)
        return Bundle(key, tuple(doc["names"]), debs) if ok else None
    except (OSError, ValueError, KeyError, TypeError):
        return None


# --- the resolution, in a container of the host's release --------------------------------------

RESOLVE = r"""
set -eu
export APT_CONFIG=/work/apt.conf DEBIAN_FRONTEND=noninteractive
mkdir -p /lists/partial /archives/partial
n=0
for d in /user/*; do
  [ -d "$d" ] || continue
  for f in "$d"/*.deb; do
    [ -f "$f" ] || continue
    b=$(basename "$f"); n=$((n + 1)); mkdir -p /work/local
    ln -sf "$f" "/work/local/$b"
    { dpkg-deb -f "$f"; echo "Filename: ./$b"; echo "Size: $(stat -c %s "$f")"; echo "SHA256: $(sha256sum "$f" | cut -d' ' -f1)"; echo; } >> /work/local/Packages
    echo "USER $(dpkg-deb -f "$f" Package) $(dpkg-deb -f "$f" Version) $(dpkg-deb -f "$f" Architecture) $d/$b"
  done
done
[ "$n" = 0 ] || echo "deb [trusted=yes] file:/work/local ./" > /work/sources/local.list
apt-get -q update >&2
apt-get -q -y install --download-only --no-remove $(cat /work/names) >&2
apt-get -q -y -s install --no-remove $(cat /work/names) | grep '^Inst ' || true
chown -R "$1" /lists /archives /work
"""


def archive_sources(request: Request) -> str:
    """The release's own archive (and, for Debian 12's compose, the next release's) as deb822."""
    if request.os_id == "debian":
        key = "/usr/share/keyrings/debian-archive-keyring.gpg"
        stanzas = [("http://deb.debian.org/debian", f"{request.codename} {request.codename}-updates", "main"),
                   ("http://deb.debian.org/debian-security", f"{request.codename}-security", "main")]
        if any(origin == NEXT_RELEASE for _, origin in request.packages):
            stanzas.append(("http://deb.debian.org/debian", NEXT[request.release], "main"))
    else:
        key = "/usr/share/keyrings/ubuntu-archive-keyring.gpg"
        main, security = (("http://archive.ubuntu.com/ubuntu", "http://security.ubuntu.com/ubuntu")
                          if request.arch in ("amd64", "i386") else ("http://ports.ubuntu.com/ubuntu-ports",) * 2)
        c = request.codename
        stanzas = [(main, f"{c} {c}-updates", "main universe"), (security, f"{c}-security", "main universe")]
    return "\n".join(f"Types: deb\nURIs: {uri}\nSuites: {suites}\nComponents: {comps}\nSigned-By: {key}\n"
                     for uri, suites, comps in stanzas)


def apt_conf(request: Request) -> str:
    archs = "; ".join(f'"{a}"' for a in (request.arch, *request.foreign_archs))
    return "\n".join([
        'Dir::State::status "/work/status";', 'Dir::State::Lists "/lists";', 'Dir::Cache::archives "/archives";',
        'Dir::Etc::SourceList "/dev/null";', 'Dir::Etc::SourceParts "/work/sources";',
        'Dir::Etc::Preferences "/work/preferences";', 'Dir::Etc::PreferencesParts "/work/preferences.d";',
        f'APT::Architecture "{request.arch}";', f"APT::Architectures {{ {archs}; }};",
        'APT::Install-Recommends "false";', 'APT::Sandbox::User "root";', 'Acquire::Retries "3";', ""])


def wanted_names(request: Request) -> list[str]:
    """apt's names for what is wanted: Debian 12's compose from the next release (`name/trixie`)."""
    return [f"{name}/{NEXT[request.release]}" if origin == NEXT_RELEASE else name for name, origin in request.packages]


def _prepare(work: Path, request: Request, keys: dict[str, str]) -> None:
    import shutil
    shutil.rmtree(work, ignore_errors=True)
    for sub in ("sources", "preferences.d", "keys"):
        (work / sub).mkdir(parents=True)
    (work / "status").write_bytes(request.status)
    (work / "apt.conf").write_text(apt_conf(request))
    (work / "names").write_text("\n".join(wanted_names(request)) + "\n")
    next_release = NEXT.get(request.release)
    (work / "preferences").write_text(f"Package: *\nPin: release n={next_release}\nPin-Priority: 1\n" if next_release else "")
    (work / "sources" / "archive.sources").write_text(archive_sources(request))
    for name, text in keys.items():
        (work / "keys" / f"{name}.asc").write_text(text)
        (work / "sources" / f"{name}.sources").write_text(
            deb822(BY_NAME[name], request.os_id, request.codename, request.arch, f"/work/keys/{name}.asc"))


def _run_container(request: Request, cache: Path, work: Path) -> str:
    """apt in a throwaway container of the host's release on this machine's engine; its stdout."""
    import os

    import docker
    image = request.image or DEFAULT_IMAGES[request.release]
    client = docker.from_env()
    try:
        client.images.get(image)
    except docker.errors.ImageNotFound:
        try:
            client.images.pull(image)
        except docker.errors.DockerException as exc:
            raise ResolveError(f"offline: this machine's Docker has no {image} and cannot pull it ({one_line(str(exc), 200)}): "
                               f"`docker pull {image}`, or name a local image of that release in the inventory's "
                               f"bootstrap.resolver_images ({request.release}: …)") from None
    lists, archives = cache / "lists" / request.release, cache / "archives" / f"{request.release}-{request.arch}"
    for folder in (lists, archives):
        folder.mkdir(parents=True, exist_ok=True)
    volumes = {str(lists): {"bind": "/lists", "mode": "rw"}, str(archives): {"bind": "/archives", "mode": "rw"},
               str(work): {"bind": "/work", "mode": "rw"}}
    volumes.update({str(folder.resolve()): {"bind": f"/user/{i}", "mode": "ro"} for i, folder in enumerate(request.user_debs)})
    container = client.containers.run(image, ["sh", "-c", RESOLVE, "sh", f"{os.getuid()}:{os.getgid()}"],
                                      volumes=volumes, detach=True, labels={"tfcompose.bootstrap": "resolve"})
    try:
        status = container.wait(timeout=RESOLVE_TIMEOUT_S)
        out = container.logs(stdout=True, stderr=False).decode("utf-8", "replace")
        err = container.logs(stdout=False, stderr=True).decode("utf-8", "replace")
    finally:
        container.remove(force=True)
    if status.get("StatusCode") != 0:
        said = "\n  ".join(line for line in err.strip().splitlines()[-8:])
        raise ResolveError(f"offline: apt could not resolve {', '.join(wanted_names(request))} for {request.release} "
                           f"({request.arch}) in {image}:\n  {said}")
    return out


def _bundle(key: str, request: Request, output: str, cache: Path) -> Bundle:
    """apt's `Inst` lines (and the USER lines naming your .debs) → the files, each checked."""
    archives = cache / "archives" / f"{request.release}-{request.arch}"
    user = {}
    for line in output.splitlines():
        parts = line.split(" ")
        where = parts[4].split("/") if parts[0] == "USER" and len(parts) == 5 else []
        if len(where) == 4 and where[2].isdigit() and int(where[2]) < len(request.user_debs) and DEB_NAME.match(where[3]):
            user[(parts[1], parts[2], parts[3])] = request.user_debs[int(where[2])] / where[3]
    debs = []
    for line in output.splitlines():
        match = INST.match(line)
        if not match:
            continue
        name, version, arch = match.groups()
        path = user.get((name, version, arch)) or archives / f"{name}_{version.replace(':', '%3a')}_{arch}.deb"
        if not path.is_file() or not DEB_NAME.match(path.name):
            raise ResolveError(f"offline: apt chose {name} {version} ({arch}), but {path} is not there")
        debs.append(deb_of(path))
    return Bundle(key, tuple(name for name, _ in request.packages), tuple(debs))


def deb_of(path: Path) -> Deb:
    """A .deb file as a bundle lists it: its name, path, SHA-256 and size."""
    return Deb(path.name, path, _sha256(path), path.stat().st_size)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def bundle_text(bundle: Bundle) -> str:
    return f"{len(bundle.debs)} .deb file(s), {bundle.size / 1e6:,.1f} MB"

