"""`tfcompose tensorboard` (which host and folder: test_tensorboard_source.py): a busy port and bad input refused before anything starts, what
the keeper on the host says read as hostile, and the keeper itself (the real script under sh, with
a stand-in `docker`): it removes TensorBoard when its stdin closes, when it stays silent, when
TensorBoard stops, and when TensorBoard never answers."""
from __future__ import annotations

import os
import stat
import subprocess
import threading
import time
from pathlib import Path

import pytest
import yaml

from launcher import cli
from launcher import docker_commands as dc
from launcher.errors import BadInput, ExitCode
from launcher.stages import tensorboard as tb
from support.builders import run_folder

def test_a_busy_port_is_refused_and_port_0_picks_a_free_one():
    with tb.listen(0) as taken:
        port = taken.getsockname()[1]
        assert port > 0
        with pytest.raises(BadInput, match=rf"--port: Received {port}, which is in use on this machine"):
            tb.listen(port)


# --- what the keeper says ---------------------------------------------------------------------------


def test_the_url_is_believed_only_as_the_keeper_writes_it():
    said = tb.KeeperOutput()
    said.feed(b"url=http://127.0.0.1:70000/\nurl=http://evil.example:80/\nurl=http://127.0.0.1:4")
    assert said.port is None and not said.ready.is_set()
    said.feed(b"3571/\n")
    assert said.port == 43571 and said.ready.is_set()


def test_what_the_keeper_keeps_of_a_flood_is_bounded_and_its_heartbeat_answers_take_no_room():
    said = tb.KeeperOutput()
    said.feed(tb.ACK * 100_000)           # days of answers to the heartbeat
    said.feed(b"url=http://127.0.0.1:4000/\n")
    assert said.port == 4000
    for _ in range(100):
        said.feed(b"x" * 65536)
    assert len(said.text) == tb.OUTPUT_KEPT


def test_why_it_ended_in_one_line():
    said = tb.KeeperOutput()
    said.feed(b"ended\n/usr/bin/python3: No module named tensorboard\x1b[31m\nremoved\n")
    assert said.removed
    assert said.why(4, None, b"") == "its container stopped; it said: /usr/bin/python3: No module named tensorboard"
    failed = tb.KeeperOutput()
    assert failed.why(3, None, b"docker: Error response from daemon: no such image\n") == \
        "`docker run` failed: docker: Error response from daemon: no such image"
    slow = tb.KeeperOutput()
    slow.feed(b"slow\nremoved\n")
    assert slow.why(5, None, b"") == f"it did not answer within {tb.START_S} s"
    removed = tb.KeeperOutput()
    removed.feed(b"url=http://127.0.0.1:4000/\n\x06\x06\x06gone\n\x06not removed\n")
    assert removed.why(4, None, b"") == "its container was removed (by `tfcompose down`?)" and not removed.removed


def test_a_keeper_that_falls_silent_is_a_host_lost_not_a_wait_without_end():
    from types import SimpleNamespace
    held = SimpleNamespace(ended=threading.Event(), last_heard=time.monotonic() - tb.SILENCE_S - 1)
    said = []
    waiting = threading.Thread(target=lambda: said.append(tb._serving(held, tb.KeeperOutput())), daemon=True)
    waiting.start()
    waiting.join(2)
    assert said == [f"lost: no word from it for {tb.SILENCE_S} s"]


# --- the command line: bad input exits 2 with one line, before anything is contacted ---------------


def inventory(tmp_path: Path) -> Path:
    path = tmp_path / "inv.yaml"
    # 192.0.2.x (TEST-NET-1) answers nothing: a test that contacted a host would fail on time.
    path.write_text(yaml.safe_dump({"cluster": "c", "hosts": [{"name": "h0", "address": "192.0.2.1"},
                                                              {"name": "h1", "address": "192.0.2.2"}],
                                    "ssh": {"known_hosts": str(tmp_path / "known_hosts"),
                                            "config_file": str(tmp_path / "no-config")},
                                    "train": {"candidates": ["small_cnn"]}}))
    return path


