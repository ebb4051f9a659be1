"""A ProxyCommand as the stream an SSH session runs over: a socket with timeouts, its last words
kept for the message, ended with the connection, out of reach of the terminal's Ctrl-C."""
from __future__ import annotations

import socket
import subprocess
import sys
import textwrap
import time

from launcher.ssh import proxy
from support.common import REPO


def test_the_command_talks_over_a_socket_and_ends_with_the_stream():
    stream = proxy.command("""sh -c "printf 'SSH-2.0-fake\\r\\n'; exec cat" """, timeout=5)   # run as OpenSSH: exec …
    try:
        assert proxy.silent(stream, 5) is None               # it spoke: the banner is still there to read
        assert stream.sock.recv(64) == b"SSH-2.0-fake\r\n"
        stream.sock.sendall(b"ping")
        assert stream.sock.recv(64) == b"ping"
    finally:
        stream.close()
    assert stream.process.poll() is not None


def test_a_command_that_never_speaks_is_bounded_and_one_that_ignores_term_is_killed():
    stream = proxy.command("""sh -c "trap '' TERM; sleep 30" """, timeout=0.5)
    started = time.monotonic()
    assert proxy.silent(stream, 0.5) == "no SSH banner within 0.5 s"
    stream.close()
    assert stream.process.poll() is not None and time.monotonic() - started < 5


def test_its_last_words_and_status_are_kept_and_bounded():
    stream = proxy.command("""sh -c "head -c 1000000 /dev/zero | tr '\\0' x >&2; echo >&2; """
                           """echo 'bastion: Permission denied' >&2; exit 255" """, timeout=5)
    try:
        assert proxy.silent(stream, 5) == "closed before saying anything"
        said = stream.said()
    finally:
        stream.close()
    assert said == "ProxyCommand sh exited with status 255: bastion: Permission denied"


def test_ctrl_c_at_the_terminal_does_not_end_it_before_the_clean_up():
    # The terminal sends SIGINT to its whole foreground process group; the launcher turns it into
    # an orderly clean-up over the same connections, so the command must outlive it.
    script = textwrap.dedent("""
        import os, signal, time
        from launcher.ssh import proxy
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        stream = proxy.command("sleep 30", timeout=5)
        time.sleep(0.2)
        os.killpg(os.getpgrp(), signal.SIGINT)       # what Ctrl-C at a terminal does
        time.sleep(0.3)
        print("alive" if stream.process.poll() is None else "ended")
        stream.close()
        print("ended" if stream.process.poll() is not None else "alive")
    """)
    out = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=30,
                         start_new_session=True)
    assert out.stdout.split() == ["alive", "ended"], out.stderr


def test_a_tcp_stream_says_when_nothing_listens_or_nothing_speaks():
    with socket.create_server(("127.0.0.1", 0)) as server:
        stream = proxy.tcp("127.0.0.1", server.getsockname()[1], timeout=0.3)
        try:
            assert proxy.silent(stream, 0.3) == "no SSH banner within 0.3 s"
        finally:
            stream.close()
