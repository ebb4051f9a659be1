"""Leases: a cluster's claim on a shared host (its GPUs, its ports) and the queue for it, so that two
users of one box never start on the same GPUs (docs/sharing-hosts.md).

    take.py    the stage's side: take every host's lease (or a place in its queue), all or nothing;
               give it back
    on_host.py host.sh's commands on one host: session, look, change, release
    status.py  what a host holds, as `status` shows it
    rules.py   who may take what: clashes, live or stale, queue order (pure)
    files.py   the lease and queue files' one owner: written, read back and checked (pure)
    look.py    the host's answer to `look` read, and the fingerprint `change` checks (pure)
    host.sh    what runs on the host: read, lock, write and rename the files, nothing decided there
"""
