"""The search space (trainer/spec/space.py): what cannot be searched is said before any host is
contacted, and a grid is today's grid."""
from __future__ import annotations

import pytest

from trainer.spec import space
from trainer.spec.config import TrainConfig
from trainer.spec.trials import expand


def cfg(**search) -> TrainConfig:
    return TrainConfig.model_validate({"candidates": ["small_cnn", "deep_cnn"], "epochs": 4, "search": search})


def test_a_grid_from_before_the_study_gives_the_same_trials_in_the_same_order():
    # The names and order today's files meant (candidate × learning rate × batch size).
    old = cfg(learning_rates=[0.01, 0.001], batch_per_replica=[16, 32])
    assert [t.name for t in expand(old)] == [
        "small_cnn@lr=0.01,bs=16", "small_cnn@lr=0.01,bs=32", "small_cnn@lr=0.001,bs=16", "small_cnn@lr=0.001,bs=32",
        "deep_cnn@lr=0.01,bs=16", "deep_cnn@lr=0.01,bs=32", "deep_cnn@lr=0.001,bs=16", "deep_cnn@lr=0.001,bs=32"]
    assert [t.name for t in expand(cfg())] == ["small_cnn", "deep_cnn"]
    assert not old.search.uses_study and not cfg().search.uses_study


def test_a_candidates_own_hyperparameters_extend_its_grid_points():
    points = space.grid(cfg(hyperparameters={"small_cnn": {"width": [32, 64], "dropout": [0.0, 0.25]}}))
    assert [p["name"] for p in points[:4]] == ["small_cnn@lr=0.001,bs=32,width=32,dropout=0",
                                               "small_cnn@lr=0.001,bs=32,width=32,dropout=0.25",
                                               "small_cnn@lr=0.001,bs=32,width=64,dropout=0",
                                               "small_cnn@lr=0.001,bs=32,width=64,dropout=0.25"]
    assert points[4] == {"candidate": "deep_cnn", "name": "deep_cnn@lr=0.001,bs=32",
                         "values": {"learning_rate": 0.001, "batch_per_replica": 32}}


@pytest.mark.parametrize("search, field, says", [
    ({"learning_rate": {"log_uniform": [1e-4, 1e-1]}}, "search.learning_rate", "sampler: random or tpe"),
    ({"learning_rates": [0.1, 0.01], "trials": 5}, "search.trials", "at most 4"),
    ({"sampler": "tpe"}, "search.trials", "number of trials"),
    ({"sampler": "random", "trials": 3, "min_epochs": 5, "max_epochs": 3}, "search.min_epochs", "min_epochs ≤ max_epochs"),
    ({"sampler": "random", "trials": 3, "pruner": "asha", "min_epochs": 9}, "search.min_epochs", "min_epochs ≤ epochs"),
    ({"hyperparameters": {"small_cnn": {"depth": [2, 3]}}}, "search.hyperparameters.small_cnn.depth", "width, dropout"),
    ({"hyperparameters": {"vgg16": {"dropout": [0.1]}}}, "search.hyperparameters.vgg16", "one of small_cnn, deep_cnn"),
    ({"learning_rate": [0.1], "learning_rates": [0.2]}, "search.learning_rate", "one of them"),
])
def test_what_cannot_be_searched_names_its_field(search, field, says):
    found = space.problems(cfg(**search))
    assert any(p.path == field and says in p.expected for p in found), [(p.path, p.expected) for p in found]


def test_a_search_that_can_run_has_no_problem():
    assert space.problems(cfg(sampler="tpe", trials=20, learning_rate={"log_uniform": [1e-4, 1e-1]},
                              batch_per_replica={"log_integer": [16, 64]}, pruner="hyperband", min_epochs=1,
                              hyperparameters={"small_cnn": {"width": {"log_integer": [16, 128]}}})) == []


