"""mkdocs-gen-files' script (mkdocs.yml): the reference pages, written from the code at build time."""
import sys
from pathlib import Path

import mkdocs_gen_files

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))     # run by path: the repository's packages
from docsite.reference import pages  # noqa: E402

for path, text in pages().items():
    with mkdocs_gen_files.open(path, "w") as fh:
        fh.write(text)
