"""The retries waiting for a host, the study's collaborator (study.py): a trial whose host was lost
(or failed it on its own) waits here for a host that did not fail it, its values and its name
fixed. They are kept in the study's own storage (a user attribute of study.db), so a restarted
chief finds them.

Which host takes one (`chosen_for`, pure): any host that did not fail it; a host that did, only
when every other host there failed it too (or none is there) — else nobody ever would, and the
search would wait for ever."""
from __future__ import annotations

import json
from typing import Iterable, Optional

PENDING = "tfc:pending"


def chosen_for(waiting: list[dict], host: str, others: Iterable[str]) -> Optional[dict]:
    """The first retry `host` may take, when the hosts `others` are there too."""
    others = set(others)
    return next((r for r in waiting if host not in r["not_on"] or others <= set(r["not_on"])), None)


class Retries:
    def __init__(self, study):
        self.study = study                  # an optuna Study: its user attributes hold the list

    def waiting(self) -> list[dict]:
        """Each retry: {params, name, retry_of, not_on}, the oldest first."""
        return json.loads(self.study.user_attrs.get(PENDING, "[]"))

    def add(self, params: dict, name: str, retry_of: int, not_on: list[str]) -> None:
        self._keep(self.waiting() + [{"params": params, "name": name, "retry_of": retry_of, "not_on": not_on}])

    def take_for(self, host: str, others: Iterable[str]) -> Optional[dict]:
        """The retry `host` trains next (off the list), or None."""
        waiting = self.waiting()
        chosen = chosen_for(waiting, host, others)
        if chosen is not None:
            self._keep([r for r in waiting if r is not chosen])
        return chosen

    def clear(self) -> list[dict]:
        """Every retry, off the list (the search stopped: none will run)."""
        waiting = self.waiting()
        self._keep([])
        return waiting

    def _keep(self, waiting: list[dict]) -> None:
        self.study.set_user_attr(PENDING, json.dumps(waiting))
