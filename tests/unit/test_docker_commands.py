"""Remote commands: built in one place, values passed as arguments, quoted once, bounded."""
from __future__ import annotations

import shlex
import pytest
from launcher import docker_commands as dc
from launcher.ssh.connection import quote_command


HOSTILE = ["a b", "$(touch /tmp/pwned)", "`id`", "x;rm -rf /", "'\"", "-rf", "x\ny"]


@pytest.mark.parametrize("value", HOSTILE)
def test_values_never_enter_the_script_text(value):
    for cmd in (dc.inspect_cluster_containers(value, value), dc.remove_cluster_containers(value, value),
                dc.remove_project_networks(value), dc.container_logs(value), dc.host_probe(value, value, 1, value, value),
                dc.tensorboard_keeper(value, value, value, value, value, value, 1, 1),
                dc.remove_tensorboards(value, value, value)):
        assert cmd[:2] == ["sh", "-c"] and value not in cmd[2]
        assert shlex.split(quote_command(cmd)) == [str(c) for c in cmd]  # the host's shell sees the same argv


def test_logs_follow_and_tail_flags():
    assert dc.container_logs("abc", tail=15)[-3:] == ["--tail", "15", "abc"]
    assert dc.container_logs("abc", follow=True)[-2:] == ["--follow", "abc"]
