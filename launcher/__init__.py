"""tfcompose's launcher: inventory → plan → render → preflight → push → image → start → wait →
collect → down. README "How it works" maps each stage to its module."""
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
