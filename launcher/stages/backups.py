"""Backups: an elastic run resumed by `up` starts with every host's backups as far as the newest's.

Every host keeps its own backups (trainer/train/backup.py). A host the run went on without kept
older ones: when a later `up --wait` resumes the run with it (after a stop below
`elastic.min_hosts`, or any stop), its trainer would find the others more than a save ahead, and
all would start the open trial over. So before the trainers start, each host's backups are read
(its finished trials and the newest save of the open one), and the newest host's are handed to
each host behind it (mirror.hand_backups: through this machine, replaced whole, never half).
Likewise the chief's state: if another host was chief last (the inventory's chief was lost, and the
run went on), its newest snapshot goes to the inventory's chief, which takes it as it starts
(trainer/train/mirror.adopt), so the study, history and best model go on from where they were.

    stop every container (a later generation's may still restart) → marks (read once, parsed:
    hosts are untrusted) → who is behind, whose state is newest (pure) → hand

And the re-forms: each host's train.yaml, as the last `up` rendered it, holds the re-forms made
so far (the hosts of the last generation the longest list); `carried_on` reads them before the
push rewrites it, so the resumed run goes on counting them (plan.resumed).
"""
from __future__ import annotations

import json
import re
from typing import Optional

from launcher import plan as plan_mod
from launcher.errors import summary
from launcher.plan import Plan
from launcher.stages.down import remove_containers
from launcher.stages.mirror import MIRROR_MAX, copy as copy_state, hand_backups, manifest
from trainer.spec import yamlfile
from trainer.spec.elastic_run import ElasticRun, Reform, reform_at
from trainer.spec.errors import BadInput

SAVES, STATE = "#saves", "#state"
MARK_MAX = 64 << 10
# Where a host's backups stand: its finished trials (search_state.json), then the newest save of
# each open trial (the first line of its checkpoint state file: `model_checkpoint_path: "ckpt-N"`).
READ = ('cd "$1" 2>/dev/null || exit 0; head -c 65536 search_state.json 2>/dev/null; echo; echo "' + SAVES + '"; '
        'for f in */chief/checkpoint; do [ -f "$f" ] && head -n 1 "$f"; done | head -n 64; echo "' + STATE + '"; '
        'head -c 4096 chief-state/manifest.json 2>/dev/null')
SAVE_RE = re.compile(r'^model_checkpoint_path: "ckpt-(\d{1,9})"$', re.M)


def mark(text: str) -> tuple[int, int]:
    """(trials finished, newest save of an open trial) from what READ printed; (0, 0) for nothing."""
    state, _, saves = text.partition(STATE)[0].partition(SAVES)
    try:
        done = json.loads(state.strip() or "{}").get("done", [])
    except (ValueError, AttributeError, RecursionError):
        done = []
    newest = max((int(n) for n in SAVE_RE.findall(saves)), default=0)
    return (len(done) if isinstance(done, list) else 0, newest)


def snapshot_epoch(text: str) -> Optional[int]:
    """The epoch of the host's own snapshot of the chief's state (it was chief), from what READ printed."""
    said = manifest(text.partition(STATE)[2].strip())
    return said["epoch"] if said is not None and 0 <= said["epoch"] <= 10 ** 6 else None


def newest_state(read: dict[str, str], chief: str) -> Optional[str]:
    """The host whose snapshot of the chief's state is the newest (by its backups, then its epoch),
    when that is not the chief's own: the last host that was chief."""
    held = {h: (mark(text), epoch) for h, text in read.items() if (epoch := snapshot_epoch(text)) is not None}
    if not held:
        return None
    newest = max(held, key=lambda h: held[h])
    return None if newest == chief or held[newest] == held.get(chief) else newest


def behind(marks: dict[str, tuple[int, int]], order: list[str]) -> tuple[Optional[str], list[str]]:
    """The host with the newest backups (the first in `order` among equals) and the hosts behind it
    by more than the one save the trainers agree back from themselves."""
    if not marks:
        return None, []
    newest = max(marks.values())
    source = next(h for h in order if marks.get(h) == newest)
    late = [h for h in order if h in marks and (marks[h][0] < newest[0] or marks[h][1] < newest[1] - 1)]
    return source, late


