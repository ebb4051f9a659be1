"""logs --all: following ends a grace after the chief."""
from __future__ import annotations

import time


def test_following_other_hosts_stops_only_a_grace_after_the_chief_ended():
    import threading
    from launcher.stages.logs import AfterGrace
    chief_done = threading.Event()
    stop = AfterGrace(chief_done, 0.2)
    assert not stop.is_set()  # chief still running: keep following
    chief_done.set()
    assert not stop.is_set()  # just ended: the worker's last lines still come through
    time.sleep(0.25)
    assert stop.is_set()
