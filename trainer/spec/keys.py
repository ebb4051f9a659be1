"""The parallel search's keys (search/wire.py signs and checks the calls with them): the run's, made
by the launcher from its own secret, and each host's, made from the run's. Here, in the spec, because
the launcher derives them too, when it writes each host's key file (launcher/runs.py)."""
from __future__ import annotations

import hashlib
import hmac


def host_key(run_key: bytes, host: str) -> bytes:
    """The key a host signs its calls with: made from the run's key and its name, so that the chief
    can check every host's calls and a host can sign none but its own."""
    return hmac.new(run_key, b"tfcompose queue host\0" + host.encode(), hashlib.sha256).digest()


def run_key(secret: bytes, cluster: str, run: str) -> bytes:
    """The run's key, from the launcher's own secret: the same run gets the same key (an `up` that
    changes nothing pushes nothing), another run another one."""
    return hmac.new(secret, f"tfcompose queue run\0{cluster}\0{run}".encode(), hashlib.sha256).digest()
