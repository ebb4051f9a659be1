"""The hostile-input corpus: inventories, ssh configs, trainer configs and command lines that are
wrong, careless or made to hurt. Each case is run as the user would run it (a new process) and
three things hold for every one: no traceback, it ends within its bound, and nothing is written
outside the output folder it was given. Cases that need a misbehaving host live in
tests/integration/test_hostile.py.
"""
from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, ContextManager, Optional

import yaml

from support import preloaded
from support.common import DATA, REPO

TFCOMPOSE = [sys.executable, "-c", "from launcher.cli import run; run()"]
TRAINER = [sys.executable, "-m", "trainer"]


@dataclass(frozen=True)
class Link:
    """A symbolic link to write among a case's files."""
    target: str


@dataclass(frozen=True)
class Fifo:
    """A named pipe (nobody writes to it: a reader that opens it plainly waits for ever)."""


@dataclass
class Case:
    name: str
    argv: list[str]                                   # {work} and {out} are replaced
    files: dict[str, str | bytes | Link | Fifo] = field(default_factory=dict)   # written into {work} first
    exit: tuple[int, ...] = (2,)
    says: str = ""                                    # a piece of what it prints
    bound: float = 30.0
    program: list[str] = field(default_factory=lambda: TFCOMPOSE)
    env: dict[str, str] = field(default_factory=dict)
    outside: tuple[Path, ...] = ()                    # more folders that must stay as they were
    never: tuple[str, ...] = ()                       # never printed, nor written into any file of {out} (secrets)
    also: tuple[str, ...] = ()                        # more pieces of what it prints
    around: Optional[Callable[[], ContextManager[dict]]] = None     # a server for the case: yields its environment
    check: Optional[Callable[[Path, "Outcome"], None]] = None       # more to check: (the sandbox, the outcome)


# What must never reach the terminal as it is: escape (and its one-byte C1 form), BEL, the
# Unicode direction overrides (launcher/text.py `printable` removes them all).
RAW_CONTROLS = re.compile("[\x1b\x9b\x07\x90\x9d\u202e\u202d]")


@dataclass
class Outcome:
    code: int
    out: str
    err: str
    seconds: float


def snapshot(*roots: Path) -> dict[str, tuple]:
    """Every entry under the roots: its kind, size, mode and modification time."""
    seen = {}
    for root in roots:
        for path in [root, *root.rglob("*")] if root.exists() else []:
            st = path.lstat()
            seen[str(path)] = (st.st_mode, st.st_size, st.st_mtime_ns)
    return seen


def run_case(case: Case, sandbox: Path) -> Outcome:
    """Run one case in sandbox/{home,work,out}; check the three global promises."""
    home, work, out = sandbox / "home", sandbox / "work", sandbox / "out"
    # Libraries' own caches (matplotlib's font list) go beside the output, not into HOME.
    case.env.setdefault("MPLCONFIGDIR", str(out / ".mpl"))
    for folder in (home / ".ssh", work, out):
        folder.mkdir(parents=True, exist_ok=True)
    (home / ".ssh" / "authorized_keys").write_text("ssh-ed25519 AAAA the-operator's-own-key\n")
    for name, content in case.files.items():
        path = out / name[4:] if name.startswith("out/") else work / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, Link):
            path.symlink_to(content.target)
        elif isinstance(content, Fifo):
            os.mkfifo(path)
        else:
            path.write_bytes(content) if isinstance(content, bytes) else path.write_text(content)
    argv = [a.replace("{work}", str(work)).replace("{out}", str(out)) for a in case.argv]
    before = snapshot(home, work, *case.outside)
    with case.around() if case.around else contextlib.nullcontext({}) as served:
        env = {"PATH": os.environ["PATH"], "HOME": str(home), "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "2",
               **{k: v.replace("{out}", str(out)) for k, v in case.env.items()}, **served}
        started = time.monotonic()
        if case.program == TFCOMPOSE:       # a new process, forked from one that has the libraries loaded
            proc = preloaded.run(TFCOMPOSE[2], argv, work, env, timeout=case.bound + 30)
        else:
            proc = subprocess.run([*case.program, *argv], cwd=work, env=env, capture_output=True, text=True,
                                  timeout=case.bound + 30, stdin=subprocess.DEVNULL)
    outcome = Outcome(proc.returncode, proc.stdout, proc.stderr, time.monotonic() - started)
    text = outcome.out + outcome.err
    assert "Traceback" not in text, text[-3000:]
    raw = RAW_CONTROLS.search(text)
    assert raw is None, f"printed {raw.group()!r} raw: {text[-2000:]!r}"
    assert outcome.seconds <= case.bound, f"took {outcome.seconds:.1f} s > {case.bound} s"
    assert snapshot(home, work, *case.outside) == before, "wrote outside its output folder"
    assert outcome.code in case.exit, f"exit {outcome.code}, expected {case.exit}: {text[-2000:]}"
    for piece in (case.says, *case.also):
        assert piece in text, f"{piece!r} not in {text[-2000:]!r}"
    for secret in case.never:
        assert secret not in text, f"printed {secret!r}: {text[-2000:]!r}"
        written = [p for p in out.rglob("*") if p.is_file() and not p.is_symlink() and secret.encode() in p.read_bytes()]
        assert not written, f"wrote {secret!r} into {written}"
    if case.check:
        case.check(sandbox, outcome)
    return outcome


# --- inventories ----------------------------------------------------------------------------------

BASE = {"cluster": "c", "ssh": {"user": "u", "config_file": "./ssh_config", "known_hosts": "./known_hosts"},
        "hosts": [{"name": "a", "address": "10.0.0.1"}, {"name": "b", "address": "10.0.0.2"}]}


