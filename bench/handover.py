"""B14, a lost host's trial handed on (#47): how soon, after a host is lost mid-trial, the launcher
says so and its trial trains on another host.

A LAN lab of 3 hosts (network namespaces on this machine, each with its own sshd and Docker engine
started from a copy of the trainer image's data root; links unshaped) runs a parallel search of 3
trials (`small_cnn` at three learning rates, scikit-learn's digits at 16×16) through `tfcompose up
--wait`, every setting at its default (restart_retries 2, ssh.lost_after_s 30 s, the queue's own
search.lost_after_s 120 s). Once a host other than the chief has finished an epoch of its trial,
its container is slowed (`docker update --cpus 0.1`) so that its trial outlasts the others'; once
another host has finished its own trial and waits (the chief's queue says so in its
search-progress.json), the slowed host is lost. A host is free then, so what is timed is the
hand-on itself, not a wait for a busy host to finish its own trial:

  kill    its training container is killed on its engine (`docker kill`); time zero is Docker's
          own FinishedAt of the container.
  silent  its link to the LAN is cut (the bridge side of its veth set down: a pulled cable; its
          container trains on, unheard); time zero is when `ip link` returned. The link comes
          back once the trial runs elsewhere, so that the run can end.

Timed from zero, each from the first line saying it, stamped by the process that saw it: the
launcher's line `hN: lost: the launcher saw it …` (as `up` printed it), the chief's queue handing
the trial on (`[queue] …: its trial N goes to another host as NAME~r1`, Docker's timestamp of that
line in the chief's log), and the retry's first training step on another host (`NAME~r1 first
training step done T s after fit began` in that host's log: the trial is training there; fit
began T s before it). The run is then let finish, and its results.json must say the same: the
lost trial `retried`, its retry complete on another host.

    BASE_IMAGE=tf-offline-base:cpu python bench/handover.py [KILLS] [SILENT]   (root; default 5 3)
    python bench/handover.py --report        (the section again from docs/handover.json)
    --until HH:MM (UTC): start no repetition after it (the section says how many ran)

Builds tfcompose-trainer:bench (`make image`), an engine template from it, and the lab "ho"
(10.213.14); removes the lab and the template at the end, even on failure.
"""
from __future__ import annotations

import datetime as dt
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import yaml

from common import DOC, IMAGE, REPO, build_image, machine, summary, write_section  # noqa: E402
from support.cluster import CliProcess, run_results  # noqa: E402
from support.digits import write_digits  # noqa: E402
from support.lab import Lab, veth  # noqa: E402
from support.sshd import write_inventory  # noqa: E402

BASE = os.environ.setdefault("BASE_IMAGE", "tf-offline-base:cpu")
RAW = DOC.parent / "handover.json"
HOSTS = 3
LEARNING_RATES = [0.01, 0.005, 0.002]
EPOCHS = 10
SETUP_S = 240           # the image, the engine template and the lab, before a first repetition
SLOW_CPUS = 0.1         # the victim's container, so that its trial outlasts the others'
TRAIN = {"dataset": {"kind": "image_folder", "train_dir": "/data", "image_size": [16, 16], "color_mode": "grayscale"},
         "candidates": ["small_cnn"], "epochs": EPOCHS, "batch_per_replica": 32, "join_timeout_s": 300,
         "search": {"mode": "parallel", "learning_rates": LEARNING_RATES}}
CASES = ("kill", "silent")
LOST = r"{host}: lost: the launcher saw it"
HANDED = re.compile(r"\[queue\] .*: its trial \d+ goes to another host as (\S+)")
FIRST_STEP = r"{trial} first training step done ([\d.]+) s after fit began"


# --- one repetition ---------------------------------------------------------------------------------

