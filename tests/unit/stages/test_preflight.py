"""preflight: what one host's facts mean (judge)."""
from __future__ import annotations

import pytest
from launcher.stages import preflight
from support.builders import host, host_facts

GOOD = {"docker": "ok", "runtimes": '{"runc":{}}', "compose": "2.26.1", "gpu_count": "0", "own_running": "0",
        "port_busy": "0", "workdir": "ok", "free_kb": str(50 * 1024 * 1024), "bundle": "none", "clock": "1000.0"}



@pytest.mark.parametrize("change, problem", [
    ({}, None),
    ({"docker": "permission denied"}, "`docker info` fails"),
    ({"compose": "1.29.2"}, "compose v2 is needed"),
    ({"compose": "missing"}, "compose v2 is needed"),
    ({"port_busy": "1"}, "tf_port 2222 is already in use"),
    ({"port_busy": "1", "own_running": "1"}, None),           # our own container holds it: a re-run
    ({"workdir": "not writable"}, "not writable"),
    ({"free_kb": "1024"}, "MB free"),
    ({"bundle": "foreign"}, "was not made by tfcompose"),
])
def test_preflight_blocks_on_what_would_break_the_start(change, problem):
    problems, _ = preflight.judge(host("a"), host_facts(**{**GOOD, **change}), midpoint=1000.0)
    assert (problems == []) if problem is None else any(problem in p for p in problems), problems


def test_what_bootstrap_can_fix_says_tfcompose_bootstrap():
    for change in ({"docker": "permission denied"}, {"compose": "missing"}, {"workdir": "mkdir: cannot create directory '/opt/tfcompose': Permission denied"}):
        problems, _ = preflight.judge(host("a"), host_facts(**{**GOOD, **change}), midpoint=1000.0)
        assert len(problems) == 1 and "`tfcompose bootstrap`" in problems[0], problems


def test_preflight_checks_gpus_and_warns_on_clock_skew():
    problems, _ = preflight.judge(host("a", gpus=[0, 3]), host_facts(**{**GOOD, "runtimes": "nvidia", "gpu_count": "2"}), 1000.0)
    assert problems == ["gpus 0,3 requested but nvidia-smi lists 2 GPU(s)"]
    problems, _ = preflight.judge(host("a", gpus="all"), host_facts(**GOOD), 1000.0)
    assert any("no nvidia runtime (`tfcompose bootstrap` installs the NVIDIA Container Toolkit" in p for p in problems)
    _, warnings = preflight.judge(host("a"), host_facts(**{**GOOD, "clock": "1003.5"}), 1000.0)
    assert warnings and "+3.5 s" in warnings[0]


def test_a_slow_probe_is_not_taken_for_a_wrong_clock():
    from launcher.stages.preflight import clock_offset
    assert clock_offset(1003.5, 1000.0, window=4.0) == 0.0          # read during a probe that took 8 s
    assert clock_offset(1010.0, 1000.0, window=4.0) == 6.0
    assert clock_offset(990.0, 1000.0, window=4.0) == -6.0 and clock_offset(host_facts(clock="x").clock, 1000.0) is None


def test_a_probe_cut_short_is_named_as_such_not_as_a_workdir_that_is_not_writable():
    # Twice, with two test runs on one machine, a host's probe answered without its workdir line
    # and preflight read the missing fact as "workdir … is not writable".
    from launcher.errors import RemoteError
    from launcher.ssh.connection import Result
    from support.fakes import FakeConnection
    cut = "\n".join(f"{k}={v}" for k, v in list(GOOD.items())[:5]) + "\n"
    conn = FakeConnection(lambda command: Result(137, cut, "Killed"))
    with pytest.raises(RemoteError) as stopped:
        preflight.check_host(host("a"), conn, "c")
    said = str(stopped.value)
    assert "the preflight probe stopped (exit status 137) after compose, gpu_count, own_running: Killed" in said
    assert "not writable" not in said
    whole = FakeConnection(lambda command: Result(0, "\n".join(f"{k}={v}" for k, v in GOOD.items()) + "\nend=ok\n", ""))
    assert preflight.check_host(host("a"), whole, "c").host == "a"


def test_a_workdir_that_is_not_writable_says_why_in_the_systems_words():
    problems, _ = preflight.judge(host("a"), host_facts(**{**GOOD, "workdir": "mkdir: cannot create directory '/srv/x': "
                                                                              "No space left on device"}), 1000.0)
    assert problems == ["workdir /opt/tfcompose is not writable (mkdir: cannot create directory '/srv/x': "
                        "No space left on device)"]


def test_a_hosts_answer_is_read_into_checked_fields_whatever_it_says():
    from launcher.host_facts import parse
    said = parse("docker=ok\ngpu_count=lots\nfree_kb=-5\nclock=nan\nroute=\x1b[31mred\nrun_finished=1\n"
                 "not a fact\nBAD KEY=1\nend=ok\n" + "x=1\n" * 1000)
    assert said.complete and said.docker_ok and said.run_finished
    assert (said.gpu_count, said.free_kb, said.clock) == (0, None, None)       # not numbers: unknown
    assert "\x1b" not in said.route and len(said.said) < 20


def test_a_long_runtimes_answer_still_finds_nvidia():
    # Newer Docker engines print each runtime's features: the list runs to kilobytes.
    runtimes = '{"io.containerd.runc.v2":{"path":"runc","status":{"features":"' + "x" * 5000 + '"}},"nvidia":{}}'
    problems, _ = preflight.judge(host("a", gpus="all"), host_facts(**{**GOOD, "runtimes": runtimes, "gpu_count": "1"}),
                                  1000.0)
    assert problems == []