def inventory(**changes) -> str:
    doc = {**BASE, **changes}
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)


def with_host(i: int, **changes) -> list[dict]:
    hosts = [dict(h) for h in BASE["hosts"]]
    hosts[i].update(changes)
    return hosts


def validate(name: str, text: str | bytes, says: str = "", exit=(2,), **files) -> Case:
    return Case(name, ["validate", "-i", "{work}/inventory.yaml"], {"inventory.yaml": text, **files}, exit, says)


RUN = {"command": ["python", "train.py"], "code_dir": "./code"}
CODE = {"code/train.py": "print('hi')\n"}

BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
    f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n" for i in range(9))

SYSTEM_WORKDIRS = ["/", "/usr", "/usr/lib", "/etc/tfc", "/home", "/var", "/var/lib/tfc", "/proc/1", "/boot",
                   "/root", "/dev/shm", "/sys/x", "/bin", "/tmp", "/run/tfc", "/opt", "/srv", "/lib64"]


def inventory_cases() -> list[Case]:
    cases = [validate(f"workdir-{w.strip('/').replace('/', '-') or 'slash'}", inventory(defaults={"workdir": w}),
                      "not a system folder") for w in SYSTEM_WORKDIRS]
    cases += [
        validate("host-workdir-etc", inventory(hosts=with_host(1, workdir="/etc")), "hosts[1].workdir"),
        validate("ipv6-zone-id", inventory(hosts=with_host(0, address="fe80::1%eth0")), "hosts[0].address"),
        validate("env-del", inventory(run={**RUN, "env": {"T": "a\x7fb"}}), "run.env", **CODE),
        validate("env-nel", 'cluster: c\nrun: {command: [python], code_dir: ./code, env: {T: "a\\x85b"}}\n'
                 "hosts: [{name: a, address: 10.0.0.1}]\n", "run.env", **CODE),
        validate("env-del-escaped", 'cluster: c\nrun: {command: [python], code_dir: ./code, env: {T: "a\\x7fb"}}\n'
                 "hosts: [{name: a, address: 10.0.0.1}]\n", "run.env", **CODE),
        validate("env-escape", inventory(run={**RUN, "env": {"T": "\x1b]0;pwned\x07"}}), "run.env", **CODE),
        validate("env-line-separator", inventory(run={**RUN, "env": {"T": "a\u2028b"}}), "run.env", **CODE),
        validate("env-nul", 'cluster: c\nrun: {command: [python], code_dir: ./code, env: {T: "a\\0b"}}\n'
                 "hosts: [{name: a, address: 10.0.0.1}]\n", "run.env", **CODE),
        validate("command-escape", inventory(run={**RUN, "command": ["python", "\x1b[2J"]}), "run.command", **CODE),
        validate("loopback-twice-same-port", inventory(hosts=[{"name": "a", "address": "127.0.0.1"},
                                                              {"name": "b", "address": "localhost"}]), "same machine"),
        validate("loopback-v6-and-v4", inventory(hosts=[{"name": "a", "address": "::1"},
                                                        {"name": "b", "address": "127.0.0.1"}]), "same machine"),
        validate("results-dir-volume-spec", inventory(train={"results_dir": "./backup:/b:/etc"}), "train.results_dir"),
        validate("results-dir-dollar", inventory(train={"results_dir": "/results/$HOME"}), "train.results_dir"),
        validate("backup-dir-relative", inventory(train={"backup_dir": "backup"}), "train.backup_dir"),
        validate("backup-dir-etc", inventory(train={"backup_dir": "/etc"}), "train.backup_dir"),
        validate("unknown-candidate", inventory(train={"candidates": ["resnet"]}), "Received ['resnet']"),
        validate("gpus-repeated", inventory(defaults={"gpus": [0, 0, 0]}), "defaults.gpus"),
        validate("lease-dir-relative", inventory(defaults={"lease_dir": "leases"}), "defaults.lease_dir"),
        validate("lease-dir-is-root", inventory(defaults={"lease_dir": "/"}), "defaults.lease_dir"),
        validate("lease-dir-shell", inventory(defaults={"lease_dir": "/var/tmp/$(reboot)"}), "defaults.lease_dir"),
        validate("alias-bomb", BOMB, "aliases"),
        validate("alias-bomb-in-hosts", "cluster: c\nx: &x [1, 2, 3]\n" + BOMB.replace("a: &a", "y: &a")
                 + "hosts: [*j]\n", "aliases"),
        validate("deep-flow-nesting", "cluster: " + "[" * 3000 + "]" * 3000 + "\n", "nested"),
        validate("deep-block-nesting", "".join("  " * i + f"k{i}:\n" for i in range(200)) + "  " * 200 + "v: 1\n",
                 "nested"),
        Case("dev-zero", ["validate", "-i", "/dev/zero"], says="more than"),
        validate("two-megabytes", "cluster: c\n#" + "x" * (2 << 20) + "\n", "more than"),
        validate("not-utf8", b"cluster: \xff\xfe\n", "not a text file"),
        validate("bom-prefixed", "\ufeff" + inventory(), "valid", exit=(0,)),
        validate("tab-indented", "cluster: c\nhosts:\n\t- {name: a, address: 10.0.0.1}\n", "not valid YAML"),
        validate("cluster-traversal", inventory(cluster="../x"), "cluster"),
        validate("cluster-emoji", inventory(cluster="c\U0001f600"), "cluster"),
        validate("host-name-shell", inventory(hosts=with_host(0, name="a;id")), "hosts[0].name"),
        validate("address-shell", inventory(hosts=with_host(0, address="x$(id)")), "hosts[0].address"),
        validate("nic-shell", inventory(defaults={"nic": "eth0; rm -rf /"}), "defaults.nic"),
        validate("shm-terabyte-unit", inventory(defaults={"shm_size": "1t"}), "defaults.shm_size"),
        validate("image-uppercase", inventory(image="UPPER/Case"), "image"),
        validate("data-dir-relative", inventory(defaults={"data_dir": "data"}), "defaults.data_dir"),
        validate("retries-eleven", inventory(defaults={"restart_retries": 11}), "defaults.restart_retries"),
        validate("connect-timeout-zero", inventory(ssh={**BASE["ssh"], "connect_timeout_s": 0}), "connect_timeout_s"),
        validate("command-timeout-one", inventory(ssh={**BASE["ssh"], "command_timeout_s": 1}), "command_timeout_s"),
        validate("too-many-hosts", inventory(hosts=[{"name": f"h{i}", "address": f"10.1.{i // 200}.{i % 200 + 1}"}
                                                    for i in range(300)]), "hosts"),
        validate("hosts-empty", inventory(hosts=[]), "hosts"),
        validate("host-a-string", inventory(hosts=["10.0.0.1"]), "hosts[0]"),
        validate("nested-duplicate-key", "cluster: c\nssh: {user: u, user: v}\nhosts: [{name: a, address: 10.0.0.1}]\n",
                 "Expected each key once"),
        validate("unset-variable", "cluster: ${TFC_HOSTILE_UNSET}\nhosts: [{name: a, address: 10.0.0.1}]\n",
                 "TFC_HOSTILE_UNSET"),
        validate("identity-file-is-a-folder", inventory(ssh={**BASE["ssh"], "identity_file": "./keys"}),
                 "identity_file", **{"keys/.keep": ""}),
        validate("code-dir-missing", inventory(run={**RUN, "code_dir": "./nowhere"}), "run.code_dir"),
        validate("train-and-run", inventory(run=RUN, train={}), "exactly one", **CODE),
        validate("ssh-config-binary", inventory(), "ssh config", ssh_config=b"\x00\xff\xfe binary"),
        validate("ssh-config-hostname-injection", inventory(hosts=with_host(0, address="box")), "HostName",
                 ssh_config="Host box\n  HostName x$(id)\n"),
        validate("ssh-config-user-injection", inventory(ssh={k: v for k, v in BASE["ssh"].items() if k != "user"},
                                                        hosts=with_host(0, address="box")), "User",
                 ssh_config="Host box\n  HostName 10.0.0.9\n  User root;id\n"),
        validate("ssh-config-port", inventory(hosts=with_host(0, address="box")), "Port",
                 ssh_config="Host box\n  Port 99999\n"),
        # `Match exec` runs its command when the config is read: validate must not (the marker
        # file would appear in the work folder, and the snapshot would catch it).
        validate("ssh-config-match-exec", inventory(hosts=with_host(0, address="box")), "valid", exit=(0,),
                 ssh_config="Match exec \"touch ./pwned-by-match-exec\"\n  User x\nHost box\n  HostName 10.0.0.9\n"),
        validate("ssh-config-include", inventory(), "valid", exit=(0,), ssh_config="Include /etc/passwd\n"),
        # Jump hosts (#31): nothing in a jump chain reaches a command line, a loop ends, a ProxyCommand
        # runs only when a host is contacted (validate would leave the marker file behind).
        validate("proxy-jump-option", inventory(ssh={**BASE["ssh"], "proxy_jump": "-oProxyCommand=touch x"}),
                 "ssh.proxy_jump"),
        validate("proxy-jump-itself", inventory(hosts=with_host(0, proxy_jump="10.0.0.1")), "its own bastion"),
        validate("ssh-config-proxyjump-injection", inventory(hosts=with_host(0, address="box")), "ProxyJump",
                 ssh_config="Host box\n  ProxyJump gate;id\n"),
        validate("ssh-config-proxyjump-loop", inventory(hosts=with_host(0, address="box")), "go round in a circle",
                 ssh_config="Host box gate\n  ProxyJump gate\n"),
        validate("ssh-config-proxycommand-not-run", inventory(hosts=with_host(0, address="box")), "valid", exit=(0,),
                 ssh_config="Host box\n  HostName 10.0.0.9\n  ProxyCommand touch ./pwned-by-proxycommand\n"),
        validate("dollar-escape", inventory(run={**RUN, "env": {"T": "a$$b"}}), "valid", exit=(0,), **CODE),
        validate("dataset-source-missing", inventory(dataset_source="./nowhere", defaults={"data_dir": "/data"}),
                 "dataset_source: Received"),
        validate("dataset-source-flat", inventory(dataset_source="./flat", defaults={"data_dir": "/data"}),
                 "no class folders", **{"flat/a.png": "x"}),
        validate("dataset-source-own-temp-name", inventory(dataset_source="./d", defaults={"data_dir": "/data"}),
                 "temporary names", **{"d/train/CN/a.png.tfcompose-part": "x"}),
        validate("dataset-source-escape-name", inventory(dataset_source="./d", defaults={"data_dir": "/data"}),
                 "control characters", **{"d/train/CN/\x1b]0;pwned\x07.png": "x"}),
        validate("dataset-source-no-data-dir", inventory(dataset_source="./d"), "no host has a data_dir",
                 **{"d/train/CN/a.png": "x"}),
        validate("dataset-source-ok", inventory(dataset_source="./d", defaults={"data_dir": "/data"}), "valid",
                 exit=(0,), **{"d/train/CN/a.png": "x"}),
        # Hardening II: names `up` could never copy are refused at validate, loops do not crash it.
        validate("dataset-source-name-not-utf8", inventory(dataset_source="./d", defaults={"data_dir": "/data"}),
                 "not UTF-8", **{os.fsdecode(b"d/train/CN/scan-\xff.png"): "x"}),
        validate("dataset-source-name-too-long", inventory(dataset_source="./d", defaults={"data_dir": "/data"}),
                 "too long to copy", **{"d/train/CN/" + "n" * 245 + ".png": "x"}),
        validate("dataset-source-symlink-loop", inventory(dataset_source="./d", defaults={"data_dir": "/data"}),
                 "loops", **{"d/train/CN/a.png": "x", "d/train/CN/loop.png": Link("loop.png")}),
        validate("code-dir-name-not-utf8", inventory(run=RUN), "valid", exit=(0,),
                 **{**CODE, os.fsdecode(b"code/data-\xff.bin"): "x"}),
        # Hardening III (#37): every number that feeds arithmetic within what it can be; one trial, one name.
        validate("link-mbit-s-1e-320", inventory(train={"allreduce": {"auto": True, "link_mbit_s": 1e-320}}),
                 "train.allreduce.link_mbit_s: Received 1e-320. Expected a number of Mbit/s from 0.01 to 1,000,000"),
        validate("link-mbit-s-5e-324", "cluster: c\ntrain: {allreduce: {auto: true, link_mbit_s: 5.0e-324}}\n"
                 "hosts: [{name: a, address: 10.0.0.1}]\n", "train.allreduce.link_mbit_s"),
        validate("link-mbit-s-infinite", "cluster: c\ntrain: {allreduce: {link_mbit_s: .inf}}\n"
                 "hosts: [{name: a, address: 10.0.0.1}]\n", "train.allreduce.link_mbit_s"),
        validate("join-timeout-1e-320", inventory(train={"join_timeout_s": 1e-320}), "train.join_timeout_s"),
        validate("profile-steps-beyond-int64", inventory(train={"profile_steps": [0, 2 ** 70]}), "train.profile_steps"),
        validate("grid-learning-rate-twice", inventory(train={"search": {"learning_rates": [0.01, 0.001, 0.01]}}),
                 "train.search.learning_rates: Received 0.01 twice"),
        validate("grid-learning-rates-that-print-alike", inventory(train={"search": {"learning_rates": [0.001, 0.0010000001]}}),
                 "which name one trial's files (learning_rate=0.001)"),
        validate("grid-batch-twice", inventory(train={"search": {"batch_per_replica": [16, 16]}}), "Received 16 twice"),
        validate("builders-that-share-a-history-file", inventory(train={"candidates": ["a.b:c_d", "a.b_c:d"]}),
                 "which name one file (history/a.b_c_d.csv)"),
        validate("builders-that-differ-only-in-case", inventory(train={"candidates": ["m:Net", "m:net"]}),
                 "where case is ignored"),
        validate("choice-with-an-escape-sequence", inventory(train={"candidates": ["m:b"], "search": {
                 "sampler": "random", "trials": 2, "hyperparameters": {"m:b": {"act": ["relu", "\x1b[2Jx"]}}}}),
                 "train.search.hyperparameters['m:b'].act"),
        validate("choice-not-a-number", "cluster: c\ntrain: {candidates: ['m:b'], search: {sampler: random, trials: 2, "
                 "hyperparameters: {'m:b': {w: [.nan, 1]}}}}\nhosts: [{name: a, address: 10.0.0.1}]\n",
                 "train.search.hyperparameters['m:b'].w"),
    ]
    return cases