def inventory(lab: Lab, folder: Path, digits: Path) -> tuple[str, Path]:
    """A new cluster on the lab's hosts (a run of its own), every host with its data folder."""
    name = f"ho-{uuid.uuid4().hex[:6]}"
    path = write_inventory(lab, folder / f"{name}.yaml", name, lab.hosts, known_hosts=lab.known_hosts(), train=TRAIN,
                           image=IMAGE, base_image=BASE, dataset_source=str(digits),
                           ssh={"connect_timeout_s": 10.0}, defaults={"restart_retries": 2})
    doc = yaml.safe_load(path.read_text())
    for entry, host in zip(doc["hosts"], lab.hosts):
        entry["data_dir"] = str(host.folder / f"data-{name}")      # a cluster's data folder is its own
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return name, path


def queue_view(lab: Lab, name: str) -> dict:
    """The chief's queue's own view of the hosts (search-progress.json: per host its state, trial, epoch)."""
    results = run_results(lab.hosts[0].workdir / name)
    try:
        return json.loads((results / "search-progress.json").read_text())["hosts"] if results else {}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def container(host, name: str) -> str | None:
    ids = host.docker("ps", "-q", "--filter", f"label=tfcompose.cluster={name}",
                      "--filter", f"label=tfcompose.host={host.name}").stdout.split()
    return ids[0] if ids else None


def poll(up: CliProcess, what: str, found, seconds: float = 400):
    """found() until it is not None, while `up` runs."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if up.proc.poll() is not None:
            raise RuntimeError(f"up ended ({up.proc.returncode}) before {what}:\n{up.output[-3000:]}")
        value = found()
        if value is not None:
            return value
        time.sleep(0.3)
    raise RuntimeError(f"not within {seconds:g} s: {what}; up said:\n{up.output[-3000:]}")


def mid_trial(lab: Lab, name: str, up: CliProcess) -> tuple[object, str, int]:
    """A host other than the chief, once it has finished an epoch of its trial, slowed (SLOW_CPUS)
    until another host has finished its own trial and waits: the host, its container, its epoch."""
    def training():
        view = queue_view(lab, name)
        for host in lab.hosts[1:]:
            entry = view.get(host.name, {})
            if entry.get("state") == "training" and entry.get("epoch", 0) >= 1 and container(host, name):
                return host, container(host, name)
        return None
    victim, cid = poll(up, "a host got into a trial", training)
    victim.docker("update", "--cpus", str(SLOW_CPUS), cid)

    def free():
        view = queue_view(lab, name)
        mine = view.get(victim.name, {})
        others = [e for h, e in view.items() if h != victim.name and e.get("state") == "waiting" and e.get("trials")]
        return mine.get("epoch", 0) if others and mine.get("state") == "training" else None
    return victim, cid, poll(up, "another host finished its trial", free)


def lose(lab: Lab, host, cid: str, case: str) -> float:
    """The host lost, as `case` says; when (UTC unix seconds)."""
    if case == "kill":
        host.docker("kill", cid)
        host.docker("wait", cid, check=False)          # FinishedAt is written once it has stopped
        finished = host.docker("inspect", "-f", "{{.State.FinishedAt}}", cid).stdout.strip()
        return stamp(finished)
    subprocess.run(["ip", "link", "set", "dev", veth(lab.lan, host.ns), "down"], check=True)
    return time.time()


def reconnect(lab: Lab, host) -> None:
    subprocess.run(["ip", "link", "set", "dev", veth(lab.lan, host.ns), "up"], check=False)


def stamp(text: str) -> float:
    """Docker's RFC 3339 time (nanoseconds, Z) as UTC unix seconds."""
    head, _, frac = text.rstrip("Z").partition(".")
    return dt.datetime.fromisoformat(head).replace(tzinfo=dt.timezone.utc).timestamp() + float(f"0.{frac or 0}")


def log_lines(host, name: str) -> list[tuple[float, str]]:
    """(Docker's time of the line, the line) of the host's training container of this cluster."""
    ids = host.docker("ps", "-aq", "--filter", f"label=tfcompose.cluster={name}",
                      "--filter", f"label=tfcompose.host={host.name}").stdout.split()
    out = []
    for cid in ids:
        done = host.docker("logs", "-t", cid, check=False)
        for line in (done.stdout + done.stderr).splitlines():
            when, _, text = line.partition(" ")
            try:
                out.append((stamp(when), text))
            except ValueError:
                continue
    return sorted(out)


