"""What the report's picture tests share: real run folders copied out of tests/data/runs, figures
kept open instead of saved (so a test reads their artists), and the overlap check of texts."""
from __future__ import annotations

import shutil
from pathlib import Path

from support.common import DATA

RUNS = DATA / "runs"


def real_run(name: str, into: Path) -> Path:
    """A copy of a real run folder (tests/data/runs/<name>: see its README)."""
    folder = into / name
    shutil.copytree(RUNS / name, folder)
    return folder


class Kept:
    """A stand-in for the report's `_save`: keeps each figure open (by file name) and drawn, so a
    test reads its artists and their boxes; it still writes the PNG, as the report does."""

    def __init__(self):
        self.figures = {}

    def __call__(self, fig, path: Path, layout: bool = True) -> Path:
        if layout:
            fig.tight_layout()
        fig.canvas.draw()
        fig.savefig(path, dpi=110, bbox_inches="tight", pad_inches=0.15)
        self.figures[Path(path).name] = fig
        return Path(path)

    def close(self) -> None:
        import matplotlib.pyplot as plt
        for fig in self.figures.values():
            plt.close(fig)


def overlapping(fig, first, second) -> list[tuple[str, str]]:
    """Pairs of texts (or other artists) whose drawn boxes overlap, one from each group."""
    renderer = fig.canvas.get_renderer()
    pairs = []
    for a in first:
        box_a = a.get_window_extent(renderer)
        for b in second:
            if a is not b and box_a.overlaps(b.get_window_extent(renderer)):
                pairs.append((_name(a), _name(b)))
    return pairs


def _name(artist) -> str:
    return artist.get_text() if hasattr(artist, "get_text") else type(artist).__name__
