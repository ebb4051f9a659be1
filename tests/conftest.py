"""Shared fixtures (helpers and constants: tests/support/)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from support import lanes, rigs
from support.cluster import TRAIN, labelled
from support.common import REPO, TEST_IMAGE, TrainerProcs, docker_ok, ensure_base_image, free_ports, require
from support.sshd import write_inventory

pytest_plugins = ["support.timing"]


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    # Ctrl-C is part of what the tests check. A suite started in the background of a shell without
    # job control inherits SIGINT ignored, and so would every `tfcompose` it runs (an ignored
    # signal stays ignored across exec): Python's own handler back, which exec resets to the default.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    # The run's root, its rigs and the check that nothing is left (tests/support/rigs.py): made by
    # the controller (a lane finds the root in its environment), and only when integration tests run.
    if not hasattr(config, "workerinput") and rigs.wants_rigs(config.args):
        config.pluginmanager.register(rigs.RunKeeper(config), "tfc-run-keeper")


@pytest.hookimpl(tryfirst=True)        # before pytest-xdist reads the groups
def pytest_collection_modifyitems(config, items):
    lanes.heaviest_first(items)       # with two lanes, the longest modules start first (support/lanes.py)


def pytest_xdist_node_collection_finished(node, ids):
    lanes.check_grouped(node.config, ids)     # each module stays whole on one lane, or the run stops


@pytest.fixture(autouse=True)
def own_state(tmp_path):
    """What tfcompose remembers on this machine (which data_dirs it filled) stays in the test's
    folder (its own MonkeyPatch: a test's `monkeypatch.undo()` must not undo this)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg-state"))
        yield


@pytest.fixture(autouse=True)
def no_secret_outlives_its_test():
    """The secrets a test made known (launcher/text.py masks them in all this process prints) are
    forgotten after it: another test's paths and names must not turn into `***`."""
    from launcher import text
    known = list(text._SECRETS)
    yield
    text._SECRETS[:] = known


@pytest.fixture
def trainers(tmp_path):
    procs = TrainerProcs(tmp_path)
    yield procs
    procs.kill_all()


@pytest.fixture(scope="session")
def image_folder(tmp_path_factory) -> Path:
    """A generated OASIS-layout dataset: train/ and val/ with 4 class folders of 32×32 PNGs."""
    out = tmp_path_factory.mktemp("images")
    # In a child process: the test process itself never imports TensorFlow.
    subprocess.run([sys.executable, "-m", "trainer.train.synth", str(out), "--classes", "4", "--per-class", "48",
                    "--size", "32"], check=True, cwd=REPO, capture_output=True)
    for path in [out, *out.rglob("*")]:  # readable by the non-root user a container runs as
        path.chmod(0o755 if path.is_dir() else 0o644)
    return out


@pytest.fixture(scope="session")
def trainer_image() -> str:
    """The trainer image, built the way users build it (`make image`) from the offline base: once
    per run (with two lanes, by the first that asks)."""
    require(docker_ok(), "no Docker engine answers `docker info`")

    def build(folder: Path) -> None:
        base = ensure_base_image()      # tf-offline-base:cpu when here, else tensorflow/tensorflow:latest pulled
        done = subprocess.run(["make", "image", f"BASE_IMAGE={base}", f"IMAGE={TEST_IMAGE}"], cwd=REPO,
                              capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rigs.once("trainer-image", build)
    return TEST_IMAGE


@pytest.fixture(scope="session")
def engine_template(image_cache, trainer_image) -> Path:
    """A Docker data root holding the trainer image, loaded once per run from its split layers (no
    second `docker save`): every LAN-lab engine starts from a copy (support/engine.py), so no lab
    waits for a 3 GB `docker load`. The labs that test shipping an image to an empty engine (relay,
    bootstrap) do not use it."""
    from launcher.image.local import Shipment, local_image_id
    from support.engine import make_template

    def make(folder: Path) -> None:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("XDG_CACHE_HOME", str(image_cache))
            parts = Shipment(trainer_image, local_image_id(trainer_image)).parts()
        make_template(folder, parts.chunks(list(range(len(parts.diff_ids)))))
    return rigs.once("engine-template", make) / "data"


@pytest.fixture
def sshd_farm(tmp_path):
    """Start sshd "hosts" with farm.start(name, port, tf_port); all are killed afterwards."""
    from support.sshd import SSHD, SshdFarm
    require(Path(SSHD).exists(), "OpenSSH's sshd is not installed (apt-get install openssh-server)")
    (tmp_path / "ssh").mkdir()
    farm = SshdFarm(tmp_path / "ssh")
    yield farm
    farm.stop()


def shared_cache() -> Path:
    """The run's XDG cache (tfcompose's split image layers): one for every test and lane."""
    return rigs.run_root() / "s" / "xdg-cache"


@pytest.fixture(autouse=True)
def own_cache(monkeypatch):
    """Every `up` of the run shares one cache, under the run's root: the trainer image is split
    into layers once, and nothing goes into this machine's own ~/.cache (unit-only runs: untouched)."""
    if os.environ.get(rigs.ENV):
        monkeypatch.setenv("XDG_CACHE_HOME", str(shared_cache()))


@pytest.fixture(scope="session")
def image_cache(trainer_image) -> Path:
    """The run's cache with the trainer image already split into its compressed layers (once per
    run: a cold `docker save` of 3 GB takes minutes, and is not what the tests that ship check)."""
    def split(_folder: Path) -> None:
        from launcher.image.local import Shipment, local_image_id
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("XDG_CACHE_HOME", str(shared_cache()))
            Shipment(trainer_image, local_image_id(trainer_image)).parts()
    rigs.once("image-split", split)
    return shared_cache()


@pytest.fixture(scope="session")
def second_engine(tmp_path_factory):
    """A second, empty Docker engine on its own socket (tests/engine.py): a host lacking every image."""
    import shutil
    from support.engine import SecondEngine
    require(docker_ok(), "no Docker engine answers `docker info`")
    require(shutil.which("dockerd") is not None and shutil.which("ip") is not None and os.getuid() == 0,
            "a second dockerd needs dockerd, iproute2 and root")
    engine = SecondEngine(tmp_path_factory.mktemp("engine2")).start()
    yield engine.sock
    engine.stop()


@pytest.fixture
def cluster_env(sshd_farm, tmp_path, trainer_image):
    """Start n sshd hosts; yields a function writing an inventory for them; removes containers after."""
    made = []

    def make(n=2, train=TRAIN, engines: dict | None = None, **kw):
        """engines: host index → DOCKER_HOST that host's sshd sessions use."""
        ports = free_ports(2 * n)
        hosts = [sshd_farm.start(f"h{i}", ports[2 * i], ports[2 * i + 1],
                                 env={"DOCKER_HOST": (engines or {})[i]} if i in (engines or {}) else None)
                 for i in range(n)]
        sshd_farm.known_hosts()
        name = f"t{uuid.uuid4().hex[:8]}"
        made.append(name)
        kw.setdefault("image", trainer_image)
        path = write_inventory(sshd_farm, tmp_path / f"{name}.yaml", name, hosts, train=train, **kw)
        return name, path, hosts

    yield make
    for name in made:
        ids = labelled(name)
        if ids:
            subprocess.run(["docker", "rm", "-f", *ids], capture_output=True)


@pytest.fixture(scope="module")
def neighbour():
    """A second local account, the neighbour on a shared box (tests/support/accounts.py): made for
    the module, removed after it."""
    from support import accounts
    ok, why = accounts.available()
    require(ok, why)
    account = accounts.create(accounts.account_name())
    yield account
    accounts.remove(account.name)