def existing_inventory_cases() -> list[Case]:
    return [Case(f"corpus-{p.stem}", ["validate", "-i", str(p)], outside=(p.parent,))
            for p in sorted((DATA / "bad_inventories").glob("*.yaml"))]


# --- command lines --------------------------------------------------------------------------------

def cli_cases() -> list[Case]:
    good = {"inventory.yaml": inventory()}
    results = {"out/run/results.json": '{"schema": 1, "candidates": [{"candidate": "x", "val_accuracy": 0.5, '
                                   '"val_loss": 1, "train_seconds": 1, "images_per_second": 1, "params": 1, '
                                   '"epochs": 1, "history": "../../home/.ssh/authorized_keys"}], '
                                   '"best": {"candidate": "x", "val_accuracy": 0.5}}'}
    return [
        Case("render-onto-a-file", ["render", "-i", "{work}/inventory.yaml", "-o", "{work}/inventory.yaml"], good,
             says="cannot write"),
        Case("render-into-proc", ["render", "-i", "{work}/inventory.yaml", "-o", "/proc/tfcompose-out"], good,
             says="cannot write"),
        Case("render-ok", ["render", "-i", "{work}/inventory.yaml", "-o", "{out}"], good, exit=(0,), says="compose.yaml"),
        Case("validate-a-folder", ["validate", "-i", "{work}"], says="directory"),
        Case("validate-missing", ["validate", "-i", "{work}/nope.yaml"], says="cannot read"),
        Case("unknown-command", ["bogus"], says="No such command"),
        Case("logs-unknown-host", ["logs", "-i", "{work}/inventory.yaml", "--host", "zz"], good, says="no host named"),
        Case("report-missing-folder", ["report", "{out}/nope"], says="cannot read results"),
        Case("report-not-json", ["report", "{out}/run"], {"out/run/results.json": "{not json"}, says="cannot read results"),
        Case("report-history-escapes", ["report", "{out}/run"], results, says="history"),
        Case("report-schema-2", ["report", "{out}/run"], {"out/run/results.json": '{"schema": 2}'}, says="no candidates"),
        Case("logs-since-shell", ["logs", "-i", "{work}/inventory.yaml", "--all", "--since", "$(id)"], good,
             says="--since"),
        Case("compare-unknown-run", ["compare", "nope", "--runs", "{out}"], says="matching run"),
        Case("runs-missing-folder", ["runs", "--runs", "{out}/nowhere"], exit=(0,), says="runs in"),
        Case("render-unknown-target", ["render", "-i", "{work}/inventory.yaml", "--target", "helm", "-o", "{out}"], good,
             says="--target"),
        Case("render-jobset-without-namespace", ["render", "-i", "{work}/inventory.yaml", "--target", "jobset", "-o",
                                                 "{out}"], good, says="kubernetes.namespace"),
        # Hardening II: results files no tfcompose wrote, and pictures that are no pictures.
        *[Case(f"runs-and-report-restarts-{label}", ["report", "{out}/runs/c/aaaaaaaaaaaa"], run_files(restarts=value),
               says="restarts: Received") for label, value in (("text", '"many"'), ("list", "[1]"), ("huge", "1e400"))],
        *[Case(f"runs-lists-the-good-run-beside-restarts-{label}", ["runs", "--runs", "{out}/runs"],
               {**run_files(restarts=value), **run_files("bbbbbbbbbbbb")}, exit=(0,), says="bbbbbbbbbbbb")
          for label, value in (("text", '"many"'), ("list", "[1]"), ("huge", "1e400"))],
        Case("compare-beside-a-broken-run", ["compare", "bbbb", "--runs", "{out}/runs", "-o", "{out}/c.png"],
             {**run_files(restarts="1e400"), **run_files("bbbbbbbbbbbb")}, exit=(0,), says="c.png"),
        Case("report-nested-too-deep", ["report", "{out}/r"], {"out/r/results.json": "[" * 100_000}, says="nested too deep"),
        Case("compare-to-a-text-file", ["compare", "bbbb", "--runs", "{out}/runs", "-o", "{out}/x.txt"],
             run_files("bbbbbbbbbbbb"), says="--output"),
        Case("compare-to-a-folder", ["compare", "bbbb", "--runs", "{out}/runs", "-o", "{out}/runs"],
             run_files("bbbbbbbbbbbb"), says="--output"),
        Case("report-nan-is-not-the-best", ["report", "{out}/runs/c/bbbbbbbbbbbb"], run_files("bbbbbbbbbbbb", nan=True),
             exit=(0,), says="     1   y "),
        # Hardening III: a trial's name reaches pictures printable (matplotlib's missing-glyph
        # warning once printed its ESC raw), and `$…$` in a name is text, not mathematics.
        Case("report-names-with-escape-sequences", ["report", "{out}/runs/c/cccccccccccc"], hostile_names_run(),
             exit=(0,), says="report.md", bound=90),
        Case("compare-names-with-escape-sequences", ["compare", "cccc", "bbbb", "--runs", "{out}/runs", "-o",
                                                    "{out}/c.png"], {**hostile_names_run(), **run_files("bbbbbbbbbbbb")},
             exit=(0,), says="c.png", bound=60),
    ]


