"""A tracker that answers one byte at a time: a tiny HTTP server on loopback that takes any request,
sends its status line and headers at once, then a body of BODY bytes at one byte every PACE_S
seconds. Each byte comes well within any per-read timeout, so only a bound on the whole answer
ends the wait (launcher/tracking/client.py). Stopped with its context, its handlers with it."""
from __future__ import annotations

import contextlib
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator

PACE_S = 0.3
BODY = 100_000


@contextlib.contextmanager
def trickling_tracker() -> Iterator[dict]:
    """{MLFLOW_TRACKING_URI: its address} while it serves."""
    stop = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        def _trickle(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(BODY))
            self.end_headers()
            self.wfile.flush()
            for _ in range(BODY):
                if stop.wait(PACE_S):
                    return
                try:
                    self.wfile.write(b" ")
                    self.wfile.flush()
                except OSError:         # the caller gave up: so does this answer
                    return

        do_GET = do_POST = do_PATCH = do_DELETE = _trickle

        def log_message(self, *args) -> None:      # quiet
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    try:
        yield {"MLFLOW_TRACKING_URI": f"http://127.0.0.1:{server.server_address[1]}"}
    finally:
        stop.set()
        server.shutdown()
        server.server_close()
        thread.join(5)
