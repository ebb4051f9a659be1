"""Checks of an inventory that span fields or hosts: names and chiefs, ports, loopback, files,
`run:`, parallel search, and the folders tfcompose writes into on the hosts."""
from __future__ import annotations

import ipaddress
import os
from pathlib import Path
from typing import Any

from launcher.inventory.fields import RemotePath, system_path
from launcher.inventory.model import Cluster, Host
from trainer.spec import space
from trainer.spec.validation import Problem


def _host_loc(cluster: Cluster, host: Host, key: str) -> tuple:
    pos = next(i for i, e in enumerate(cluster.spec.hosts) if e.name == host.name)
    return ("hosts", pos, key)


def names_and_chiefs(hosts: Any) -> list[Problem]:
    if not isinstance(hosts, list):
        return []
    entries = [(i, h) for i, h in enumerate(hosts) if isinstance(h, dict)]
    problems = []
    chiefs = [i for i, h in entries if h.get("chief") is True]
    for i in chiefs[1:]:
        problems.append(Problem(("hosts", i, "chief"), f"Received a second chief (hosts[{chiefs[0]}] is one)",
                                "exactly one host with chief: true, or none (the first host is then the chief)"))
    seen: dict[str, int] = {}
    for i, entry in entries:
        name = entry.get("name")
        if isinstance(name, str) and name in seen:
            problems.append(Problem(("hosts", i, "name"), f"Received {name!r} again (hosts[{seen[name]}])",
                                    "each host name once"))
        if isinstance(name, str):
            seen.setdefault(name, i)
    return problems


def cross_checks(cluster: Cluster) -> list[Problem]:
    return (_port_checks(cluster) + _loopback_checks(cluster) + _file_checks(cluster) + _run_checks(cluster)
            + _parallel_checks(cluster) + _folder_checks(cluster) + _dataset_checks(cluster) + _search_checks(cluster)
            + _bootstrap_checks(cluster) + _elastic_checks(cluster))


def bootstrap_debs(cluster: Cluster) -> list[Path]:
    """bootstrap.debs, each folder resolved as the inventory's other local paths (~, then relative
    to the inventory's folder)."""
    folders = [Path(os.path.expanduser(text)) for text in cluster.spec.bootstrap.debs]
    return [folder if folder.is_absolute() else cluster.folder / folder for folder in folders]


def _bootstrap_checks(cluster: Cluster) -> list[Problem]:
    """Each folder of your own .deb files exists and holds at least one (`tfcompose bootstrap` offers them to apt)."""
    problems = []
    for i, (text, folder) in enumerate(zip(cluster.spec.bootstrap.debs, bootstrap_debs(cluster))):
        if not folder.is_dir():
            problems.append(Problem(("bootstrap", "debs", i), f"Received {text!r} (no such folder)", "a folder holding .deb files"))
        elif not any(folder.glob("*.deb")):
            problems.append(Problem(("bootstrap", "debs", i), f"Received {text!r} (no .deb file in it)",
                                    "a folder holding .deb files"))
    return problems


def _search_checks(cluster: Cluster) -> list[Problem]:
    """The search space and budget (trainer/spec/space.py: the trainer checks the same again)."""
    train = cluster.spec.train
    if train is None:
        return []
    found = [Problem(("train", *p.loc), p.received, p.expected) for p in space.problems(train)]
    if train.search.mode == "parallel" and any(h.tf_port == train.search.port for h in cluster.hosts[:1]):
        found.append(Problem(("train", "search", "port"), f"Received {train.search.port}, the chief's tf_port too",
                             "a port of its own for the study"))
    return found


def _dataset_checks(cluster: Cluster) -> list[Problem]:
    """A dataset_source must be copyable exactly (no file is read here: that is `up`'s work)."""
    root = cluster.dataset_source
    if root is None:
        return []
    from launcher.dataset.source import source_problems
    problems = [Problem(("dataset_source",), f"Received {p}", "a folder of class folders holding plain, readable "
                        "files (symlinks only to files inside it)") for p in source_problems(root)[:5]]
    if not any(h.data_dir for h in cluster.hosts):
        problems.append(Problem(("dataset_source",), "Received a dataset_source but no host has a data_dir",
                                "defaults.data_dir: the folder on each host that receives the copy"))
    return problems