def before_resume(group, plan: Plan) -> dict[str, str]:
    """An elastic run resumed: every container of the cluster removed first (one of a later
    generation may still restart into a barrier with other ports and fewer hosts, and `start`
    leaves a running one alone), so that the backups hold still, then each host's brought up."""
    group.run("stop", lambda h, c: remove_containers(h, c, plan.cluster.name)).raise_if_failed()
    return even(group, plan)


def even(group, plan: Plan) -> dict[str, str]:
    """Each host behind given the newest host's backups, and the chief the newest state of the chief's;
    what could not be done, by host (said)."""
    hosts = {h.name: h for h in plan.cluster.hosts}
    read = group.run("backups", lambda h, c: c.run(["sh", "-c", READ, "sh", f"{plan.run_dir(h)}/backup/{h.name}"],
                                                   check=False, limit=MARK_MAX).stdout).succeeded
    holder = newest_state(read, plan.cluster.chief.name)
    source, late = behind({h: mark(text) for h, text in read.items()}, list(hosts))
    missed = {}
    for name in late:
        try:
            sent = hand_backups(group, plan, hosts[source], hosts[name])
        except Exception as exc:           # noqa: BLE001  (its trainer then starts the open trial over)
            missed[name] = summary(exc)
            continue
        if sent is None:
            missed[name] = f"{source}'s backups are larger than {MIRROR_MAX >> 20} MiB"
    for name, why in missed.items():
        group.reporter.warn(name, f"its backups are older than {source}'s and could not be brought up to them ({why}): "
                                  "the open trial starts over")
    for name in late:
        if name not in missed:
            group.reporter.stage(name, "backups", f"brought up to {source}'s: it was behind")
    take_state(group, plan, holder)          # after: handing a host backups replaces its folder whole
    return missed


def take_state(group, plan: Plan, holder: Optional[str]) -> None:
    """The last chief's snapshot to the chief, as the mirror it takes when it starts."""
    if holder is None:
        return
    chief = plan.cluster.chief
    try:
        sent = copy_state(group, plan, plan.cluster.host(holder), chief)
    except Exception as exc:               # noqa: BLE001  (the chief goes on from its own, older state)
        sent, why = None, summary(exc)
    else:
        why = f"larger than {MIRROR_MAX >> 20} MiB"
    if sent is None:
        group.reporter.warn(chief.name, f"{holder} was chief last, but its state could not be brought here ({why}): "
                                        "the study, history and best model go on from this host's older ones")
    else:
        group.reporter.stage(chief.name, "backups", f"takes the chief's state from {holder}, chief last")


def reforms_so_far(texts: dict[str, str], now) -> list[Reform]:
    """The re-forms made before the run stopped, from each host's train.yaml text: the longest
    list (a host the run went on without holds an older one). A text that is no train.yaml, whose
    `elastic` is not one, or whose re-forms are not generations 1, 2, … made before `now` (the
    launcher wrote them, on this machine's clock) counts for nothing: hosts are untrusted."""
    newest: list[Reform] = []
    for host, text in texts.items():
        try:
            doc = yamlfile.parse(text, f"{host}:train.yaml").data
            section = doc.get("elastic") if isinstance(doc, dict) else None
            said = ElasticRun.model_validate(section).reforms if isinstance(section, dict) else []
        except (BadInput, ValueError, TypeError):
            continue
        if len(said) > len(newest) and plausible(said, now):
            newest = said
    return newest


def plausible(reforms: list[Reform], now) -> bool:
    """Generations 1, 2, … in order, each made before `now` (an hour's leeway)."""
    import datetime as dt
    latest = reform_at(now + dt.timedelta(hours=1))
    return all(r.generation == i for i, r in enumerate(reforms, 1)) and all(r.at <= latest for r in reforms)


def carried_on(group, plan: Plan, now) -> Plan:
    """An elastic run resumed: its plan with the re-forms made before it stopped and this resume
    after them (read before the push rewrites each host's train.yaml; the trainer reads no larger one)."""
    most = yamlfile.MAX_BYTES
    read = group.run("re-forms", lambda h, c: c.run(["head", "-c", str(most), f"{h.bundle_dir}/train.yaml"],
                                                    check=False, limit=most + 1).stdout).succeeded
    earlier = reforms_so_far(read, now)
    return plan_mod.resumed(plan, earlier, now) if earlier else plan
