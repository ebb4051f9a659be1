"""The rank shim end to end: two containers given only what a JobSet gives its pods (an index and
stable host names, no TF_CONFIG) form one MultiWorkerMirroredStrategy cluster and finish a search."""
from __future__ import annotations

import json
import subprocess
import uuid

import pytest
import yaml


pytestmark = pytest.mark.integration


def test_two_pods_with_jobset_names_and_no_tf_config_train_together(tmp_path, trainer_image):  # noqa: F811
    jobset, project = "mri", f"tfc-jobset-{uuid.uuid4().hex[:8]}"
    services = {}
    for i in range(2):
        pod = f"{jobset}-worker-0-{i}"
        services[f"w{i}"] = {
            "image": trainer_image, "hostname": pod,
            "networks": {"lan": {"aliases": [f"{pod}.{jobset}"]}},  # the JobSet's DNS names
            "command": ["python3", "-m", "trainer"],
            "environment": {"JOB_COMPLETION_INDEX": str(i), "TFC_NUM_WORKERS": "2",
                            "TFC_PEER_PATTERN": f"{jobset}-worker-0-{{index}}.{jobset}", "TFC_TF_PORT": "2222",
                            "TFC_RESULTS_DIR": "/results", "TFC_TRAIN_RESULTS_DIR": "/results", "TFC_TRAIN_EPOCHS": "1",
                            "TFC_TRAIN_CANDIDATES": "small_cnn,deep_cnn", "TFC_TRAIN_DATASET__IMAGE_SIZE": "[32, 32]",
                            "TFC_TRAIN_JOIN_TIMEOUT_S": "120"},
            "volumes": [f"./results{i}:/results"], "cpus": 1.0}
    (tmp_path / "compose.yaml").write_text(yaml.safe_dump({"services": services, "networks": {"lan": {}}}))
    try:
        proc = subprocess.run(["docker", "compose", "-p", project, "up", "--exit-code-from", "w0"], cwd=tmp_path,
                              capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stdout[-4000:]
        doc = json.loads((tmp_path / "results0" / "results.json").read_text())
        assert doc["workers"] == 2 and doc["replicas"] == 2
        assert [c["candidate"] for c in doc["candidates"]] == ["small_cnn", "deep_cnn"]
        assert "[worker:1] cluster ready: 2 worker(s)" in proc.stdout
        assert not (tmp_path / "results1" / "results.json").exists()  # only the chief wrote
    finally:
        subprocess.run(["docker", "compose", "-p", project, "down", "-t", "1"], cwd=tmp_path, capture_output=True)