def first(lines: list[tuple[float, str]], pattern: str) -> tuple[float, re.Match] | None:
    return next(((t, m) for t, text in lines if (m := re.search(pattern, text))), None)


def handed_on(lab: Lab, name: str, victim, seconds: float = 240) -> dict:
    """The queue's hand-on (on the chief) and the retry's first training step on another host."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        handed = first(log_lines(lab.hosts[0], name), HANDED.pattern)
        if handed:
            retry = handed[1].group(1)
            for host in (h for h in lab.hosts if h is not victim):
                step = first(log_lines(host, name), FIRST_STEP.format(trial=re.escape(retry)))
                if step:
                    return {"retry": retry, "retry_host": host.name, "handed_at": handed[0], "step_at": step[0],
                            "fit_to_step_s": float(step[1].group(1))}
        time.sleep(1.0)
    raise RuntimeError(f"the lost trial did not train on another host within {seconds:g} s")


def one(lab: Lab, case: str, tmp: Path, digits: Path) -> dict:
    """One repetition of `case`: the times from the loss, and what results.json recorded."""
    name, inv = inventory(lab, tmp, digits)
    load = os.getloadavg()
    up = CliProcess("up", "-i", str(inv), "--wait", "--runs", str(tmp / "runs"))
    offset = time.time() - time.monotonic()          # CliProcess stamps its lines with time.monotonic()
    victim = None
    try:
        victim, cid, epoch = mid_trial(lab, name, up)
        zero = lose(lab, victim, cid, case)
        said = up.wait_for(LOST.format(host=victim.name), seconds=180)
        found = handed_on(lab, name, victim)
        if case == "silent":
            reconnect(lab, victim)              # the run can then end: the host hears its trial went elsewhere
            victim.docker("update", "--cpus", "0", cid, check=False)
        code = up.finish(900)
    finally:
        if victim is not None and case == "silent":
            reconnect(lab, victim)
        if up.proc.poll() is None:
            up.proc.kill()
        subprocess.run([sys.executable, "-m", "launcher", "down", "-i", str(inv)],
                       cwd=REPO, capture_output=True)
    return {"case": case, "cluster": name, "load": list(load), "victim": victim.name, "victim_epoch": epoch,
            "launcher_s": round(up.time_of(said) + offset - zero, 3), "queue_s": round(found["handed_at"] - zero, 3),
            "step_s": round(found["step_at"] - zero, 3),
            "fit_s": round(found["step_at"] - found["fit_to_step_s"] - zero, 3),
            "retry": found["retry"], "retry_host": found["retry_host"], "up_exit": code,
            "recorded": recorded(tmp / "runs" / name / "latest" / "results.json", victim.name)}


def recorded(path: Path, victim: str) -> dict:
    """What the chief's results say of the lost trial: retried, and its retry's state and host."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        return {"error": str(exc)[:200]}
    lost = next((r for r in doc["candidates"] if r["state"] == "retried" and r.get("host") == victim), None)
    retry = next((r for r in doc["candidates"] if lost and r["candidate"] == lost.get("retried_as")), None)
    return {"retried": lost is not None, "why": (lost or {}).get("why", ""), "retry_state": (retry or {}).get("state"),
            "retry_host": (retry or {}).get("host"), "search_lost": doc.get("search", {}).get("lost")}


# --- the lab ------------------------------------------------------------------------------------------

def engine_template(folder: Path) -> Path:
    """A Docker data root holding the bench image (one `docker save`, loaded once): every lab
    engine starts from a hard-linked copy instead of loading 3 GB each."""
    from support.engine import make_template
    save = subprocess.Popen(["docker", "save", IMAGE], stdout=subprocess.PIPE)
    try:
        data = make_template(folder, iter(lambda: save.stdout.read(1 << 20), b""))
    finally:
        save.stdout.close()
    if save.wait() != 0:
        raise RuntimeError(f"docker save {IMAGE} failed")
    return data