HOSTILE_NAMES = ["x\x1b]0;pwned\x07\x1b[2J", "$\\foo$ \x9b31m", "a\u202eb|c", "\x1b[31m"]


def hostile_names_run() -> dict[str, str]:
    """A run whose trial names, class names, searched values and search settings hold escape
    sequences, format characters and `$…$` (a results.json from a tampered host)."""
    import json
    records = [{"candidate": n, "val_accuracy": 0.5 - i / 10, "val_loss": 1, "train_seconds": 1, "images_per_second": 1,
                "params": 1, "epochs": 2, "state": "complete", "curve": [0.2, 0.5 - i / 10], "history": f"history/{i}.csv",
                "hyperparameters": {"learning_rate": 0.01, n: n}} for i, n in enumerate(HOSTILE_NAMES)]
    records[0]["confusion_matrix"] = [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]
    doc = {"schema": 1, "started": "2026-11-23T10:00:00", "class_names": HOSTILE_NAMES, "candidates": records,
           "best": {"candidate": HOSTILE_NAMES[0], "val_accuracy": 0.5},
           "search": {"sampler": "\x1b[5mtpe", "pruner": "none", "lost": {"h\x1b[1m": ["y\x1b[0m"]}}}
    files = {"out/runs/c/cccccccccccc/results.json": json.dumps(doc)}
    for i in range(len(HOSTILE_NAMES)):
        files[f"out/runs/c/cccccccccccc/history/{i}.csv"] = "epoch,loss,accuracy,val_loss,val_accuracy\n1,1,0.2,1,0.2\n2,1,0.5,1,0.5\n"
    return files