def one_error(capsys, *args) -> tuple[int, list[str]]:
    code = cli.main(["tensorboard", *args])
    return code, capsys.readouterr().err.strip().splitlines()


def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    inv = inventory(tmp_path)
    with tb.listen(0) as taken:
        busy = str(taken.getsockname()[1])
        cases = {("-i", str(inv), "--host", "h9"): "--host: Received 'h9'. Expected a host of",
                 ("-i", str(inv), "--host", "h1"): "--host: Received 'h1', a worker of a sync search",
                 ("-i", str(inv), "--port", busy): f"--port: Received {busy}, which is in use",
                 (str(tmp_path),): "Expected a collected run",
                 (str(tmp_path), "-i", str(inv)): "Expected one of the two"}
        for args, expected in cases.items():
            started = time.monotonic()
            code, lines = one_error(capsys, *args)
            assert (code, len(lines)) == (ExitCode.BAD_INPUT, 1), (args, lines)
            assert expected in lines[0] and time.monotonic() - started < 5, (args, lines)


def test_a_collected_run_without_tensorboard_installed_says_how_to_install_it(tmp_path, capsys, monkeypatch):
    run = run_folder(tmp_path, "tensorboard")
    real = tb.importlib.util.find_spec
    monkeypatch.setattr(tb.importlib.util, "find_spec", lambda name, *a: None if name == "tensorboard" else real(name, *a))
    code, lines = one_error(capsys, str(run))
    assert code == ExitCode.FAILED and len(lines) == 1
    assert "pip install 'tfcompose[tensorboard]'" in lines[0]


# --- the keeper on the host: the real script, a stand-in docker ---------------------------------------
FAKE_DOCKER = """#!/bin/sh
d="$FAKE_DIR"
echo "$*" >> "$d/calls"
case "$1" in
  run) [ -f "$d/run-fails" ] && { echo "docker: no such image" >&2; exit 125; }; echo 0123456789ab ;;
  inspect) case "$3" in *Labels*) cat "$d/label-$4" 2>/dev/null ;; *) cat "$d/running" 2>/dev/null || echo true ;; esac ;;
  logs) cat "$d/logs" 2>/dev/null ;;
  ps) cat "$d/ids" 2>/dev/null ;;
  rm) touch "$d/removed-$3" ;;
esac
"""
URL_LINE = "TensorBoard 2.21.0 at http://127.0.0.1:43571/ (Press CTRL+C to quit)\n"


@pytest.fixture
def fake_docker(tmp_path):
    (tmp_path / "bin").mkdir()
    script = tmp_path / "bin" / "docker"
    script.write_text(FAKE_DOCKER)
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    (tmp_path / "logs").write_text(URL_LINE)
    return tmp_path


def keeper(folder: Path, start_s: int = 5, silence_s: int = 30) -> subprocess.Popen:
    argv = dc.tensorboard_keeper("c", "h0", "tfcompose-tb-00ff", "sha256:" + "a" * 64, "/w/c/results",
                                 "/results/tensorboard", start_s, silence_s)
    env = {**os.environ, "PATH": f"{folder / 'bin'}:{os.environ['PATH']}", "FAKE_DIR": str(folder)}
    return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)


def ended(proc: subprocess.Popen, seconds: float = 10) -> tuple[int, str]:
    """Its status and stdout once it has ended (within `seconds`; its output is a few lines), its
    answers to the heartbeats counted apart (`acks=N` first)."""
    proc.wait(seconds)
    out = proc.stdout.read().decode()
    return proc.returncode, f"acks={out.count(chr(6))}\n" + out.replace(chr(6), "")


def test_the_keeper_starts_tensorboard_from_the_image_read_only_on_the_hosts_loopback(fake_docker):
    proc = keeper(fake_docker)
    proc.stdin.close()
    ended(proc)
    run = next(line for line in (fake_docker / "calls").read_text().splitlines() if line.startswith("run "))
    assert "--network host" in run and "--read-only" in run
    assert "--mount type=bind,src=/w/c/results,dst=/results,readonly" in run
    assert "--label tfcompose.tensorboard=c --label tfcompose.host=h0 --label tfcompose.keeper=tfcompose-tb-00ff" in run
    assert run.endswith(f"sha256:{'a' * 64} -m tensorboard.main --logdir /results/tensorboard --host 127.0.0.1 --port 0")


