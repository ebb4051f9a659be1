"""`status`'s one look at a host's hardware (launcher/telemetry/once.py), through the one fake
connection: what the sampler said, as a sample and a note on the part that did not answer."""
from __future__ import annotations

from launcher.plan import make
from launcher.ssh.connection import Result
from launcher.telemetry import command, once
from support.builders import cluster
from support.fakes import FakeConnection

SAID = ("T 1700000000.0 100.25\nH 4 16000000 4096\nN eth0\n"
        "S 100.25 - - - - - 5000 9000 10 20 -\nS 101.25 - - - - - 130000 259000 10 20 -\n")


def test_a_gpu_that_does_not_answer_is_said_beside_the_cpu_memory_and_network_it_still_gives():
    """#46: a hung nvidia-smi once cost `status` its whole hardware line (CPU and memory too)."""
    made = cluster(1)
    host = made.hosts[0]
    conn = FakeConnection(lambda argv: Result(0, SAID + "E 137\n", ""))
    sample, note = once.now(host, conn, make(made))
    assert sample is not None and sample.net_in is not None and sample.gpus == ()
    assert note == f"GPUs not measured: nvidia-smi did not answer within {command.ONCE_GPU_S} s (ended)"
    sample, note = once.now(host, FakeConnection(lambda argv: Result(0, SAID, "")), make(made))
    assert sample is not None and note == ""
