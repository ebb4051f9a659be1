"""Builders shared by the tests: hosts, clusters, dataset folders and progress trackers."""
from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path

from launcher.inventory.model import Cluster, Host
from launcher.inventory.schema import Inventory
from launcher.telemetry.samples import Gpu, Sample
from trainer.spec.progress import Tracker, parse


def host(name: str, index: int = 0, **kw) -> Host:
    values = dict(name=name, address=f"10.0.0.{index + 1}", ssh_user="u", ssh_port=22, identity_file=None,
                  tf_port=2222, workdir="/opt/tfcompose", gpus=0, data_dir=None, nic=None, shm_size="2g",
                  chief=index == 0, index=index, bundle_dir="/opt/tfcompose/c")
    return Host(**{**values, **kw})


def chain_hosts() -> tuple[Host, Host, Host]:
    """Three hosts of a relay chain: an IP, an IP on another SSH port, a name."""
    common = dict(ssh_user="tfc", tf_port=47001, workdir="/srv/tfc", bundle_dir="/srv/tfc/c1", chief=False)
    return (host("a", address="10.0.0.2", **common), host("b", address="10.0.0.3", ssh_port=2222, **common),
            host("c", address="lab-c.example", **common))


def cluster(n: int = 2, **spec) -> Cluster:
    hosts = tuple(host(f"h{i}", i) for i in range(n))
    inv = Inventory.model_validate({"cluster": "c", "hosts": [{"name": h.name, "address": h.address} for h in hosts],
                                    **spec})
    return Cluster(Path("inv.yaml"), inv, hosts)


def tracked(tmp_path, epochs=3, trials=2) -> Tracker:
    tracker = Tracker(tmp_path, "worker:1", trials=trials, restarts=0)
    for t in range(1, trials + 1):
        for e in range(1, epochs + 1):
            tracker.epoch_done(t, f"trial{t}", e, epochs, seconds=10.0, images_per_second=250.0,
                               logs={"loss": 1.0 / e, "accuracy": 0.5, "val_loss": 0.9, "val_accuracy": 0.6})
            yield parse((tmp_path / "progress-worker-1.json").read_text())


def make_source(root, files=None):
    files = files or {"train/CN/a.png": b"a" * 100, "train/AD/b.png": b"b" * 50, "val/CN/c.png": b"c"}
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return root


# --- images: a `docker save` stream made from layer blobs -----------------------------------
def digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def docker_save(layer_blobs: list[bytes], tag: str = "t:1") -> tuple[bytes, str]:
    """A docker-archive like `docker save` writes (legacy layout), and its image ID."""
    config = json.dumps({"rootfs": {"type": "layers", "diff_ids": [digest(b) for b in layer_blobs]}}).encode()
    files = {f"v1-{i}/layer.tar": b for i, b in enumerate(layer_blobs)}
    files[f"{digest(config)[7:]}.json"] = config
    files["manifest.json"] = json.dumps([{"Config": f"{digest(config)[7:]}.json", "RepoTags": [tag],
                                          "Layers": [f"v1-{i}/layer.tar" for i in range(len(layer_blobs))]}]).encode()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue(), digest(config)


def chunks_of(data: bytes, size: int = 7000):
    return (data[i:i + size] for i in range(0, len(data), size))


BLOBS = [b"base layer " * 5000, b"requirements " * 300, b"code v1"]


def host_facts(**said: str) -> "HostFacts":
    """Preflight facts as a host's probe would say them (`key=value` lines, then end=ok), read by
    the real parser."""
    from launcher.host_facts import parse
    return parse("".join(f"{key}={value}\n" for key, value in said.items()) + "end=ok\n")


def run_folder(root: Path, *boards: str) -> Path:
    """A collected run's folder with a TensorBoard folder at each of `boards` (e.g. tensorboard, hosts/h1/tensorboard)."""
    for board in boards:
        (root / board / "small_cnn" / "train").mkdir(parents=True)
    return root


SEARCH_DOC = {"schema": 1, "mode": "parallel", "best": {"candidate": "t1", "val_accuracy": 0.9, "host": "h1"},
              "candidates": [{"candidate": "t1", "val_accuracy": 0.9, "val_loss": 0.3, "train_seconds": 1.0,
                              "images_per_second": 10.0, "params": 5, "epochs": 2, "host": "h1"}],
              "search": {"hosts": ["h0", "h1"], "sampler": "grid", "lost": {}}}


def collected_run(tmp_path: Path, doc: dict = SEARCH_DOC) -> Path:
    """runs/lab/abc123 with its results.json (by default a parallel grid search of one trial on h0, h1)."""
    folder = tmp_path / "runs" / "lab" / "abc123"
    folder.mkdir(parents=True)
    (folder / "results.json").write_text(json.dumps(doc))
    return folder


def telemetry_sample(t: float, gpus=((0, 50.0),), **kw) -> Sample:
    """One host's sample at `t` as the sampler takes it: GPUs (index, utilisation), training trial 2, epoch 3."""
    return Sample(time=t, cpu=1.5, cpu_limit=2.0, cpu_queued=0.25, mem=100.0, mem_limit=1000.0, net_in=10.0, net_out=20.0, swap=0.0,
                  gpus=tuple(Gpu(i, util=u, mem=1.0, mem_total=2.0, power=None, temp=40.0) for i, u in gpus),
                  training=True, trial=2, epoch=3, **kw)
