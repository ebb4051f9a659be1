"""Every rendered file accepted by Docker Compose itself."""
from __future__ import annotations

import subprocess

import pytest

from support.common import DATA, docker_ok, require
from launcher import plan
from launcher.inventory.load import load_cluster
from launcher.stages import render

CASES = sorted(p for p in (DATA / "render").iterdir() if p.is_dir())


@pytest.mark.integration
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_docker_compose_accepts_every_rendered_file(case, tmp_path):
    require(docker_ok(), "no Docker engine answers `docker info`")
    render.write_bundles(plan.make(load_cluster(case / "inventory.yaml")), tmp_path)
    folders = [p.parent for p in tmp_path.rglob("compose.yaml")]
    assert folders
    for folder in folders:
        check = subprocess.run(["docker", "compose", "config", "-q"], cwd=folder, capture_output=True, text=True)
        assert check.returncode == 0, f"{folder}: {check.stderr}"


@pytest.mark.integration
def test_user_values_reach_the_container_byte_for_byte(tmp_path):
    """Compose interpolates `$` in the files it reads: a value like `a$b` must still arrive as `a$b`."""
    import json
    require(docker_ok(), "no Docker engine answers `docker info`")
    (tmp_path / "code").mkdir()
    (tmp_path / "inv.yaml").write_text(
        "cluster: c\nssh: {user: u, config_file: ./none}\n"
        "run: {command: [python, x.py, --name=$HOME, '$${TOKEN}'], code_dir: ./code, env: {TOKEN: 'a$b', LIT: 'x$$y'}}\n"
        "hosts: [{name: a, address: 10.0.0.1, workdir: /opt/tfc}]\n")
    render.write_bundles(plan.make(load_cluster(tmp_path / "inv.yaml")), tmp_path / "out")
    folder = tmp_path / "out" / "c" / "a"
    env = {"PATH": "/usr/bin:/bin", "HOME": "/home/someone", "TOKEN": "from-the-host"}
    shown = subprocess.run(["docker", "compose", "config", "--format", "json"], cwd=folder, capture_output=True,
                           text=True, env=env)
    assert shown.returncode == 0, shown.stderr
    # compose prints its model re-escaped (a literal $ as $$), so that the output is a valid file again
    literal = lambda v: v.replace("$$", "$")  # noqa: E731
    service = json.loads(shown.stdout)["services"]["a"]
    assert [literal(a) for a in service["command"]] == ["python", "x.py", "--name=$HOME", "${TOKEN}"]
    assert literal(service["environment"]["TOKEN"]) == "a$b"
    assert literal(service["environment"]["LIT"]) == "x$y"   # the inventory's own $$ is a literal $
    assert "/home/someone" not in shown.stdout and "from-the-host" not in shown.stdout
