"""The dataset: every host trains on the same files, checked before anything trains.

    source.py   the dataset on this machine (`dataset_source`): can it be copied exactly
    digest.py   a folder's manifest (path, size, SHA-256 of every file); the same script runs on the hosts
    claims.py   which data_dirs are tfcompose's to fill (the sync deletes only there)
    sync.py     the stage: manifests compared, what differs sent
"""
