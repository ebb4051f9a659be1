"""tfcompose's launcher: what runs on your machine (docs/architecture.md draws the whole of it).

    cli.py            parses, prints and exits; view.py is how it shows things
    stages/           the steps of `up` (up.py composes them) and the commands beside it
    inventory/        the YAML read, validated and resolved into one model, once
    plan.py           every fact the stages act on, made from the inventory and what the hosts said
    ssh/              the transport: one connection per host, a group, fan-out, transfers, tunnels
    image/            the trainer image onto every host: layer deltas, relays, your code as a layer
    dataset/          every host's data checked against the source, synced with dataset_source
    leases/           a cluster's claim on a shared host, and the queue for it
    targets/          the same plan as a Kubernetes JobSet or a Slurm job
    containers.py     a cluster's containers on a host, as Docker says and checked
    host_facts.py     what preflight's probe says of a host, read once into a frozen type
    telemetry/        the hardware while it trains: samplers, warnings, per-trial figures
    tracking/         the run and its trials in MLflow
    report/           report.md and its pictures, `runs`, `compare`
    bootstrap/        bare boxes made ready (`bootstrap`), and a starter inventory (`init`)
    runs.py           which run an `up` starts or resumes, and where a run lives on a host
    runfiles.py       the one way into a run folder's files; files.py the cache and atomic writes
    docker_commands.py  every Docker command run on a host; reporter.py how stages say progress
    errors.py, text.py, interrupts.py   the error family, what a host said made safe, Ctrl-C held
    __main__.py       `python -m launcher ARGS`: the CLI, for a process without the venv's scripts on PATH
"""
