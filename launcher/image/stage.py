"""The image stage: getting the trainer image onto every host, without a registry when need be.

- ship: build once here (local.py), survey each host's engine once (on_host.py), then send each
  host only the layers it lacks (ship.py), or, to many hosts, the layers once along a chain of
  hosts that pass them on (relay.py).
- pull: `docker pull` on each host.
- build: push the build context to each host and build there (the original procedure).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Optional

from launcher.errors import summary
from launcher.image import code_layer, layers, relay
from launcher.image.local import Shipment, build_local, load_here, local_image_id, no_progress
from launcher.image.on_host import HostImage, ImageOutcome, build_remote, context_tarball, pull, survey, verify
from launcher.image.ship import layers_needed, ship
from launcher.inventory.model import Cluster, Host
from launcher.plan import Plan
from launcher.reporter import local_reporter, transfer_reporter
from launcher.ssh.group import Group
from launcher.ssh.transfer import counted


def prepare(group: Group, plan: Plan) -> Optional[Shipment]:
    """For image_mode ship: build the image here (and your code's layer); None for pull and build,
    whose image is made on the hosts."""
    if plan.cluster.spec.image_mode != "ship":
        return None
    for host in plan.cluster.hosts:
        group.reporter.stage(host.name, "image", "building here")
    image_id = build_local(plan.cluster)

    def progress(what: str):
        return local_reporter(group.reporter, what)
    return code_shipment(plan, progress) if plan.cluster.spec.run else \
        Shipment(plan.container_image, image_id, progress=progress)


def provide(group: Group, plan: Plan, shipment: Optional[Shipment]) -> dict[str, ImageOutcome]:
    """The image on every host, by the inventory's image_mode (ship: what `prepare` made)."""
    spec = plan.cluster.spec
    if spec.image_mode == "pull":
        return group.staged("image", lambda h, c: pull(c, spec.image)).succeeded
    if spec.image_mode == "build":
        tarball = context_tarball()
        return group.staged("image", lambda h, c: build_remote(c, plan.cluster, h, tarball)).succeeded
    surveyed = group.run("image", lambda h, c: survey(c, shipment.image))
    relayed = relay_first(group, plan.cluster, shipment, surveyed.succeeded)

    def one(host: Host, conn) -> ImageOutcome:
        if host.name in surveyed.failed:
            raise surveyed.failed[host.name]
        outcome = relayed.served.get(host.name)
        if outcome is None:
            outcome = ship(conn, shipment, surveyed.succeeded[host.name],
                           transfer_reporter(group.reporter, host.name, "image"))
            if host.name in relayed.broken:
                outcome = replace(outcome, note="; ".join(filter(None, [outcome.note, "sent directly: the relay "
                                                                        f"did not serve it ({relayed.broken[host.name]})"])))
        group.reporter.stage(host.name, "image", outcome.summary())
        return outcome
    try:
        return group.staged("image", one).succeeded
    finally:
        shipment.forget_if_suspect()


@dataclass
class Relayed:
    served: dict[str, ImageOutcome] = field(default_factory=dict)   # hosts whose image came through the chain
    broken: dict[str, str] = field(default_factory=dict)            # chain hosts it did not serve, and why


def relay_first(group: Group, cluster: Cluster, shipment: Shipment, found: dict[str, HostImage]) -> Relayed:
    """With image_relay on (or auto and 3+ hosts lacking layers): the layers go once, to the first
    host lacking them, and along a chain of the others (relay.py); each host's image ID is checked."""
    setting = cluster.spec.image_relay
    if relay.chain_for(setting, [h.name for h in cluster.hosts]) == []:
        return Relayed()
    try:
        parts = shipment.parts()
    except layers.Unsplittable:
        return Relayed()
    needs = {name: layers_needed(f, shipment, parts) for name, f in found.items()}
    chain = [h for h in cluster.hosts if h.name in relay.chain_for(setting, [n for n, m in needs.items() if m])]
    if not chain:
        return Relayed()
    first = min(needs[h.name][0] for h in chain)      # every layer some host of the chain lacks
    for before, host in zip(chain, chain[1:]):
        group.reporter.stage(host.name, "image", f"receiving through the relay from {before.name}")
    conn, layer_list = group.conn(chain[0]), list(range(first, len(parts.diff_ids)))
    chunks = counted(conn, parts.chunks(layer_list), parts.archive_bytes(layer_list),
                     transfer_reporter(group.reporter, chain[0].name, "image"))
    before_bytes = conn.bytes_sent
    result = relay.run_chain(group, chain, chunks, cluster.name, parts.expectation(layer_list))
    for name, why in result.not_removed.items():
        group.reporter.warn(name, f"the relay's key could not be removed ({why}); `tfcompose down` removes it")
    checked = group.run("image", lambda h, c: verify(c, shipment.image, shipment.image_id),
                        [h for h in chain if h.name in result.reached])
    return relayed_outcomes(chain, result, checked, needs, len(parts.diff_ids), conn.bytes_sent - before_bytes,
                            shipment.image_id)


def relayed_outcomes(chain: list[Host], result, checked, needs: dict[str, list[int]], total: int, sent: int,
                     image_id: str) -> Relayed:
    """Pure: what each chain host got, from the chain's walk and the image checks after it."""
    out = Relayed()
    onward = ", ".join(h.name for h in chain[1:] if h.name in checked.succeeded) or "no other host"
    for i, host in enumerate(chain):
        if host.name in checked.succeeded:
            via = chain[i - 1].name if i else ""
            out.served[host.name] = ImageOutcome("relayed" if via else "shipped", 0 if via else sent, image_id,
                                                 len(needs[host.name]), total, f"from {via}" if via else
                                                 f"passed on to {onward}", via)
        else:
            exc = checked.failed.get(host.name)
            out.broken[host.name] = result.broken.get(host.name) or (summary(exc) if exc else "not reached")
    return out


def code_shipment(plan: Plan, progress=no_progress) -> Shipment:
    """Your code as a layer on the trainer image (or on its requirements image), made here at once;
    also loaded into this machine's engine (a few KB), so the code image can be pushed or run here."""
    spec = plan.cluster.spec
    parent_tag = code_layer.requirements_image(plan) if spec.run.requirements else spec.image
    parent = Shipment(parent_tag, local_image_id(parent_tag), progress=progress).parts()
    parts = code_layer.code_parts(plan, parent, Shipment.parts_cache())
    load_here(parts)
    return Shipment(plan.container_image, parts.image_id, parts=parts)
