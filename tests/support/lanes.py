"""Two lanes (pytest-xdist, `make test`, --dist loadgroup): whole modules go to whichever lane is
free, the longest first, so that neither lane is left with a long module at the end; the hostile
corpus's cases (each its own rigs, a second or so each) go one by one, last, so that both lanes
end together. The weights are the seconds
each module took in a recent run (the table at the end of every run); a module not named here
counts as short. Modules that share a rig of the run (the trainer image, the engine template,
the split image cache) find it made by the other lane (tests/support/rigs.py)."""
from __future__ import annotations

SECONDS = {      # the run of 2026-11-29 00:40 (2 lanes, 1,731 s); relay_lab, cluster_faults, simulation and cluster
    # then cut (a code layer relayed instead of the image, fewer epochs): their weights estimated from those modules
    # run alone after the cut
    "test_runs_lab.py": 479, "test_cluster.py": 430, "test_cluster_faults.py": 190, "test_relay_lab.py": 120,
    "test_simulation.py": 200, "test_hostile.py": 194, "test_search.py": 159, "test_telemetry.py": 151,
    "test_tracking.py": 134, "test_bootstrap.py": 122, "test_dataset_sync.py": 107, "test_trainer_faults.py": 105,
    "test_trainer_cluster.py": 103, "test_jump_lab.py": 89, "test_leases.py": 84, "test_allreduce.py": 83,
    "test_tensorboard.py": 82, "test_byo.py": 81, "test_slurm.py": 36, "test_leases_shared_box.py": 22,
    "test_remote.py": 22, "test_jump_hosts.py": 20, "test_rank_shim.py": 14, "test_links.py": 12,
}
UNIT_SECONDS = {      # the fast set's longest (`make test-unit`, three lanes: the longest first there too)
    "trainer/search/test_queue.py": 24, "telemetry/test_command.py": 16, "trainer/search/test_study.py": 12,
    "trainer/search/test_coordinator.py": 8, "targets/test_targets.py": 6, "stages/test_tensorboard.py": 6,
    "tracking/test_client.py": 6, "results/test_report.py": 5.5, "stages/test_render.py": 5.5,
    "inventory/test_load.py": 5.3,
}


def weight(nodeid: str) -> float:
    path = nodeid.split("::", 1)[0]
    if "/integration/" in path:
        return SECONDS.get(path.rsplit("/", 1)[-1], 5.0)
    return UNIT_SECONDS.get(path.split("/unit/", 1)[-1], 1.0)


FILLERS = ("tests/integration/test_hostile.py",)      # scheduled case by case, at the end
# Modules that need none of the run's shared rigs (the trainer image, its split layers, the engine
# template): the other lane runs them while the first lane's heaviest module builds those rigs
# (minutes), instead of waiting for them in a lab module of its own.
RIG_FREE = ("test_trainer_faults.py", "test_trainer_cluster.py", "test_leases_shared_box.py", "test_remote.py",
            "test_jump_hosts.py", "test_images_docker.py", "test_init.py", "test_render_compose.py")


def heaviest_first(items: list) -> None:
    """Reorder in place: the heaviest module, then the integration modules that need no shared rig
    (while it builds them), then the rest by weight, heaviest first, the fillers last; tests within
    a module as written. Every test but a filler is marked to stay with its module (xdist_group)."""
    import pytest
    first_seen = {}
    for i, item in enumerate(items):
        first_seen.setdefault(item.nodeid.split("::", 1)[0], i)
    for item in items:
        module = item.nodeid.split("::", 1)[0]
        if module not in FILLERS:
            item.add_marker(pytest.mark.xdist_group(module.rsplit("/", 1)[-1]))
    heaviest = max(first_seen, key=lambda m: (m not in FILLERS, weight(m)), default="")

    def phase(module: str) -> int:
        if module in FILLERS:
            return 3
        return 0 if module == heaviest else 1 if module.rsplit("/", 1)[-1] in RIG_FREE else 2
    items.sort(key=lambda item: (phase(item.nodeid.split("::", 1)[0]), -weight(item.nodeid),
                                 first_seen[item.nodeid.split("::", 1)[0]]))


def check_grouped(config, ids: list) -> None:
    """On the controller, when a lane has collected: with --dist loadgroup, each grouped test's id
    carries its group (`…@test_x.py`). Without that suffix the modules would be split between the
    lanes, and two lanes would build the same module's labs on the same subnets at once: refuse."""
    import pytest
    grouped = [i for i in ids if not i.startswith(FILLERS)]        # the fillers carry no group by design
    if config.getvalue("dist") == "loadgroup" and grouped and not any("@" in i.rsplit("]", 1)[-1] for i in grouped):
        raise pytest.UsageError("--dist loadgroup: no test id carries its group (pytest-xdist and this pytest "
                                "do not agree; pyproject pins pytest<9): modules would be split between lanes")
