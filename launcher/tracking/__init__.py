"""Experiment tracking (MLflow), done by the launcher: the hosts never reach the tracker.

- `secrets.py`: what of the tracker's settings is secret, and text and environments without it;
- `mapping.py`: results.json and progress documents → what the parent run and each trial's child
  run hold (pure: no MLflow);
- `client.py`: MLflow's client with every call bounded in time, its errors said without secrets;
- `outbox.py`: the live part, while `up --wait` or `watch` polls: epochs kept and sent in the
  background, never holding the poll up, a warning when the tracker does not answer;
- `source.py`: the run as the tracker sees it, from the plan or from a run folder (with the
  params tracking.json kept), and which tracker `track` sends it to;
- `upload.py`: a collected run made whole on the tracker (at collect, or `tfcompose track`),
  idempotently: what is there already is not sent again;
- `ledger.py`: tracking.json in the run folder, what was sent where (no secret in it).
"""