def run_files(run: str = "aaaaaaaaaaaa", restarts: str = "0", nan: bool = False) -> dict[str, str]:
    """A collected run folder's results.json (two trials; x's val_accuracy NaN when `nan`)."""
    record = ('{{"candidate": "{name}", "val_accuracy": {acc}, "val_loss": 1, "train_seconds": 1, '
              '"images_per_second": 1, "params": 1, "epochs": 1}}')
    trials = ", ".join(record.format(name=n, acc=a) for n, a in (("x", "NaN" if nan else "0.5"), ("y", "0.4")))
    best = '{"candidate": "y", "val_accuracy": 0.4}' if nan else '{"candidate": "x", "val_accuracy": 0.5}'
    return {f"out/runs/c/{run}/results.json": f'{{"schema": 1, "restarts": {restarts}, "started": "2026-11-2{run[0] == "b"}T10:00:00", '
                                              f'"candidates": [{trials}], "best": {best}}}'}


# --- Hardening IV (#46): run folders, trackers and secrets -----------------------------------------
# A run folder holds what hosts sent and whatever anyone put there: a FIFO where a file belongs (a
# plain reader waits for ever), a link where a file or folder belongs (a plain writer writes where
# it leads), a results.json whose fields are of a type or size no reader expects. A link leads into
# {work}/victim, which the global check watches: nothing may be written through it.

