"""Your code (`run.code_dir`) as one image layer on top of the trainer image, made here without
Docker building or saving anything (the way `crane append` and ko make images): a tar of the folder
at /workspace, its diff ID, and the parent's config with that layer appended. Editing a script
then costs a tar of your folder and a few KB over SSH, not a build and a `docker save` of GBs.

Requirements need pip, so they stay a Docker build (`<image>:req-<hash>`, cached by BuildKit and,
split into layers, by tfcompose): they change rarely and come before the code in the layer order.
"""
from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

from launcher.errors import ImageError
from launcher.image import layers
from launcher.image.local import local_image_id
from launcher.plan import Plan, code_files, sibling_tag

MTIME = 0            # fixed: the same code gives the same layer, hence the same image ID on every up
REQUIREMENTS_DOCKERFILE = """\
# Your requirements on top of the tfcompose image (built by `tfcompose up` for `run.requirements`).
FROM {base}
COPY requirements.txt /tmp/tfcompose-requirements.txt
RUN python3 -m pip install --no-cache-dir -r /tmp/tfcompose-requirements.txt
"""


class _Hashing:
    """A write-only file that hashes and counts what passes through it."""

    def __init__(self, out):
        self.out, self.sha, self.size = out, hashlib.sha256(), 0

    def write(self, data: bytes) -> int:
        self.sha.update(data)
        self.size += len(data)
        return self.out.write(data)


def layer_tar(folder: Path, out: Path) -> tuple[str, int]:
    """Write the folder as a layer (its files under workspace/); returns (diff ID, size)."""
    with out.open("wb") as fh:
        sink = _Hashing(fh)
        with tarfile.open(fileobj=sink, mode="w|", format=tarfile.PAX_FORMAT) as tar:
            tar.addfile(_info(tar, folder, "workspace"))
            for path in code_files(folder):
                info = _info(tar, path, "workspace/" + path.relative_to(folder).as_posix())
                if info is None:
                    continue  # a socket or FIFO: nothing a program could read from an image
                if info.isreg():
                    with path.open("rb") as src:
                        tar.addfile(info, src)
                else:
                    tar.addfile(info)
    return "sha256:" + sink.sha.hexdigest(), sink.size


def _info(tar: tarfile.TarFile, path: Path, name: str) -> tarfile.TarInfo | None:
    info = tar.gettarinfo(str(path), arcname=name)
    if info is None:
        return None
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.mtime = MTIME
    info.mode = 0o755 if info.isdir() else (0o755 if info.mode & 0o111 else 0o644)
    return info


def appended_config(parent_config: bytes, diff_id: str, code_hash: str) -> bytes:
    """The parent's image config with the code layer on top, labelled with the code's hash."""
    config = json.loads(parent_config)
    config["rootfs"]["diff_ids"] = config["rootfs"]["diff_ids"] + [diff_id]
    config["history"] = config.get("history", []) + [
        {"created": config.get("created", "1970-01-01T00:00:00Z"), "created_by": "tfcompose: COPY code_dir/ /workspace/"}]
    settings = config.setdefault("config", {})
    settings["Labels"] = {**(settings.get("Labels") or {}), "tfcompose.code": code_hash}
    settings["WorkingDir"] = "/workspace"
    return json.dumps(config, sort_keys=True, separators=(",", ":")).encode()


def code_parts(plan: Plan, parent: layers.Parts, cache: Path) -> layers.Parts:
    """The code image as Parts: the parent's layers plus the code layer (stored in the cache)."""
    layer_dir = cache / "layers"
    layer_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache, prefix=".code-") as tmp:
        raw = Path(tmp) / "layer.tar"
        diff_id, _ = layer_tar(plan.cluster.code_dir, raw)
        layers.store_layer(layer_dir, diff_id, raw)
    config = appended_config(parent.config, diff_id, plan.code_hash)
    image_id = "sha256:" + hashlib.sha256(config).hexdigest()
    return layers.Parts(plan.container_image, image_id, config, parent.diff_ids + [diff_id], layer_dir)


def requirements_image(plan: Plan) -> str:
    """Build `<image>:req-<hash>` with run.requirements installed; returns its tag."""
    cluster = plan.cluster
    req = cluster.code_dir / cluster.spec.run.requirements
    tag = sibling_tag(cluster.spec.image, "req-" + hashlib.sha256(req.read_bytes()).hexdigest()[:12])
    with tempfile.TemporaryDirectory() as ctx:
        shutil.copyfile(req, Path(ctx) / "requirements.txt")
        (Path(ctx) / "Dockerfile").write_text(REQUIREMENTS_DOCKERFILE.format(base=cluster.spec.image))
        proc = subprocess.run(["docker", "buildx", "build", "--load", "-t", tag, ctx], capture_output=True, text=True)
    if proc.returncode != 0:
        raise ImageError(f"installing {req.name} into {tag} failed:\n  " + "\n  ".join(proc.stderr.strip().splitlines()[-8:]))
    local_image_id(tag)
    return tag
