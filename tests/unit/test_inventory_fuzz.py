"""Fuzz: no inventory, however malformed, produces a traceback — only InventoryError (exit 2)."""
from __future__ import annotations

import yaml
from hypothesis import HealthCheck, given, settings, strategies as st

from launcher import inventory
from launcher.cli import main
from launcher.errors import InventoryError
from launcher.inventory_schema import Defaults, HostEntry, Inventory, SSHSettings
from trainer.config import DatasetConfig, TrainConfig

KEYS = sorted({k for m in (Inventory, SSHSettings, Defaults, HostEntry, TrainConfig, DatasetConfig)
               for k in m.model_fields})
scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=True),
                    st.text(max_size=30), st.sampled_from(["all", "127.0.0.1", "10.0.0.1", "a-b", "/opt/x", "${HOME}",
                                                           "${NOPE_UNSET}", "../..", "$(id)", "small_cnn"]))
keys = st.one_of(st.sampled_from(KEYS), st.text(min_size=1, max_size=12))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(keys, inner, max_size=5)), max_leaves=25)
hosts = st.lists(st.dictionaries(st.sampled_from(sorted(HostEntry.model_fields)), values, max_size=6), max_size=4)
documents = st.one_of(values, st.fixed_dictionaries({"cluster": values, "hosts": hosts},
                                                    optional={k: values for k in ("ssh", "defaults", "train", "image")}))

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def load_or_bad_input(path) -> None:
    try:
        inventory.load(path, environ={"HOME": "/nonexistent"})
    except InventoryError as exc:
        assert exc.lines and all(line and "\n" not in line for line in exc.lines)


@FUZZ
@given(doc=documents)
def test_structured_documents_never_raise_anything_else(tmp_path, doc):
    path = tmp_path / "inventory.yaml"
    path.write_text(yaml.safe_dump(doc, allow_unicode=True))
    load_or_bad_input(path)


@FUZZ
@given(raw=st.binary(max_size=400))
def test_raw_bytes_never_raise_anything_else(tmp_path, raw):
    path = tmp_path / "inventory.yaml"
    path.write_bytes(raw)
    load_or_bad_input(path)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(doc=documents)
def test_the_cli_answers_0_or_2_without_a_traceback(tmp_path, capsys, doc):
    path = tmp_path / "inventory.yaml"
    path.write_text(yaml.safe_dump(doc, allow_unicode=True))
    assert main(["validate", "-i", str(path)]) in (0, 2)
    assert "Traceback" not in capsys.readouterr().err
