"""What TensorBoard's HParams dashboard would show of a run: each session's values, read from the
event files as TensorBoard reads them (shared by the search and runs integration tests)."""
from __future__ import annotations

from pathlib import Path


def hparams_sessions(folder: Path, pattern: str = "*/events.out.tfevents.*") -> dict[str, dict]:
    """Every HParams session (a trial in the dashboard) under `folder` matching `pattern`: its values,
    by the name of the folder holding its event file."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    from tensorboard.plugins.hparams import plugin_data_pb2
    found = {}
    for events in Path(folder).glob(pattern):
        for event in EventFileLoader(str(events)).Load():
            for value in event.summary.value:
                if value.tag == "_hparams_/session_start_info":
                    info = plugin_data_pb2.HParamsPluginData.FromString(value.metadata.plugin_data.content).session_start_info
                    found[events.parent.name] = {k: v.number_value or v.string_value for k, v in info.hparams.items()}
    return found
