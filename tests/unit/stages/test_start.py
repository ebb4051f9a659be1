"""Start (launcher/stages/start.py) on the shared fake connection: a running run is left alone, a
stopped one of the same run gets new containers (Docker's whole restart budget again), a new run
is started."""
from __future__ import annotations

import json

from launcher.ssh.connection import Result
from launcher.stages.start import start_host
from support.builders import host
from support.fakes import FakeConnection

RUN = "20261125-140233-3f2a1b2c"


def engine(status: str | None, run: str = RUN) -> FakeConnection:
    """A host whose one container of the cluster is in `status` (None: none)."""
    found = [] if status is None else [{"Id": "a" * 64, "Created": "2026-11-25T14:02:40Z", "State": {"Status": status},
                                        "Config": {"Labels": {"tfcompose.run": run}}}]

    def answer(command) -> Result:
        return Result(0, json.dumps(found), "") if "docker inspect" in " ".join(map(str, command)) else Result(0, "", "")
    return FakeConnection(answer)


def compose_ups(conn: FakeConnection) -> list[list]:
    return [c for c in conn.commands if c[:2] == ["docker", "compose"]]


def test_a_running_run_is_left_alone():
    conn = engine("running")
    assert start_host(host("h0"), conn, "c", RUN) == "already running" and compose_ups(conn) == []


def test_a_stopped_container_of_the_run_is_made_anew_so_the_run_resumes_with_every_restart_left():
    conn = engine("exited")
    assert start_host(host("h0"), conn, "c", RUN) == "resumed"
    assert compose_ups(conn)[0][-1] == "--force-recreate"


def test_a_new_run_starts_over_whatever_another_run_left():
    for conn in (engine(None), engine("exited", run="20261124-090000-3f2a1b2c")):
        assert start_host(host("h0"), conn, "c", RUN) == "started"
        assert "--force-recreate" not in compose_ups(conn)[0]