RUN_ID = "aaaaaaaaaaaa"
RUN_DIR = f"out/runs/c/{RUN_ID}"
HISTORY = "epoch,loss,accuracy,val_loss,val_accuracy\n1,1,0.2,1,0.2\n2,1,0.5,1,0.5\n"
TRIAL = {"val_loss": 1, "train_seconds": 1, "images_per_second": 1, "params": 1, "epochs": 2}


def trials_doc(*named: tuple[str, float], **keys) -> dict:
    """results.json as the trainer writes it: its trials (name, val_accuracy), the best, `keys`."""
    records = [{"candidate": n, "val_accuracy": a, **TRIAL, "history": f"history/{i}.csv"} for i, (n, a) in enumerate(named)]
    best = max(records, key=lambda r: r["val_accuracy"])
    return {"schema": 1, "started": "2026-11-20T10:00:00", "mode": "sync", "candidates": records,
            "best": {"candidate": best["candidate"], "val_accuracy": best["val_accuracy"]}, **keys}


def run_dir_files(run: str = RUN_ID, doc: Optional[dict] = None, **more) -> dict:
    """A collected run: results.json, each trial's history, how it ended; `more` laid over it."""
    import json
    doc = doc if doc is not None else trials_doc(("x", 0.5), ("y", 0.4))
    files = {f"out/runs/c/{run}/results.json": json.dumps(doc),
             f"out/runs/c/{run}/outcome.json": json.dumps({"schema": 1, "cluster": "c", "run": run, "state": "finished",
                                                          "message": "", "collected": "2026-11-20T10:05:00"})}
    files.update({f"out/runs/c/{run}/history/{i}.csv": HISTORY for i in range(len(doc.get("candidates", [])))})
    return {**files, **{f"out/runs/c/{run}/{k}": v for k, v in more.items()}}


def victim(link: str) -> Link:
    """A link at `link` (a path under out/) into {work}/victim, which must stay as it is."""
    depth = len(Path(link).parts) - 1            # the link's folder, back up to the sandbox
    return Link("../" * depth + f"work/victim/{Path(link).name}")


VICTIMS = {"victim/report.md": "mine", "victim/leaderboard.png": "mine", "victim/outcome.json": "mine",
           "victim/tracking.json": "mine", "victim/history/0.csv": HISTORY, "victim/history/1.csv": HISTORY,
           "victim/telemetry/h0.csv": "mine", "victim/h0.log": "mine", "victim/logs/h0.log": "mine"}
# Every name a run folder holds that `report` reads or writes, but results.json itself: its files
# (a FIFO or a link at each), its folders (a link, or a FIFO, in place of each).
REPORT_FILES = ("outcome.json", "history/0.csv", "report.md", "leaderboard.png", "curves.png", "telemetry/h0.csv",
                "tracking.json")
REPORT_FOLDERS = ("history", "telemetry")
CLOSED = "http://127.0.0.1:9"       # the discard port: nothing listens, a tracker refused at once


def at_every_name(kind: str, names: tuple[str, ...]) -> dict:
    """A FIFO or a link (into {work}/victim) at each of `names` (a folder's files then gone)."""
    files = dict(run_dir_files())
    for name in names:
        if name in REPORT_FOLDERS:
            files = {k: v for k, v in files.items() if not k.startswith(f"{RUN_DIR}/{name}/")}
        files[f"{RUN_DIR}/{name}"] = Fifo() if kind == "fifo" else Link("../" * (3 + name.count("/")) + f"work/victim/{name}")
    return {**files, **VICTIMS}


def modes_follow_the_umask(sandbox: Path, _outcome) -> None:
    """What `report` wrote is readable as the umask says (it was 600 whatever the umask, #46)."""
    umask = os.umask(0)
    os.umask(umask)
    run = sandbox / RUN_DIR
    for name in ("report.md", "leaderboard.png", "curves.png"):
        assert (run / name).stat().st_mode & 0o777 == 0o666 & ~umask, (name, oct((run / name).stat().st_mode))


def report_notes(*pieces: str) -> Callable[[Path, "Outcome"], None]:
    def check(sandbox: Path, _outcome) -> None:
        text = (sandbox / RUN_DIR / "report.md").read_text()
        assert all(p in text for p in pieces), text
    return check


