"""Patterns the inventory's schema and its jump-host parser both check names against; imports
nothing of tfcompose (schema.py and jumps.py sit above it, neither imports the other's callers)."""
from __future__ import annotations

import re

HOSTNAME_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?$")