def test_the_builtin_builders_take_exactly_the_hyperparameters_validate_allows():
    import ast
    import inspect
    from pathlib import Path
    source = (Path(inspect.getsourcefile(space)).parent.parent / "train" / "models.py").read_text()
    taken = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef) and node.name in ("small_cnn", "deep_cnn", "build"):
            taken[node.name] = tuple(a.arg for a in node.args.args[3:])
    assert taken["small_cnn"] == space.BUILTIN_HYPERPARAMETERS["small_cnn"]
    assert taken["deep_cnn"] == space.BUILTIN_HYPERPARAMETERS["deep_cnn"]
    assert taken["build"] == space.BUILTIN_HYPERPARAMETERS["vgg16"] == space.BUILTIN_HYPERPARAMETERS["resnet50"]


def test_a_grid_too_large_to_hold_is_refused_without_trials_and_sized_without_being_built():
    import time
    from trainer.spec import space
    from trainer.spec.config import TrainConfig
    lists = {f"a{i}": list(range(10)) for i in range(10)}
    cfg = TrainConfig.model_validate({"candidates": ["my_models:wide"], "search": {"hyperparameters": {"my_models:wide": lists}}})
    started = time.monotonic()
    assert space.grid_size(cfg) == 10 ** 10 and space.space_size(cfg) == 10 ** 10
    found = [p for p in space.problems(cfg) if p.loc == ("search", "trials")]
    assert found and "10,000,000,000 combinations" in found[0].received and time.monotonic() - started < 5   # computed, not enumerated (that would take hours)
    with_trials = cfg.model_copy(update={"search": cfg.search.model_copy(update={"trials": 5})})
    assert not [p for p in space.problems(with_trials) if p.loc == ("search", "trials")]
    assert space.grid_point(with_trials, 10 ** 10 - 1)["values"]["a9"] == 9


@pytest.mark.parametrize("search, field, says", [
    ({"learning_rates": [0.01, 0.001, 0.01]}, "search.learning_rates", "Received 0.01 twice"),
    ({"learning_rates": [0.001, 0.0010000001]}, "search.learning_rates",
     "Received 0.001 and 0.0010000001, which name one trial's files (learning_rate=0.001)"),
    ({"learning_rate": [0.5, 0.5]}, "search.learning_rate", "Received 0.5 twice"),
    ({"batch_per_replica": [16, 32, 16]}, "search.batch_per_replica", "Received 16 twice"),
    ({"hyperparameters": {"small_cnn": {"width": [32, 64, 32]}}}, "search.hyperparameters.small_cnn.width",
     "Received 32 twice"),
    ({"sampler": "tpe", "trials": 3, "hyperparameters": {"small_cnn": {"dropout": [0.1, 0.1]}}},
     "search.hyperparameters.small_cnn.dropout", "Received 0.1 twice"),
])
def test_a_value_written_twice_is_refused_naming_the_field_and_the_value(search, field, says):
    # Several trials with one name once wrote one history file and one TensorBoard run.
    found = [p for p in space.problems(cfg(**search)) if p.path == field]
    assert found and says in found[0].received and found[0].expected.startswith("each value once"), \
        space.problems(cfg(**search))


def test_builder_names_and_words_that_become_one_file_are_refused():
    def problems(**doc):
        return [p.line("train.yaml") for p in space.problems(TrainConfig.model_validate(doc))]
    (line,) = problems(candidates=["a.b:c_d", "a.b_c:d"])
    assert line.startswith("train.yaml: candidates: Received 'a.b:c_d' and 'a.b_c:d', which name one file "
                           "(history/a.b_c_d.csv)")
    (line,) = problems(candidates=["m:Net", "m:net"])          # one file on macOS and Windows
    assert "where case is ignored" in line
    (line,) = problems(candidates=["m:b"], search={"hyperparameters": {"m:b": {"act": ["Relu", "relu"]}}})
    assert "Received 'Relu' and 'relu', which name one trial's files (act=relu)" in line
    assert problems(candidates=["m:b", "m:c"], search={"hyperparameters": {"m:b": {"act": ["relu", "gelu"]}}}) == []
    names = [p["name"] for p in space.grid(cfg(learning_rates=[0.1, 0.01], batch_per_replica=[8, 16],
                                               hyperparameters={"small_cnn": {"width": [8, 16]}}))]
    from trainer.spec.results import safe_name
    assert len({safe_name(n).lower() for n in names}) == len(names) == 12
