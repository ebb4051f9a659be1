"""Hardware telemetry: every host's GPUs, container CPU and memory, network and swap, sampled over
the SSH connection tfcompose holds while `up --wait` and `watch` run (README: "Is the hardware
busy?").

    command.py   the sampler each host runs (sh, nothing installed), built with shlex quoting
    samples.py   what a sample is (pure data)
    parse.py     the sampler's output read under bounds: hostile input, type-checked (pure)
    rules.py     the warnings: idle GPU, input-bound, straggler, swapping (pure)
    figures.py   per-trial GPU-hours, utilisation, energy, CPU-hours (pure)
    csvfile.py   telemetry/<host>.csv: the one owner of the format
    spools.py    what a session appends while it samples, merged into the CSV
    live.py      one line per host, and the leaderboard's columns (pure)
    session.py   one sampler per host for the life of the wait loop, and the judge thread
    sampler.py   one host's sampler: its command, its parser, restarted or left when it ends
    observer.py  the wait loop's reporter meanwhile: passes all on, learns who trains (pure)
    once.py      `status`: one short sampler run per host
    assemble.py  at collect: the CSVs merged, each trial's figures into results.json
"""
