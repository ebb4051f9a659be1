"""Bare Debian and Ubuntu boxes made ready for tfcompose (`tfcompose bootstrap`), and a starter
inventory asked of the hosts (`tfcompose init`). Read facts once, decide in pure code, build the
commands apart; only stage.py and init.py reach a host.

    facts.py         what a host is: the probe's answer parsed into a frozen type
    probe.py         the probe: one POSIX shell script, run as the SSH user, that changes nothing
    apt_sources.py   what a host's apt sources say: its archive, every repository they name
    decide.py        what to do to one host, from its facts alone (pure)
    host_plan.py     a host's plan as data: what is wanted, the steps and their order, the plan
    driver.py        the NVIDIA driver judged from the facts, each problem with its fix (pure)
    commands.py      every command bootstrap runs on a host, and the root script that installs
    repositories.py  Docker's and NVIDIA's apt repositories and their signing keys
    offline.py       the .deb files an offline host lacks, resolved and cached on this machine
    ship_debs.py     those .deb files sent to the host, only what it lacks, a cut transfer resumed
    stage.py         `tfcompose bootstrap` over the Group: decide, ship, install, judge again
    follow.py        the installation on a host followed to its end through its log
    starter.py       `init`'s decisions from the facts (pure); init.py asks the hosts
"""