def run(kills: int, silent: int, until: float | None) -> dict:
    """The repetitions, kills first; none starts after `until` (unix seconds), and a failed one
    ends the series (what failed is systematic, and is said in the section)."""
    raw = {"machine": machine(), "command": command(kills, silent), "train": TRAIN, "hosts": HOSTS,
           "planned": {"kill": kills, "silent": silent}, "runs": []}
    build_image()
    with tempfile.TemporaryDirectory(prefix="tfc-handover-") as tmp_name:
        tmp = Path(tmp_name)
        os.environ.update(XDG_STATE_HOME=str(tmp / "state"), XDG_CACHE_HOME=str(tmp / "cache"), TERM="dumb")
        (tmp / "template").mkdir()
        lab = Lab(tag="ho", subnet="10.213.14")
        try:
            lab.template = engine_template(tmp / "template")
            lab.up(HOSTS)
            digits = write_digits(tmp / "digits")
            for case in ["kill"] * kills + ["silent"] * silent:
                if until is not None and time.time() > until:
                    break
                try:
                    result = one(lab, case, tmp, digits)
                except (RuntimeError, AssertionError) as exc:      # said in the section, not hidden
                    result = {"case": case, "error": str(exc)[-2000:], "load": list(os.getloadavg())}
                raw["runs"].append(result)
                print(json.dumps(result), flush=True)
                RAW.write_text(json.dumps(raw, indent=1) + "\n")
                if "error" in result:
                    break
        finally:
            lab.down()
            shutil.rmtree(tmp / "template", ignore_errors=True)
    return raw


def command(kills: int, silent: int) -> str:
    return f"BASE_IMAGE={BASE} python bench/handover.py {kills} {silent}"


# --- the section ----------------------------------------------------------------------------------------

def cell(values: list[float]) -> str:
    if not values:
        return "not measured"
    med, spread = summary(values)
    return f"{med:.1f} ± {spread:.1f} ({min(values):.1f}–{max(values):.1f})"


def rows(raw: dict) -> tuple[list[str], dict]:
    table, medians = [], {}
    for case in CASES:
        runs = [r for r in raw["runs"] if r["case"] == case and "error" not in r]
        if not runs:
            continue
        figs = {k: [r[k] for r in runs] for k in ("launcher_s", "queue_s", "fit_s", "step_s")}
        after = {k: [r[k] - r["launcher_s"] for r in runs] for k in ("fit_s", "step_s")}      # per run, then the median
        medians[case] = {k: summary(v)[0] for k, v in after.items()}
        loads = [r["load"][0] for r in runs]
        table.append(f"| {case} | {len(runs)} of {raw['planned'][case]} | {cell(figs['launcher_s'])} | "
                     f"{cell(figs['queue_s'])} | {cell(figs['fit_s'])} | {cell(figs['step_s'])} | "
                     f"{min(loads):.1f}–{max(loads):.1f} |")
    return table, medians


def checked(raw: dict) -> str:
    """What the runs' own results said of each lost trial."""
    failed = [r for r in raw["runs"] if "error" in r]
    note = (f" {len(failed)} repetition(s) failed before a figure: " + "; ".join(
        f"{r['case']}: {r['error'].splitlines()[0][:160]}" for r in failed) + ".") if failed else ""
    good = [r for r in raw["runs"] if "error" not in r and r["up_exit"] == 0 and r["recorded"].get("retried")
            and r["recorded"].get("retry_state") == "complete" and r["recorded"].get("retry_host") not in (None, r["victim"])]
    return (f"In {len(good)} of {len(raw['runs'])} runs `up --wait` exited 0 and results.json recorded the lost "
            "trial `retried` and its `~r1` complete on another host." + note)


def goal(medians: dict) -> str:
    """#47's aim, read off the medians: the trial running elsewhere within 10 s of the launcher seeing the loss."""
    lines = []
    for case, m in medians.items():
        lines.append(f"- {case}: the retry's first training step {m['step_s']:.1f} s after the launcher's line, its "
                     f"fit began {m['fit_s']:.1f} s after it (aim ≤ 10 s: {'met' if m['step_s'] <= 10 else 'missed'} "
                     "at the median, counted to the first step)")
    return "\n".join(lines)


