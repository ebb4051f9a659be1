"""The cluster: TensorFlow's MultiWorkerMirroredStrategy formed, held together and fed. Imports the
spec only.

    tfconfig.py        TF_CONFIG read and checked
    rank.py            TF_CONFIG from a scheduler's variables (Kubernetes, Slurm): the image's entrypoint runs it
    strategy.py        which strategy to build; MWMS built under the watchdog
    watchdog.py        the join deadline (peers that never came, named), and a worker leaving after its chief
    collectives.py     small all-gathers: every worker takes the same decision at the same step
    allreduce.py       `allreduce:`: float32 every step, or compressed when the link is slow
    allreduce_step.py  the compressed step itself (TensorFlow, imported once training is under way)
"""