def _port_checks(cluster: Cluster) -> list[Problem]:
    """Each address:port once; 127.0.0.1, ::1 and localhost are one machine."""
    problems, seen = [], {}
    for host in cluster.hosts:
        key = ("loopback" if _is_loopback(host.address) else host.address.lower(), host.tf_port)
        if key in seen:
            problems.append(Problem(_host_loc(cluster, host, "tf_port"), f"Received {host.tf_address} again "
                                    f"(host {seen[key]} is the same machine and port)",
                                    "each address:tf_port once: two containers cannot share a port"))
        seen.setdefault(key, host.name)
    return problems


def _folder_checks(cluster: Cluster) -> list[Problem]:
    """<workdir>/<cluster> must not be a system folder, and the trainer's folders must be plain
    absolute paths: they become volume specs (`./results:<results_dir>`)."""
    problems = []
    for host in cluster.hosts:
        if system_path(host.bundle_dir):
            problems.append(Problem(_host_loc(cluster, host, "workdir"), f"Received {host.workdir!r} with cluster "
                                    f"{cluster.name!r}, which is the system folder {host.bundle_dir}",
                                    "a workdir whose <workdir>/<cluster> is a folder of tfcompose's own"))
    train = cluster.spec.train
    for key in ("results_dir", "backup_dir"):
        value = getattr(train, key) if train else None
        if value is not None and not _remote_path_ok(value):
            problems.append(Problem(("train", key), f"Received {value!r}",
                                    "an absolute path in the container of letters, digits and ._@+- "
                                    "(no '..', spaces or ':'), not a system folder"))
    return problems


def _remote_path_ok(value: str) -> bool:
    from pydantic import TypeAdapter, ValidationError
    try:
        TypeAdapter(RemotePath).validate_python(value)
    except ValidationError:
        return False
    return not system_path(value) or value.rstrip("/") in ("/results", "/backup")


def _parallel_checks(cluster: Cluster) -> list[Problem]:
    train = cluster.spec.train
    if train is None or train.search.mode != "parallel" or space.problems(train):
        return []           # what is wrong with the space itself is _search_checks' to say
    count = train.search.trials or space.grid_size(train)
    problems = []
    if count < len(cluster.hosts):
        problems.append(Problem(("train", "search", "mode"), f"Received 'parallel' with {count} trial(s) for "
                                f"{len(cluster.hosts)} hosts", "at least one trial per host (add candidates, "
                                "learning_rates, batch sizes, or trials)"))
    ssh = cluster.spec.ssh
    if ssh.lost_after_s >= train.search.lost_after_s:      # the launcher must tell the queue before it finds out alone
        problems.append(Problem(("ssh", "lost_after_s"), f"Received {ssh.lost_after_s:g}, not less than "
                                f"train.search.lost_after_s ({train.search.lost_after_s:g})",
                                "fewer seconds than the trial queue's own timeout, so that a silent host's trial is "
                                "handed on by the launcher first"))
    return problems


def _elastic_checks(cluster: Cluster) -> list[Problem]:
    """`elastic:` re-forms the built-in trainer's sync run (a parallel search goes on without a host by itself; a
    `run:` program keeps no backups the launcher knows), never below one host, and under keep_global with a global
    batch every allowed cluster size divides."""
    elastic, spec = cluster.spec.elastic, cluster.spec
    if spec.train is not None and spec.train.elastic is not None:
        return [Problem(("train", "elastic"), "Received a value", "nothing: `up` writes it from the inventory's "
                        "elastic: section")]
    if elastic is None:
        return []
    if spec.run is not None or spec.train_or_defaults.search.mode == "parallel":
        what = "run:" if spec.run is not None else "search.mode parallel"
        return [Problem(("elastic",), f"Received elastic with {what}", "elastic only for the trainer's sync runs "
                        "(a parallel search already goes on without a lost host)")]
    hosts = len(cluster.hosts)
    if elastic.min_hosts >= hosts:
        fewer = f"fewer hosts than the inventory lists (1–{hosts - 1})" if hosts > 1 else "two hosts or more"
        return [Problem(("elastic", "min_hosts"), f"Received {elastic.min_hosts} with {hosts} host(s)",
                        f"{fewer}, or no elastic section")]
    if elastic.batch == "keep_global":
        return _global_batch_checks(cluster, elastic.min_hosts, hosts)
    return []


