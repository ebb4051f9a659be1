"""The spec: what the trainer and the launcher share. No TensorFlow, no network, nothing that runs
a cluster; the launcher imports the trainer only from here (an import-linter contract says so).

    config.py        the trainer's settings (train.yaml, TFC_TRAIN_*, flags): the schema
    overrides.py     the config file read, and the flags' and TFC_TRAIN_* overrides laid over it
    elastic_run.py   an elastic run's record: the batch policy, its re-forms (written by `up`)
    validation.py    pydantic's errors as one line each (the inventory's too)
    yamlfile.py      YAML read under bounds (size, depth, aliases)
    space.py         the search space: its dimensions, its grid, its rules
    load.py          a configuration loaded whole: the file, the overrides, the schema, the space's rules
    trials.py        a trial (candidate × values) and a grid's list of them
    results.py       results.json: its one owner (writer, reader, the rule for the best)
    results_check.py results.json checked: every key a reader uses, a host's figures
    trial_record.py  one trial's record (its entry in results.json): the typed value, its JSON
    progress.py      progress-*.json and search-progress.json: what the live view reads
    history.py       a trial's history CSV read back (its validation curve)
    errors.py        the error family and its exit codes (the launcher's errors are of it)
    keys.py          the parallel search's run and host keys (the launcher writes them)
    model_files.py   the MLflow model folder's names (the trainer writes it, the launcher logs it)
    runner_lines.py  the image's runner's failure lines, said and read back
"""