def runfolder_cases() -> list[Case]:
    report, track = ["report", "{out}/runs/c/" + RUN_ID], ["track", "{out}/runs/c/" + RUN_ID]
    runs = ["runs", "--runs", "{out}/runs"]
    fine = run_dir_files("bbbbbbbbbbbb")
    cases = []
    for kind, made in (("fifo", Fifo()), ("link", victim(f"{RUN_DIR}/results.json"))):
        said = "Received a FIFO" if kind == "fifo" else "Received a symbolic link"
        cases += [
            Case(f"runs-results-json-a-{kind}", runs, {**run_dir_files(), f"{RUN_DIR}/results.json": made, **fine,
                                                      "victim/results.json": "{}"}, (0,), "damaged",
                 also=("bbbbbbbbbbbb", said)),
            Case(f"runs-outcome-json-a-{kind}-of-a-run-without-results", runs,
                 {f"{RUN_DIR}/outcome.json": Fifo() if kind == "fifo" else victim(f"{RUN_DIR}/outcome.json"),
                  **fine, **VICTIMS}, (0,), "damaged", also=("bbbbbbbbbbbb", said)),
            Case(f"report-results-json-a-{kind}", report, {**run_dir_files(), f"{RUN_DIR}/results.json": made,
                                                         "victim/results.json": "{}"}, says=said),
            Case(f"track-results-json-a-{kind}", track, {**run_dir_files(), f"{RUN_DIR}/results.json": made,
                                                       "victim/results.json": "{}"}, says=said,
                 env={"MLFLOW_TRACKING_URI": CLOSED}),
            Case(f"track-tracking-json-a-{kind}", track, {**run_dir_files(), f"{RUN_DIR}/tracking.json": Fifo()
                                                        if kind == "fifo" else victim(f"{RUN_DIR}/tracking.json"),
                                                        **VICTIMS}, (1,), "not all sent",
                 env={"MLFLOW_TRACKING_URI": CLOSED}),
            Case(f"report-a-{kind}-at-every-other-file", report, at_every_name(kind, REPORT_FILES), (0,), "report.md",
                 bound=30, check=report_notes(f"history/0.csv: {said}")),
            Case(f"report-a-{kind}-at-every-folder", report, at_every_name(kind, REPORT_FOLDERS), (0,), "report.md",
                 bound=30, check=report_notes(f"history: {said}")),
        ]
    cases += [
        Case("report-files-readable-as-the-umask-says", report, run_dir_files(), (0,), "report.md",
             check=modes_follow_the_umask),
        Case("track-a-clusters-folder", ["track", "{out}/runs/c"], run_dir_files(), says="not a run",
             env={"MLFLOW_TRACKING_URI": CLOSED}),
        Case("track-the-runs-folder", ["track", "{out}/runs"], run_dir_files(), says="not a run",
             env={"MLFLOW_TRACKING_URI": CLOSED}),
        Case("track-results-without-best", track, run_dir_files(doc={k: v for k, v in trials_doc(("x", 0.5)).items()
                                                                     if k != "best"}),
             says="best: Received None", env={"MLFLOW_TRACKING_URI": CLOSED}),
        Case("track-a-tracker-that-answers-one-byte-at-a-time", ["track", "-i", "{work}/inventory.yaml", *track[1:]],
             {**run_dir_files(), "inventory.yaml": inventory(cluster="c", tracking={"mlflow": {"timeout_s": 1}})},
             (1,), "no whole answer within 3 s", around=trickling),
    ]
    return cases


def trickling():
    from support.trickle import trickling_tracker
    return trickling_tracker()


# Each field a reader of results.json uses, with what a host could write there instead: refused by
# name, the run listed as damaged (one `runs` over a folder of such runs), never a traceback.
WRONG_FIELDS = [("best", None), ("best", {"candidate": "nobody", "val_accuracy": 0.5}), ("workers", 0),
                ("replicas", "2"), ("restarts", 1e308), ("mode", ["sync"]), ("started", 17), ("class_names", "AD"),
                ("images", {"train": -1}), ("search", {"rungs": [1e308]}), ("search", {"trials": "ten"}),
                ("search", {"lost": {"h1": 3}})]
WRONG_TRIAL_FIELDS = [("val_accuracy", 1e308), ("val_loss", -1), ("train_seconds", "1"), ("images_per_second", 1e308),
                      ("params", 2.5), ("epochs", "2"), ("epochs_run", "2"), ("resumed_from_epoch", "1"),
                      ("pruned_at_epoch", 1.5), ("state", "done"), ("curve", [0.5, 1e308]),
                      ("hyperparameters", {"lr": [1]}), ("host", 7), ("learning_rate", "fast"),
                      ("confusion_matrix", [[1, 2], [3]]), ("why", 7), ("candidate", 7)]


def named(key: str, value) -> str:
    """The field a refusal names: `search.rungs` for a search's own key, `best.candidate`…"""
    if key == "search" or (key == "best" and isinstance(value, dict)):
        return f"{key}.{next(iter(value)) if key == 'search' else 'candidate'}"
    return key


def wrong_field_runs() -> dict:
    files = {}
    for i, (key, value) in enumerate(WRONG_FIELDS):
        files.update(run_dir_files(f"{i:012x}", doc={**trials_doc(("x", 0.5)), key: value}))
    for j, (key, value) in enumerate(WRONG_TRIAL_FIELDS, start=len(WRONG_FIELDS)):
        doc = trials_doc(("x", 0.5))
        doc["candidates"][0][key] = value
        files.update(run_dir_files(f"{j:012x}", doc=doc))
    return files


def extreme_history() -> dict:
    """Three trials whose history files hold 1e308, infinity and NaN accuracies, and an epoch 1e30."""
    doc = trials_doc(("x", 0.5), ("y", 0.4), ("z", 0.3))
    return run_dir_files(doc=doc, **{"history/0.csv": "epoch,loss,accuracy,val_loss,val_accuracy\n1,1,0.2,1,1e308\n",
                                     "history/1.csv": "epoch,loss,accuracy,val_loss,val_accuracy\n1,1,inf,1,-inf\n"
                                                      "100000000000000000000000000000,1,0.5,1,0.5\n",
                                     "history/2.csv": "epoch,loss,accuracy,val_loss,val_accuracy\n1,nan,nan,nan,nan\n"
                                                      "2,1,0.5,1,0.5\n"})


def fields_cases() -> list[Case]:
    texts = ["epochs_run", "resumed_from_epoch"]
    cases = [Case("runs-every-wrong-field-named", ["runs", "--runs", "{out}/runs"], wrong_field_runs(), (0,), "damaged",
                  also=tuple(f"{named(k, v)}: Received" for k, v in WRONG_FIELDS + WRONG_TRIAL_FIELDS)),
             Case("report-history-1e308-infinity-nan", ["report", "{out}/runs/c/" + RUN_ID], extreme_history(), (0,),
                  "report.md", check=report_notes("history/0.csv: 1 of 1 row(s) left out (val_accuracy 1e+308 is not an "
                                                  "accuracy 0–1)", "history/1.csv: 2 of 2 row(s) left out"))]
    for key in texts:
        doc = trials_doc(("x", 0.5))
        doc["candidates"][0][key] = "2"
        cases.append(Case(f"report-{key.replace('_', '-')}-as-text", ["report", "{out}/runs/c/" + RUN_ID],
                          run_dir_files(doc=doc), says=f"candidates[0].{key}: Received '2'"))
    return cases


