"""Rendering: golden files (one case per folder: inventory → expected files), properties, compose."""
from __future__ import annotations

import json
import os
import pytest
import yaml
from hypothesis import HealthCheck, given, settings, strategies as st
from support.common import DATA
from launcher import plan
from launcher.inventory.load import load_cluster
from launcher.stages import render
from launcher.cli import main


CASES = sorted(p for p in (DATA / "render").iterdir() if p.is_dir())


UPDATE = os.environ.get("TFC_UPDATE_GOLDEN") == "1"


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_golden_render(case):
    rendered = render.render_cluster(plan.make(load_cluster(case / "inventory.yaml")))
    expected_dir = case / "expected"
    if UPDATE:
        for host, files in rendered.items():
            (expected_dir / host).mkdir(parents=True, exist_ok=True)
            for name, text in files.items():
                (expected_dir / host / name).write_text(text)
    expected = {h.name: {f.name: f.read_text() for f in sorted(h.iterdir())} for h in sorted(expected_dir.iterdir())}
    assert {h: dict(sorted(f.items())) for h, f in rendered.items()} == expected


def test_render_cli_writes_exactly_the_bundles_and_is_byte_stable(tmp_path, capsys):
    case = DATA / "render" / "two-host" / "inventory.yaml"
    assert main(["render", "-i", str(case), "-o", str(tmp_path / "one")]) == 0
    assert main(["render", "-i", str(case), "-o", str(tmp_path / "two")]) == 0
    files = sorted(p.relative_to(tmp_path / "one") for p in (tmp_path / "one").rglob("*") if p.is_file())
    assert [str(f) for f in files] == [f"oasis-search/{h}/{n}" for h in ("gpu-a", "gpu-b")
                                       for n in (".env", ".tfcompose-run", "compose.yaml", "tf_config.json", "train.yaml")]
    for f in files:
        assert (tmp_path / "one" / f).read_bytes() == (tmp_path / "two" / f).read_bytes()


def test_rendered_files_hold_no_key_material(tmp_path):
    key = tmp_path / "id_secret"
    key.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nc2VjcmV0\n-----END OPENSSH PRIVATE KEY-----\n")
    path = tmp_path / "inv.yaml"
    path.write_text(f"cluster: c\nssh: {{user: u, identity_file: {key}}}\nhosts:\n  - {{name: a, address: 10.0.0.1}}\n")
    for files in render.render_cluster(plan.make(load_cluster(path))).values():
        text = "".join(files.values())
        assert "PRIVATE KEY" not in text and "c2VjcmV0" not in text and str(key) not in text


def test_with_tracking_the_hosts_write_the_best_model_for_mlflow_and_never_see_the_tracker(tmp_path):
    path = tmp_path / "inv.yaml"
    path.write_text("cluster: c\nhosts:\n  - {name: a, address: 10.0.0.1}\n  - {name: b, address: 10.0.0.2}\n"
                    "tracking: {mlflow: {uri: 'https://lab:pw-9d8c7b6a@mlflow.lab', experiment: mri-exp}}\n")
    tracked = render.render_cluster(plan.make(load_cluster(path, environ={"USER": "u"})))
    for files in tracked.values():
        text = "".join(files.values())
        assert "TFC_MLFLOW_MODEL: '1'" in files["compose.yaml"] or 'TFC_MLFLOW_MODEL: "1"' in files["compose.yaml"]
        assert "pw-9d8c7b6a" not in text and "mlflow.lab" not in text and "mri-exp" not in text
    path.write_text("cluster: c\nhosts:\n  - {name: a, address: 10.0.0.1}\n")
    plain = render.render_cluster(plan.make(load_cluster(path, environ={"USER": "u"})))
    assert all("TFC_MLFLOW_MODEL" not in files["compose.yaml"] for files in plain.values())


names = st.from_regex(r"[a-z][a-z0-9-]{0,10}[a-z0-9]", fullmatch=True)


gpus = st.one_of(st.just("all"), st.integers(0, 8), st.lists(st.integers(0, 7), min_size=1, max_size=4, unique=True))


@st.composite
def inventories(draw):
    n = draw(st.integers(1, 8))
    host_names = draw(st.lists(names, min_size=n, max_size=n, unique=True))
    chief = draw(st.one_of(st.none(), st.integers(0, n - 1)))
    hosts = []
    for i, name in enumerate(host_names):
        host = {"name": name, "address": f"10.0.{i // 250}.{i % 250 + 1}", "gpus": draw(gpus)}
        if draw(st.booleans()):
            host["tf_port"] = draw(st.integers(1024, 65535))
        if chief == i:
            host["chief"] = True
        hosts.append(host)
    return {"cluster": draw(names), "ssh": {"user": "u", "config_file": "./none"}, "hosts": hosts}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(doc=inventories())
def test_every_host_gets_the_same_cluster_each_index_once_one_chief(tmp_path, doc):
    path = tmp_path / "inventory.yaml"
    path.write_text(yaml.safe_dump(doc))
    rendered = render.render_cluster(plan.make(load_cluster(path)))
    configs = [json.loads(files["tf_config.json"]) for files in rendered.values()]
    assert len({json.dumps(c["cluster"], sort_keys=True) for c in configs}) == 1
    assert sorted(c["task"]["index"] for c in configs) == list(range(len(doc["hosts"])))
    chiefs = [h for h, c in zip(rendered, configs) if c["task"]["index"] == 0]
    marked = [h["name"] for h in doc["hosts"] if h.get("chief")] or [doc["hosts"][0]["name"]]
    assert chiefs == marked
    workers = configs[0]["cluster"]["worker"]
    assert workers[0].startswith(next(h["address"] for h in doc["hosts"] if h["name"] == marked[0]) + ":")