def report(raw: dict) -> None:
    table, medians = rows(raw)
    write_section("handover", f"""
## B14 A lost host's trial handed on

{raw['machine']}; `{raw['command']}` (`bench/handover.py`). A LAN lab of {raw['hosts']} hosts on this
machine (network namespaces, each with its own sshd and Docker engine; links unshaped; all share its
cores), the trainer image on every engine. Each repetition is a new run of `tfcompose up --wait`: a
parallel search of 3 trials (`small_cnn` at learning rates {', '.join(map(str, LEARNING_RATES))},
{EPOCHS} epochs, scikit-learn's 1,797 digits at 16×16), every setting at its default
(`restart_retries` 2, `ssh.lost_after_s` 30 s, the queue's `search.lost_after_s` 120 s). Once a host
other than the chief has finished an epoch of its trial, its container is slowed to {SLOW_CPUS} CPU
(`docker update`) so that its trial outlasts the others'; once another host has finished its own
trial and waits (the chief's queue says so), the slowed host is lost: **kill**, its container
killed (`docker kill`; time zero: Docker's FinishedAt); **silent**, its link cut (the bridge side
of its veth down, a pulled cable; time zero: the cut). A host is free then: these are the hand-on's
own times, not a wait for a busy host to finish its trial. Seconds from zero to the launcher's
`hN: lost: the launcher saw it …` line, to the chief's queue handing the trial on (its log line),
to the retry's `fit` beginning and to its first training step on another host (that host's log: `NAME~r1 first training step done`; the step
includes building the model and tracing). Cells: median ± spread (min–max).

| lost by | repetitions | launcher's line, s | queue hands on, s | retry's fit begins, s | retry's first step, s | load average (1 min) |
|---|---|---:|---:|---:|---:|---:|
{chr(10).join(table)}

{checked(raw)}{(chr(10) * 2 + raw['note']) if raw.get('note') else ''}

Against #47's aim (the trial running elsewhere within 10 s of the launcher seeing the loss), the
median over runs of each run's difference:

{goal(medians)}

Not measured: the time when no host is free (the retry then waits for the first host to finish its
own trial, as any queued trial does); a host lost over a shaped or slow link; GPUs.
""")


def main(argv: list[str]) -> int:
    import argparse
    parser = argparse.ArgumentParser(prog="handover.py", description=__doc__.splitlines()[0])
    parser.add_argument("kills", type=int, nargs="?", default=5, help="repetitions with the container killed (5)")
    parser.add_argument("silent", type=int, nargs="?", default=3, help="repetitions with the link cut (3)")
    parser.add_argument("--until", help="start no repetition after this UTC time (HH:MM): the section says how many ran")
    parser.add_argument("--report", action="store_true", help="write the section again from docs/handover.json")
    args = parser.parse_args(argv)
    if args.report:
        report(json.loads(RAW.read_text()))
        return 0
    if os.getuid() != 0:
        print("handover.py: the LAN lab needs root (network namespaces)", file=sys.stderr)
        return 2
    until = utc_today(args.until) if args.until else None
    if until is not None and time.time() > until - SETUP_S:
        print(f"handover.py: no repetition could start before {args.until} UTC; nothing was done", file=sys.stderr)
        return 1
    raw = run(args.kills, args.silent, until)
    if not any("error" not in r for r in raw["runs"]):
        print("handover.py: no repetition gave a figure; the section was left as it was (docs/handover.json "
              "says what failed)", file=sys.stderr)
        return 1
    report(raw)
    return 0


def utc_today(hh_mm: str) -> float:
    hour, minute = (int(x) for x in hh_mm.split(":"))
    now = dt.datetime.now(dt.timezone.utc)
    return now.replace(hour=hour, minute=minute, second=0, microsecond=0).timestamp()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