# A tracker's password with each character a URI reserves (and `%`, which starts an escape): the
# URI parser once found no user part in them, and printed the whole URI.
RESERVED = "#/?@%:[]!$&'()*+,;= "
PASSWORD = "Qz8pw" + RESERVED.replace(" ", "") + "9z"


def secret_uri(password: str) -> str:
    return f"http://alice:{password}@127.0.0.1:9/mlflow"


def secrets_cases() -> list[Case]:
    cases = []
    for char in RESERVED:
        password = f"Qz8s3cr{char}t-pw"
        halves = (password, "Qz8s3cr", f"{char}t-pw")        # neither part of it shown either
        label = {"#": "hash", "/": "slash", "?": "question", "@": "at", "%": "percent", ":": "colon", "[": "bracket",
                 "]": "closing-bracket", " ": "space"}.get(char, f"x{ord(char):02x}")
        uri = secret_uri(password)
        doc = inventory(cluster="c", tracking={"mlflow": {"uri": uri}})
        cases.append(Case(f"validate-tracker-password-with-{label}", ["validate", "-i", "{work}/inventory.yaml"],
                          {"inventory.yaml": doc}, (0, 2), "inventory.yaml", never=halves))
        if char in "#/?@%":
            cases.append(Case(f"track-tracker-password-with-{label}", ["track", "{out}/runs/c/" + RUN_ID], run_dir_files(),
                              (1,), "not all sent", env={"MLFLOW_TRACKING_URI": uri}, never=halves))
    cases.append(Case("track-tracker-password-with-every-reserved-character", ["track", "{out}/runs/c/" + RUN_ID],
                      run_dir_files(), (1,), "not all sent", env={"MLFLOW_TRACKING_URI": secret_uri(PASSWORD)},
                      never=(PASSWORD, "Qz8pw", PASSWORD[5:-2])))
    return cases


# --- the trainer ----------------------------------------------------------------------------------

def trainer(name: str, config: str | bytes | None, says: str = "", env: dict | None = None, args=()) -> Case:
    files = {"train.yaml": config} if config is not None else {}
    argv = (["--config", "{work}/train.yaml"] if config is not None else []) + ["--results-dir", "{out}/r", *args]
    return Case(f"trainer-{name}", argv, files, (2,), says, program=TRAINER, env=env or {})


def trainer_cases() -> list[Case]:
    return [
        trainer("alias-bomb", BOMB, "aliases"),
        trainer("deep-nesting", "epochs: " + "[" * 3000 + "]" * 3000 + "\n", "nested"),
        trainer("duplicate-key", "epochs: 1\nepochs: 2\n", "Expected each key once"),
        trainer("two-megabytes", "#" + "x" * (2 << 20) + "\n", "more than"),
        trainer("unknown-candidate", "candidates: [resnet]\n", "Received ['resnet']"),
        trainer("set-deep", None, "nested", args=["--set", "epochs=" + "[" * 3000 + "]" * 3000]),
        trainer("set-bomb", None, "--set", args=["--set", "x=" + BOMB.replace("\n", "\n  ")]),
        trainer("env-bomb", None, "", env={"TFC_TRAIN_EPOCHS": "[" * 3000}),
        trainer("tf-config-deep", "epochs: 1\n", "TF_CONFIG", env={"TF_CONFIG": "[" * 30000 + "]" * 30000}),
        trainer("tf-config-zone-id", "epochs: 1\n", "TF_CONFIG", env={"TF_CONFIG": '{"cluster": {"worker": '
                '["[fe80::1%eth0]:2222", "10.0.0.2:2222"]}, "task": {"type": "worker", "index": 0}}'}),
        trainer("tf-config-huge", "epochs: 1\n", "TF_CONFIG", env={"TF_CONFIG": '{"cluster": {"worker": ["' + "a" * 100000 + '"]}}'}),
        trainer("config-dev-zero", None, "more than", args=["--config", "/dev/zero"]),
        # Hardening III (#37): a train.yaml written by hand with a link no link has is refused before
        # TensorFlow loads (it once killed every worker at its first trial).
        trainer("link-mbit-s-1e-320", "allreduce: {auto: true, link_mbit_s: 1.0e-320}\n", "allreduce.link_mbit_s"),
        trainer("link-mbit-s-from-the-environment", None, "allreduce.link_mbit_s",
                env={"TFC_TRAIN_ALLREDUCE__LINK_MBIT_S": "5.0e-324"}),
        trainer("grid-value-twice", "search: {learning_rates: [0.01, 0.01]}\n", "Received 0.01 twice"),
    ]


def existing_trainer_cases() -> list[Case]:
    cases = []
    for expected in sorted((DATA / "bad_trainer_inputs").glob("*.expected")):
        config, tfconfig = expected.with_suffix(".yaml"), expected.with_suffix(".tfconfig")
        argv = (["--config", str(config)] if config.exists() else []) + ["--results-dir", "{out}/r"]
        env = {"TF_CONFIG": tfconfig.read_text()} if tfconfig.exists() else {}
        cases.append(Case(f"corpus-trainer-{expected.stem}", argv, program=TRAINER, env=env, outside=(expected.parent,)))
    return cases


def all_cases() -> list[Case]:
    return (inventory_cases() + existing_inventory_cases() + cli_cases() + trainer_cases()
            + existing_trainer_cases() + runfolder_cases() + fields_cases() + secrets_cases())
