"""The trainer image onto every host, without a registry when need be (the image stage).

    stage.py       the stage: ship, pull or build on each host
    local.py       this machine's engine: the image built, its ID, what `up` ships of it
    on_host.py     what one host's engine holds (one survey per `up`)
    ship.py        only the layers a host lacks, to one host
    layers.py      layer-delta archives: split from a `docker save`, cached, assembled
    code_layer.py  your `run.code_dir` as one layer, made without Docker
    relay.py       the layers sent once, each host passing them on (relay_host.sh runs on the hops)
    hop_check.py   what a relay hop lets through to `docker load`: only the image this `up` ships
"""
