"""The tunnel's byte pump: each side's end passed on to the other, so a client that closes its
side after its request still gets the whole answer."""
from __future__ import annotations

import socket
import threading

from launcher.ssh.tunnel import pump


class SocketChannel:
    """A socket standing in for a paramiko channel: the calls `pump` makes."""

    def __init__(self, sock):
        self.sock = sock

    def fileno(self):
        return self.sock.fileno()

    def recv(self, n):
        return self.sock.recv(n)

    def sendall(self, data):
        self.sock.sendall(data)

    def shutdown_write(self):
        self.sock.shutdown(socket.SHUT_WR)


def test_a_client_that_closes_its_side_after_the_request_still_gets_the_answer():
    browser, local = socket.socketpair()
    remote, server = socket.socketpair()
    browser.settimeout(5)
    server.settimeout(5)
    carried = threading.Thread(target=pump, args=(local, SocketChannel(remote), threading.Event()))
    carried.start()
    browser.sendall(b"GET / HTTP/1.0\r\n\r\n")
    browser.shutdown(socket.SHUT_WR)
    request = b""
    while not request.endswith(b"\r\n\r\n"):
        request += server.recv(100)
    assert server.recv(100) == b""            # the browser's end reached the server
    server.sendall(b"HTTP/1.0 200 OK\r\n\r\nscalars")
    server.close()
    answer = b""
    while chunk := browser.recv(100):
        answer += chunk
    carried.join(5)
    assert answer == b"HTTP/1.0 200 OK\r\n\r\nscalars" and not carried.is_alive()
