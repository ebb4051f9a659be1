"""`bench/lanlab.py`, the LAN lab's command line, as a newcomer runs it: `up` writes an inventory
that validates as it is (hosts, key, known_hosts, a train section, real images to copy into each
host's own data folder); a second `up` of the same tag (a colleague's lab, on a shared box) is
refused naming the lab, and so is another tag on the same subnet, both changing nothing;
`--replace` rebuilds it; `down` works where pytest is not installed (a launcher-only venv)."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest
import yaml

from launcher.cli import main as tfcompose
from support.common import REPO, require
from support.lab import Lab, available
from support.netns import own_subnet

pytestmark = pytest.mark.integration
SUBNET = "10.213.12"       # its own /24: the bench lab (10.213.9) and the other tests' labs stay apart
# As in a venv without pytest: `import pytest` fails, whatever is installed here.
NO_PYTEST = "import runpy, sys; sys.modules['pytest'] = None; sys.path.insert(0, 'bench'); " \
            "sys.argv = ['lanlab.py', *sys.argv[1:]]; " \
            "runpy.run_path('bench/lanlab.py', run_name='__main__')"


def lanlab(*args: str, without_pytest: bool = False) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-c", NO_PYTEST, *args] if without_pytest else [sys.executable, "bench/lanlab.py", *args]
    return subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=180)


@pytest.fixture
def tag():
    ok, why = available()
    require(ok, why)
    name = f"n{os.getpid() % 1000}"
    yield name
    Lab(tag=name, subnet=SUBNET).down()


def answers(address: str, port: int = 22) -> bool:
    try:
        with socket.create_connection((address, port), timeout=3) as s:
            return s.recv(4).startswith(b"SSH")
    except OSError:
        return False


def test_lanlab_up_writes_a_runnable_inventory_refuses_to_replace_a_lab_and_down_needs_no_pytest(tag, capsys):
    made = lanlab("up", "1", "--tag", tag, "--subnet", SUBNET, "--base-image", "tf-offline-base:cpu")
    assert made.returncode == 0, made.stderr
    lab = Lab(tag=tag, subnet=SUBNET)
    inv = lab.root / "inventory.yaml"
    assert f"inventory: {inv}" in made.stdout and f"tfcompose validate -i {inv}" in made.stdout
    assert tfcompose(["validate", "-i", str(inv)]) == 0
    assert "search (parallel" in capsys.readouterr().out
    doc = yaml.safe_load(inv.read_text())
    assert doc["train"]["dataset"]["train_dir"] == "/data" and doc["train"]["candidates"]
    source = lab.root / "data-source"
    assert doc["dataset_source"] == str(source) and len(list(source.glob("*/*.png"))) == 1797   # the digits
    (host,) = doc["hosts"]
    assert host["data_dir"] == str(lab.root / "h0" / "dataset") and not (lab.root / "h0" / "dataset").exists()
    record = (lab.root / "lab.json").read_text()
    address = f"{own_subnet(SUBNET)}.2"

    again = lanlab("up", "2", "--tag", tag, "--subnet", SUBNET)
    assert again.returncode == 2 and again.stdout == ""
    assert f"a lab tagged {tag!r} already exists: 1 host(s) (h0 {address}), made by " in again.stderr
    assert "--replace" in again.stderr and "Nothing was changed" in again.stderr
    assert (lab.root / "lab.json").read_text() == record and answers(address)     # the lab is untouched
    other = lanlab("up", "1", "--tag", f"{tag}x", "--subnet", SUBNET)
    assert other.returncode == 2 and f"the subnet {own_subnet(SUBNET)}.0/24 is already in use" in other.stderr
    assert not Lab(tag=f"{tag}x").root.exists() and answers(address)

    rebuilt = lanlab("up", "1", "--tag", tag, "--subnet", SUBNET, "--replace")
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert json.loads((lab.root / "lab.json").read_text())["made_at"] >= json.loads(record)["made_at"]
    assert answers(address)

    gone = lanlab("down", "--tag", tag, without_pytest=True)
    assert gone.returncode == 0 and gone.stdout == f"lab {tag}: removed\n", gone.stderr
    assert not lab.root.exists() and not answers(address)
    assert lanlab("down", "--tag", tag, without_pytest=True).stdout == f"lab {tag}: nothing to remove\n"


def test_without_scikit_learn_the_lab_gets_generated_images_instead_of_the_digits(tmp_path):
    script = ("import sys; sys.modules['sklearn'] = None; sys.path.insert(0, 'bench'); import lanlab; "
              f"print(lanlab.write_data(__import__('pathlib').Path({str(tmp_path / 'data')!r}))[1])")
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("400 generated images (4 classes")
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == ["class_00", "class_01", "class_02", "class_03"]
    assert len(list((tmp_path / "data").glob("*/*.png"))) == 400