def _global_batch_checks(cluster: Cluster, least: int, hosts: int) -> list[Problem]:
    """keep_global: each batch_per_replica × hosts divides by every cluster size from min_hosts up (hosts train
    with equal replicas each, gpus_per_host)."""
    train = cluster.spec.train_or_defaults
    searched = train.search.batch_per_replica
    # a range is drawn from: the trainer refuses a drawn value that does not divide, when it is drawn
    batches = searched if isinstance(searched, list) else [train.batch_per_replica] if searched is None else []
    for batch in batches:
        bad = [k for k in range(least, hosts) if (batch * hosts) % k]
        if bad:
            return [Problem(("elastic", "batch"), f"Received keep_global with batch_per_replica {batch}: its global "
                            f"batch {batch * hosts} does not divide among {bad[0]} host(s)",
                            "a batch_per_replica whose global batch every cluster size from min_hosts up divides, "
                            "a larger min_hosts, or elastic.batch: keep_per_replica")]
    return []


def _run_checks(cluster: Cluster) -> list[Problem]:
    spec = cluster.spec
    if spec.run is None:
        return []
    if spec.train is not None:
        return [Problem(("run",), "Received both train and run", "exactly one of them: the built-in trainer "
                        "(train) or your own program (run)")] + _allreduce_with_run(spec.train)
    problems, folder = [], cluster.code_dir
    if not folder.is_dir():
        problems.append(Problem(("run", "code_dir"), f"Received {str(folder)!r}", "an existing folder with your code"))
    elif spec.run.requirements and not (folder / spec.run.requirements).is_file():
        problems.append(Problem(("run", "requirements"), f"Received {spec.run.requirements!r}", f"a file inside {folder}"))
    if spec.image_mode != "ship":
        problems.append(Problem(("image_mode",), f"Received {spec.image_mode!r} with run",
                                "'ship': your code is baked into an image layer built on this machine"))
    return problems


def _allreduce_with_run(train) -> list[Problem]:
    """`allreduce` (auto above all) shapes the built-in trainer's step: a `run:` program makes its own."""
    if "allreduce" not in train.model_fields_set:
        return []
    setting = "auto" if train.allreduce.auto else "allreduce settings"
    return [Problem(("train", "allreduce"), f"Received {setting} with run", "allreduce only with the built-in "
                    "trainer: a run: program does its own all-reduce (see README: allreduce)")]


def _is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return address.lower() == "localhost"


def _loopback_checks(cluster: Cluster) -> list[Problem]:
    # 'localhost' in TF_CONFIG across machines is a classic mistake (tensorflow#57372).
    loopback = [h for h in cluster.hosts if _is_loopback(h.address)]
    if not loopback or len(loopback) == len(cluster.hosts):
        return []
    return [Problem(_host_loc(cluster, h, "address"), f"Received {h.address!r}",
                    "an address the other hosts can reach: loopback works only when every host is this machine")
            for h in loopback]


def _file_checks(cluster: Cluster) -> list[Problem]:
    problems = []
    for host in cluster.hosts:
        if host.identity_file and not host.identity_file.is_file():
            entry = next(e for e in cluster.spec.hosts if e.name == host.name)
            loc = _host_loc(cluster, host, "identity_file") if entry.identity_file else ("ssh", "identity_file")
            problems.append(Problem(loc, f"Received {str(host.identity_file)!r}", "an existing private key file"))
        if cluster.spec.train and cluster.spec.train.dataset.kind == "image_folder" and not host.data_dir:
            loc = _host_loc(cluster, host, "data_dir")
            problems.append(Problem(loc, "Missing", "defaults.data_dir or this host's data_dir (mounted at /data) "
                                    "when train.dataset.kind is image_folder"))
    unique = {p.loc: p for p in problems}
    return list(unique.values())
