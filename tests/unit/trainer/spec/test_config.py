
from __future__ import annotations

import os
import subprocess
import sys
import pytest
from support.common import REPO
from trainer.spec.config import TrainConfig
from trainer.spec.load import load_config
from trainer.spec.errors import ConfigError


def write(tmp_path, text):
    path = tmp_path / "train.yaml"
    path.write_text(text)
    return str(path)


def test_defaults_are_a_small_synthetic_run():
    cfg = load_config(None)
    assert cfg.dataset.kind == "synthetic" and cfg.epochs == 2 and cfg.candidates == ["small_cnn"]


def test_file_then_overrides(tmp_path):
    path = write(tmp_path, "epochs: 5\ndataset: {kind: synthetic, image_size: [32, 32]}\n")
    cfg = load_config(path, [("epochs", 3), ("dataset.classes", 3)])
    assert cfg.epochs == 3 and cfg.dataset.image_size == (32, 32) and cfg.dataset.classes == 3


@pytest.mark.parametrize("text, expected", [
    ("epochs: 0", "epochs: Received 0. Expected an integer ≥ 1."),
    ("epochs: true", "epochs: Received true. Expected an integer ≥ 1."),
    ("epochs: '3'", "epochs: Received '3'. Expected an integer ≥ 1."),
    ("batch_per_replica: -4", "batch_per_replica: Received -4. Expected an integer 1–65536."),
    ("learning_rate: 0", "learning_rate: Received 0. Expected a number > 0 and ≤ 10."),
    ("weights: random", "weights: Received 'random'. Expected 'none' or 'imagenet'."),
    ("strategy: parameter_server", "strategy: Received 'parameter_server'."),
    ("communication: mpi", "communication: Received 'mpi'. Expected 'auto', 'ring' or 'nccl'."),
    ("join_timeout_s: -1", "join_timeout_s: Received -1. Expected a number of seconds 1–86400"),
    ("join_timeout_s: 1.0e-320", "join_timeout_s: Received 1e-320. Expected a number of seconds 1–86400"),
    ("profile_steps: [0, 10000000000000]", "profile_steps: Received [0, 10000000000000]. Expected two step numbers [first, last) with 0 ≤ first < last ≤ 1,000,000,000."),
    ("candidates: []", "candidates: Received []. Expected a non-empty list"),
    ("candidates: ['rm -rf /']", "candidates[0]: Received 'rm -rf /'. Expected a non-empty list of candidate names"),
    ("candidates: [resnet]", "candidates: Received ['resnet']. Expected a non-empty list of candidate names"),
    ("candidates: [a, a]", "candidates: Received ['a', 'a']. Expected a non-empty list of candidate names like 'small_cnn' or 'package.module:function', each once; built in: small_cnn, deep_cnn, vgg16, resnet50."),
    ("dataset: {image_size: [4, 56]}", "dataset.image_size: Received [4, 56]"),
    ("dataset: {image_size: 56}", "dataset.image_size: Received 56. Expected [height, width]"),
    ("dataset: {validation_split: 1.5}", "dataset.validation_split: Received 1.5. Expected a number between 0 and 1"),
    ("dataset: {color_mode: cmyk}", "dataset.color_mode: Received 'cmyk'. Expected 'grayscale' or 'rgb'."),
    ("dataset: {kind: image_folder}", "dataset: Received a mapping. Expected a `train_dir` when kind is 'image_folder'."),
    ("dataset: {kind: folder}", "dataset.kind: Received 'folder'. Expected 'image_folder' or 'synthetic'."),
    ("epoch: 3", "epoch: Unknown key 'epoch'. Expected one of the known keys: allreduce, backup_dir, batch_per_replica,"),
    ("dataset: {trian_dir: /x}", "dataset.trian_dir: Unknown key 'trian_dir'. Expected one of the known keys: classes,"),
])
def test_each_bad_value_names_file_field_received_and_expected(tmp_path, text, expected):
    path = write(tmp_path, text + "\n")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert len(err.value.lines) == 1
    assert err.value.lines[0].startswith(f"{path}: {expected}")


