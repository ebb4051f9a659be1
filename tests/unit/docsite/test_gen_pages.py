"""The documentation site builds with `mkdocs build --strict`: a broken link or anchor, a page
missing from the navigation or a reference page that cannot be written fails it."""
from __future__ import annotations

import os
import subprocess
import sys

from support.common import REPO


def build(tmp_path, config=REPO / "mkdocs.yml"):
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "DISABLE_MKDOCS_2_WARNING": "true"}
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config),
                           "-d", str(tmp_path / "site")], cwd=REPO, capture_output=True, text=True, env=env, timeout=300)


def test_the_site_builds_strict_with_the_reference_written_from_the_code(tmp_path):
    done = build(tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    site = tmp_path / "site"
    cli = (site / "reference" / "cli" / "index.html").read_text()
    assert "--new-run" in cli and "--break-lease" in cli
    assert "hosts[].gpus" in (site / "reference" / "inventory" / "index.html").read_text()
    assert (site / "inventory.schema.json").read_text() == (REPO / "docs" / "inventory.schema.json").read_text()
    for kept in ("benchmarks", "reliability", "gpu"):           # the pages other files link to stay where they were
        assert (site / kept / "index.html").is_file()


def test_a_broken_link_fails_the_build(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# x\n\n[gone](nowhere.md)\n")
    config = tmp_path / "mkdocs.yml"
    config.write_text(f"site_name: x\ndocs_dir: {docs}\n")
    done = build(tmp_path, config)
    assert done.returncode != 0 and "nowhere.md" in done.stderr
