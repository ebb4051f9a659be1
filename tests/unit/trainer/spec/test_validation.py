"""trainer/spec/validation.py: the models' descriptions are their attribute docstrings, read from the
source when asked (the schema, the docs), not at import, where reading them slowed every command."""
from __future__ import annotations

import ast
import subprocess
import sys

from support.common import REPO

ASK = """
import sys
from launcher.inventory.schema import Defaults, Inventory
from trainer.spec.config import SearchConfig
before = Defaults.model_fields["tf_port"].description
from trainer.spec.validation import described
described()
print(repr(before))
print(repr(Defaults.model_fields["tf_port"].description))
print(repr(SearchConfig.model_fields["pruner"].description))
print(repr(Inventory.model_json_schema()["$defs"]["Defaults"]["properties"]["tf_port"]["description"]))
"""


def test_a_fields_description_is_the_docstring_below_it_once_asked_for_and_not_read_at_import():
    said = subprocess.run([sys.executable, "-c", ASK], cwd=REPO, capture_output=True, text=True, check=True)
    before, tf_port, pruner, in_schema = map(ast.literal_eval, said.stdout.splitlines())
    assert before is None            # importing the models read no source
    assert tf_port.startswith("Port of the TensorFlow gRPC server on every host")
    assert pruner.startswith("Stop trials that fall behind: asha")     # the trainer's models too
    assert in_schema == tf_port      # a model held by another (Inventory holds Defaults) carries it
