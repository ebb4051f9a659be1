"""An elastic run's re-forms as the report shows them: a section saying each one, and a mark on
the curves of the trial that went on (results.json's `elastic`, checked by trainer/spec/results.py)."""
from __future__ import annotations

from launcher.text import one_line


def lines(doc: dict) -> list[str]:
    """report.md's section on the cluster's changes (none without a re-form)."""
    section = doc.get("elastic") or {}
    reforms = section.get("reforms", [])
    if not reforms:
        return []
    size = section.get("workers_at_start", 0)
    out = ["## The cluster changed", ""]
    for reform in reforms:
        after = len(reform["hosts_after"])
        where = (f"; {one_line(reform['candidate'], 200)} went on from epoch {reform['epochs_done'] + 1}"
                 if reform.get("candidate") else "")
        change = [f"{', '.join(reform['lost'])} lost for good ({one_line(reform.get('why', ''), 300)})"
                  ] if reform["lost"] else []
        back = f" ({one_line(reform['why'], 300)})" if reform.get("why") and not reform["lost"] else ""
        change += [f"{', '.join(reform['joined'])} taken back{back}"] if reform.get("joined") else []
        out.append(f"- {reform['at']}: generation {reform['generation']}, {' and '.join(change)}: "
                   f"{reform['workers_before']} → {after} hosts ({', '.join(reform['hosts_after'])}){where}.")
        size = after
    rule = ("each replica took a larger share of the same global batch" if section.get("batch") == "keep_global"
            else "each replica kept its batch and the learning rate was scaled with the global batch")
    out += ["", f"elastic.batch {section.get('batch')}: {rule}; the run ended on {size} host(s).", ""]
    return out


def marks(doc: dict, candidate: str) -> list[tuple[float, str]]:
    """Where a trial's curves cross a re-form: between the epoch finished and the one trained again."""
    reforms = (doc.get("elastic") or {}).get("reforms", [])
    return [(r["epochs_done"] + 0.5, f"{r['workers_before']}→{len(r['hosts_after'])} hosts")
            for r in reforms if r.get("candidate") == candidate]
