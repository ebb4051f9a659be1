"""An elastic run's record (was in config.py): `ElasticRun`, written by `up` into the trainer's
settings under the inventory's `elastic:` (the batch policy, the cluster's size at the start) and
copied by the chief into results.json, and each `Reform` in it (the hosts lost or taken back, the
cluster before and after), its time in one UTC format (`reform_at`)."""
from __future__ import annotations

from typing import Annotated, List, Literal

from pydantic import StringConstraints

from trainer.spec.validation import StrictIntT, StrictModel as _Strict, field

HOST_NAME = Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9-]{0,39}$")]
BATCH_POLICIES = ("keep_global", "keep_per_replica")


REFORM_AT = "%Y-%m-%dT%H:%M:%SZ"        # Reform.at: UTC, one format, so the text sorts as the time


def reform_at(when) -> str:
    """`when` (an aware datetime) as a Reform's `at`."""
    import datetime as dt
    return when.astimezone(dt.timezone.utc).strftime(REFORM_AT)


class Reform(_Strict):
    """One re-form of an elastic run: the hosts lost, the cluster before and after (launcher/elastic/)."""
    generation: StrictIntT = field(..., expected="an integer ≥ 1", ge=1, le=1_000_000)
    """The cluster's generation after this re-form (the first cluster is generation 0)."""
    at: str = field(..., expected="a UTC time like 2026-11-28T05:00:00Z", pattern=r"^[0-9]{4}-[0-9-]{5}T[0-9:]{8}Z$")
    """When the launcher decided the host was lost (UTC)."""
    lost: List[HOST_NAME] = field(..., expected="a list of host names", max_length=256)
    """The hosts left behind (none when the re-form took a host back)."""
    joined: List[HOST_NAME] = field([], expected="a list of host names", max_length=256)
    """The hosts taken back (elastic.rejoin): lost earlier, answering again."""
    why: str = field("", expected="text of at most 300 characters", max_length=300, pattern=r"^[^\x00-\x1f\x7f]*$")
    """Why each was judged lost (silent, or failing for good, and for how long)."""
    hosts_after: List[HOST_NAME] = field(..., expected="a list of host names", min_length=1, max_length=256)
    """The hosts that went on, the chief first."""
    workers_before: StrictIntT = field(..., expected="an integer ≥ 1", ge=1, le=256)
    """The hosts training together before the loss."""
    candidate: str = field("", expected="a trial's name", max_length=1000, pattern=r"^[^\x00-\x1f\x7f]*$")
    """The trial in training when the host was lost ("" between trials)."""
    epochs_done: StrictIntT = field(0, expected="an integer ≥ 0", ge=0, le=100_000)
    """The trial's epochs finished (and backed up) when the host was lost: where training resumed."""


class ElasticRun(_Strict):
    """Written by `up` under the inventory's `elastic:`, never by hand: the batch policy, the cluster's size at the
    start, and every re-form so far (the chief copies them into results.json)."""
    batch: Literal["keep_global", "keep_per_replica"] = field("keep_global", expected="'keep_global' or 'keep_per_replica'")
    """The inventory's elastic.batch: how a trial's batch and learning rate follow a smaller cluster."""
    workers_at_start: StrictIntT = field(1, expected="an integer ≥ 1", ge=1, le=256)
    """The hosts the run started with (each trains with as many replicas as the others: gpus_per_host)."""
    reforms: List[Reform] = field([], expected="a list of re-forms", max_length=10_000)
    """Every re-form so far, the oldest first."""

    @property
    def generation(self) -> int:
        return self.reforms[-1].generation if self.reforms else 0
