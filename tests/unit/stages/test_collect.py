"""collect (launcher/stages/collect.py): the parts that need no host."""
from __future__ import annotations

from types import SimpleNamespace

from launcher.errors import RemoteError
from launcher.plan import make
from launcher.stages import collect
from support.builders import cluster


def group():
    said = []
    return SimpleNamespace(reporter=SimpleNamespace(warn=lambda host, message: said.append(message)), said=said)


def test_an_earlier_finished_run_is_collected_once_and_a_failure_to_is_a_warning(tmp_path, monkeypatch):
    plan = make(cluster(2))
    taken = []
    monkeypatch.setattr(collect, "collect_into", lambda g, p, runs, state: taken.append((p.run, state)) or runs)
    g = group()
    assert collect.collect_earlier(g, plan, "20261125-140233-3f2a1b2c", tmp_path) == tmp_path
    assert taken == [("20261125-140233-3f2a1b2c", "finished")] and "was not collected" in g.said[0]
    folder = tmp_path / plan.cluster.name / "20261125-140233-3f2a1b2c"
    folder.mkdir(parents=True)
    (folder / "outcome.json").write_text("{}")                      # collected already: left alone
    assert collect.collect_earlier(g, plan, "20261125-140233-3f2a1b2c", tmp_path) is None and len(taken) == 1
    assert collect.collect_earlier(g, plan, plan.run, tmp_path) is None and len(taken) == 1   # the run itself

    def gone(*args):
        raise RemoteError("h0", reason="no route to host")
    monkeypatch.setattr(collect, "collect_into", gone)
    g = group()
    assert collect.collect_earlier(g, plan, "20261126-101010-aaaaaaaa", tmp_path) is None
    assert "tfcompose collect --run 20261126-101010-aaaaaaaa" in g.said[-1]
