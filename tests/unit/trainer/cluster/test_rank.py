"""trainer/cluster/rank.py: ranks and peers from the scheduler's environment."""
from __future__ import annotations

import pytest
from trainer.cluster import rank
from trainer.spec.errors import ConfigError


@pytest.mark.parametrize("nodelist, expanded", [
    ("gpu[01-03,07],cpu-a", ["gpu01", "gpu02", "gpu03", "gpu07", "cpu-a"]),
    ("n[8-11]", ["n8", "n9", "n10", "n11"]),
    ("rack[1-2]-n[1-2]", ["rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"]),
    ("single", ["single"]),
])
def test_slurm_host_lists_expand_in_order(nodelist, expanded):
    assert rank.expand_nodelist(nodelist) == expanded


@pytest.mark.parametrize("nodelist", ["gpu[01-", "gpu[a-b]", "n[1-999999]"])
def test_bad_host_lists_are_one_line_errors(nodelist):
    with pytest.raises(ConfigError, match="SLURM_JOB_NODELIST"):
        rank.expand_nodelist(nodelist)


def test_a_given_tf_config_wins_and_no_scheduler_means_no_change():
    env = {"TF_CONFIG": '{"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 0}}',
           "SLURM_PROCID": "1", "SLURM_JOB_NODELIST": "x[1-2]"}
    assert not rank.apply(env) and env["TF_CONFIG"].startswith('{"cluster": {"worker": ["a:1"]')
    assert not rank.apply({"PATH": "/bin"})
    with pytest.raises(ConfigError, match="index 5"):
        rank.apply({"SLURM_PROCID": "5", "SLURM_NTASKS": "2", "SLURM_JOB_NODELIST": "x[1-2]"})
