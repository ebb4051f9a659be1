"""What `tfcompose bootstrap` says of each host, as plain lines: the plan (without --yes) or what
became of it, then what is left to do. Read from its outcome's fields (launcher/bootstrap/stage.py);
the CLI prints them."""
from __future__ import annotations


def bootstrap_lines(outcome) -> list[str]:
    """Per host: the plan (without --yes) or what became of it; then what to do next."""
    lines = []
    for result in outcome.hosts.values():
        lines += _bootstrap_host(result, outcome.applied)
    if not outcome.applied:
        todo = [r.host for r in outcome.hosts.values() if r.state == "planned"]
        lines.append("nothing was changed" + (f"; `tfcompose bootstrap --yes` takes the steps above on {', '.join(todo)}"
                                              if todo else ""))
    return lines


def _bootstrap_host(result, applied: bool) -> list[str]:
    state, plan, f = result.state, result.after or result.plan, result.facts
    if state == "unreachable":
        return [f"{result.host}: not looked at: {(result.error or '').removeprefix(result.host + ': ')}"]
    if state == "refused":
        return [f"{result.host}: refused: {plan.refused if plan.refused else result.plan.refused}"]
    what = f"{f.os_name}, {f.arch}" if f is not None else ""
    if not applied or (state != "ready" and not result.done and not result.error):
        lines = [f"{result.host}: {what}: " + ("nothing to do" + _engine(f) if plan.nothing_to_do else
                                                 f"{len(plan.steps)} step(s)")]
        lines += [f"  {i}. {step.line()}" for i, step in enumerate(plan.steps, start=1)]
        lines += [f"  waits for apt's lock if it is still held: {holder}" for holder in plan.waits_for]
    elif state == "ready":
        lines = [f"{result.host}: ready in {result.seconds:.0f} s" + (": " + "; ".join(result.done) if result.done else "")]
    else:
        error = (result.error or "").removeprefix(f"{result.host}: ")
        lines = [f"{result.host}: {'failed' if error else 'not ready'}" + (f": {error}" if error else "")]
        if result.done:
            lines.append("  done before that: " + "; ".join(result.done))
    if result.bundle is not None:
        sent = result.shipped
        lines.append(f"  offline: {len(result.bundle.debs)} .deb file(s), {result.bundle.size / 1e6:,.1f} MB"
                     + (f"; sent {sent.bytes / 1e6:,.1f} MB ({sent.held} held already)" if sent else ""))
    lines += [f"  left to you: {b}" for b in plan.blockers]
    lines += [f"  note: {n}" for n in plan.notes]
    return lines


def _engine(f) -> str:
    if f is None or not f.engine_version:
        return ""
    return f" (Docker {f.engine_version}, compose {f.compose or '?'})"