def test_every_error_is_reported_not_just_the_first(tmp_path):
    path = write(tmp_path, "epochs: 0\nseed: -1\nweights: x\n")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert sorted(line.split(": ")[1] for line in err.value.lines) == ["epochs", "seed", "weights"]


@pytest.mark.parametrize("content, fragment", [
    (b"epochs: [1\n", "not valid YAML"),
    (b"- a\n- b\n", "Expected a mapping of settings"),
    (b"\xff\xfe\x00junk", "not a text file"),
])
def test_unreadable_files(tmp_path, content, fragment):
    path = tmp_path / "train.yaml"
    path.write_bytes(content)
    with pytest.raises(ConfigError, match=fragment):
        load_config(str(path))


def test_cli_bad_input_exits_2_with_one_line_and_no_traceback(tmp_path):
    path = write(tmp_path, "epochs: 0\n")
    proc = subprocess.run([sys.executable, "-m", "trainer", "--config", path], capture_output=True, text=True,
                          cwd=REPO, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"tfcompose trainer: {path}: epochs: Received 0. Expected an integer ≥ 1."
    assert "tensorflow" not in proc.stderr.lower()  # failed before TensorFlow was even imported


def test_cli_flag_and_bad_tf_config(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "trainer", "--epochs", "2"], capture_output=True, text=True,
                          cwd=REPO, timeout=60, env={"TF_CONFIG": '{"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 3}}',
                                                     "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 2 and "TF_CONFIG: task.index: Received 3" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_model_fields_all_documented():
    # Every field carries the text its error message uses.
    for model in (TrainConfig, TrainConfig.model_fields["dataset"].annotation):
        for name, info in model.model_fields.items():
            assert (info.json_schema_extra or {}).get("expected"), name


BAD_INPUTS = sorted((REPO / "tests" / "data" / "bad_trainer_inputs").glob("*.expected"))


def test_the_trainer_corpus_is_large_enough():
    assert len(BAD_INPUTS) >= 15


def case_input(case):
    """A corpus case: its arguments and its TF_CONFIG (or None), and the one line it must get."""
    config, tfconfig = case.with_suffix(".yaml"), case.with_suffix(".tfconfig")
    args = ["--config", str(config)] if config.exists() else []
    expected = case.read_text().strip().replace("{f}", str(config))
    return args, (tfconfig.read_text() if tfconfig.exists() else None), f"tfcompose trainer: {expected}"


def test_bad_trainer_input_through_python_m_trainer_exits_2_with_one_line(tmp_path):
    """The first case as a user meets it: `python -m trainer` (with its stderr filter) in a process."""
    args, tf_config, line = case_input(BAD_INPUTS[0])
    env = {"PATH": "/usr/bin:/bin", "TF_CPP_MIN_LOG_LEVEL": "2", **({"TF_CONFIG": tf_config} if tf_config else {})}
    proc = subprocess.run([sys.executable, "-m", "trainer", *args, "--results-dir", str(tmp_path / "r")],
                          capture_output=True, text=True, cwd=REPO, timeout=60, env=env)
    assert (proc.returncode, proc.stderr.strip(), proc.stdout) == (2, line, "")
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("case", BAD_INPUTS, ids=[p.stem for p in BAD_INPUTS])
def test_bad_trainer_input_exits_2_with_one_line_before_anything_starts(case, tmp_path, monkeypatch, capsys):
    """Every case through the trainer's main, in this process (two interpreter start-ups a case
    otherwise: the filter's parent and the trainer): the environment as bare as the container's."""
    from trainer.main import main
    args, tf_config, line = case_input(case)
    for name in list(os.environ):
        if name not in ("PATH", "HOME"):
            monkeypatch.delenv(name)
    if tf_config:
        monkeypatch.setenv("TF_CONFIG", tf_config)
    try:
        code = main([*args, "--results-dir", str(tmp_path / "r")])
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    assert code == 2
    assert err.strip() == line
    assert out == "" and not (tmp_path / "r").exists()  # nothing started, nothing written
