"""What a relay hop lets through to `docker load`: only the image this `up` ships.

Standard library only, no imports from tfcompose: this file is sent, as it is, into each relay
host's relay folder and run there by python3 between `gunzip` and `docker load`:

    gunzip -c | python3 hop_check.py expect.json | docker load

It reads a docker-archive tar on stdin and writes it on stdout entry by entry, and stops (exit 3,
a reason on stderr) at the first entry that is not in `expect.json`: the config and manifest must
be byte-for-byte the expected ones (their SHA-256), every other entry must be one of the expected
layer tars with its expected size, and nothing else (no links, folders or devices) may appear.
The manifest decides which tags `docker load` applies, and the config is the image ID, so an
archive made by anyone else — a compromised host before this one, reusing its hop key — loads
nothing but this image under this tag; what is cut short at an entry boundary holds only checked
entries, and `docker load` checks every layer it loads against the config's diff IDs.
"""
import hashlib
import json
import sys
import tarfile

MAX_META = 16 << 20    # the config and manifest: small JSON


class Refused(Exception):
    pass


def check(expect, source, sink):
    wanted = dict(expect["layers"])            # "<hex>/layer.tar" → size
    metas = {expect["config"]["name"]: expect["config"]["sha256"], "manifest.json": expect["manifest_sha256"]}
    # On a refusal the output is left without its end-of-archive blocks: `docker load` sees a cut
    # archive of checked entries only (and the hop script fails the load all the same).
    tar_out = tarfile.open(fileobj=sink, mode="w|")
    with tarfile.open(fileobj=source, mode="r|") as tar_in:
        for member in tar_in:
            if not member.isfile():
                raise Refused(f"{member.name!r} is not a plain file")
            if member.name in metas:
                data = _small(tar_in, member)
                if hashlib.sha256(data).hexdigest() != metas.pop(member.name):
                    raise Refused(f"{member.name} is not this image's")
                tar_out.addfile(member, _Bytes(data))
            elif wanted.get(member.name) == member.size:
                del wanted[member.name]
                tar_out.addfile(member, tar_in.extractfile(member))
            else:
                raise Refused(f"{member.name!r} ({member.size} bytes) is not a layer this image ships")
    if metas:
        raise Refused("the archive lacks " + ", ".join(sorted(metas)))
    tar_out.close()


def _small(tar, member):
    if member.size > MAX_META:
        raise Refused(f"{member.name} is {member.size} bytes")
    return tar.extractfile(member).read()


class _Bytes:
    def __init__(self, data):
        self.data, self.offset = data, 0

    def read(self, size=-1):
        end = len(self.data) if size < 0 else self.offset + size
        chunk, self.offset = self.data[self.offset:end], min(end, len(self.data))
        return chunk


def main(expect_path):
    with open(expect_path) as fh:
        expect = json.load(fh)
    try:
        check(expect, sys.stdin.buffer, sys.stdout.buffer)
    except (Refused, tarfile.TarError, EOFError) as exc:
        sys.stderr.write(f"tfcompose relay: refused: {exc}\n")
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