def test_the_keeper_removes_tensorboard_when_its_stdin_closes(fake_docker):
    proc = keeper(fake_docker)
    proc.stdin.write(b"...")
    proc.stdin.close()                    # Ctrl-C, or the launcher killed: the SSH session ends
    code, out = ended(proc)
    assert out.splitlines() == ["acks=3", "url=http://127.0.0.1:43571/", "removed"]   # each heartbeat answered
    assert (fake_docker / "removed-0123456789ab").exists()


def test_the_keeper_removes_tensorboard_when_the_launcher_falls_silent(fake_docker):
    proc = keeper(fake_docker, silence_s=1)   # stdin open, no heartbeat: the network is lost
    started = time.monotonic()
    code, out = ended(proc)
    assert out.splitlines() == ["acks=0", "url=http://127.0.0.1:43571/", "removed"]
    assert time.monotonic() - started < 5
    proc.stdin.close()


def test_the_keeper_hears_each_heartbeat_and_ends_when_tensorboard_stops(fake_docker):
    proc = keeper(fake_docker, silence_s=2)
    for _ in range(3):                    # heartbeats keep it: 3 × 1 s, past its 2 s of silence
        proc.stdin.write(b".")
        proc.stdin.flush()
        time.sleep(1)
    assert proc.poll() is None
    (fake_docker / "running").write_text("false\n")
    proc.stdin.write(b".")
    proc.stdin.flush()
    code, out = ended(proc)
    assert code == 4 and out.splitlines()[:2] == ["acks=3", "url=http://127.0.0.1:43571/"] and "ended" in out
    assert out.splitlines()[-1] == "removed"


def test_the_keeper_gives_up_on_a_tensorboard_that_never_answers(fake_docker):
    (fake_docker / "logs").write_text("starting…\n")
    proc = keeper(fake_docker, start_s=1)
    code, out = ended(proc)
    assert code == 5 and out.splitlines()[1] == "slow" and out.splitlines()[-1] == "removed"
    proc.stdin.close()


def test_a_failed_docker_run_exits_3_with_dockers_words(fake_docker):
    (fake_docker / "run-fails").touch()
    proc = keeper(fake_docker)
    assert proc.wait(10) == 3 and b"no such image" in proc.stderr.read()


def test_orphans_are_those_whose_keeper_is_gone_and_down_removes_every_one(fake_docker):
    (fake_docker / "ids").write_text("aaa\nbbb\nccc\n")
    live = "tfcompose-tb-" + os.urandom(8).hex()
    (fake_docker / "label-aaa").write_text(live + "\n")                          # its keeper runs
    (fake_docker / "label-bbb").write_text("tfcompose-tb-" + "0" * 16 + "\n")    # its keeper is gone
    (fake_docker / "label-ccc").write_text(".*\n")                               # not a tag tfcompose writes
    env = {**os.environ, "PATH": f"{fake_docker / 'bin'}:{os.environ['PATH']}", "FAKE_DIR": str(fake_docker)}
    holder = subprocess.Popen(["sh", "-c", "sleep 30; true", live])                      # stands for a live keeper
    try:
        out = subprocess.run(dc.remove_tensorboards("c", "h0", "orphans"), env=env, capture_output=True, text=True)
        assert out.stdout.strip() == "2"
        assert sorted(p.name for p in fake_docker.glob("removed-*")) == ["removed-bbb", "removed-ccc"]
        out = subprocess.run(dc.remove_tensorboards("c", "h0", live), env=env, capture_output=True, text=True)
        assert out.stdout.strip() == "1" and (fake_docker / "removed-aaa").exists()
    finally:
        holder.kill()
        holder.wait()
