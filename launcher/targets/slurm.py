"""The cluster as one Slurm batch job (`tfcompose render --target slurm`): tfcompose.sbatch, and
train.yaml beside it for the built-in trainer.

One task per node runs the image with the node's container runtime: Apptainer (or Singularity),
enroot through pyxis (srun's own container options), or Docker (`docker run --network host` on
each node's engine). Each task learns its rank from SLURM_PROCID and its peers from
SLURM_JOB_NODELIST (trainer/cluster/rank.py, through the image's entrypoint); no TF_CONFIG is written.

Two things Slurm does that the script must allow for:
- it opens `#SBATCH --output` before the script runs, so a path inside a results folder that does
  not exist yet fails the job at launch (JobLaunchFailure, 0:53): the output starts in the submit
  folder and moves to the results folder once the script has made it;
- scancel signals the step's processes, not a container the Docker engine runs: MWMS ignores
  SIGTERM and would train on, so each task names its container after the job and step and removes
  it when it is signalled.
"""
from __future__ import annotations

import shlex

from launcher.plan import Plan
from launcher.targets.common import CONFIG, gpus_each, program, required, task_env, train_yaml

SCRIPT = "tfcompose.sbatch"
# What the rank shim reads in the container (docker passes only what it is told to).
SLURM_VARIABLES = ("SLURM_PROCID", "SLURM_NTASKS", "SLURM_JOB_NODELIST", "SLURM_JOB_ID", "SLURM_STEP_ID")

SBATCH = """#!/bin/bash
# tfcompose cluster {cluster} (run {run}) as one Slurm job: {nodes} node(s), one task each.
# Rendered by `tfcompose render --target slurm`. Submit from this folder: sbatch {script}
# Each task learns its rank from SLURM_PROCID and its peers from SLURM_JOB_NODELIST (no TF_CONFIG).
#SBATCH --job-name=tfcompose-{cluster}
#SBATCH --nodes={nodes}
#SBATCH --ntasks-per-node=1
#SBATCH --time={time}
# Slurm opens this file before the script runs, so not in the results folder, which may not exist
# yet: the output starts in the submit folder and continues in the results folder below.
#SBATCH --output=slurm-%j.out
{extra_sbatch}set -euo pipefail
export {exports}
results={results}
here=${{SLURM_SUBMIT_DIR:-$(pwd)}}
{submit_dir_check}mkdir -p "$results"
log="$results/slurm-${{SLURM_JOB_ID:-local}}.out"
echo "tfcompose: the output continues in $log"
exec >>"$log" 2>&1
{launch}"""

# apptainer's --bind and pyxis's --container-mounts separate mounts with ',' and source from
# target with ':'; docker's -v the same with ':'. A submit folder holding one would mount the wrong thing.
SUBMIT_DIR_CHECK = """case $here in
  *[,:]*) echo "tfcompose: the submit folder $here holds ',' or ':', which {runtime} cannot mount: submit from a folder without them." >&2
          exit 2 ;;
esac
"""

DOCKER_TASK = """# One task: this node's container, named after the job and step, removed when the step ends or
# is cancelled (MWMS ignores SIGTERM: a container left to itself would train on after scancel).
read -r -d '' task <<'TASK' || true
name="tfcompose-$TFC_CLUSTER-$SLURM_JOB_ID-$SLURM_STEP_ID-$SLURM_PROCID"
remove() {{ docker rm -f "$name" >/dev/null 2>&1 || true; }}
{gpus}# Signalled: remove the container, wait for `docker run` to end, and remove once more (a
# container created while the first removal ran). Ending any other way: remove it too.
trap 'remove; wait; remove; exit 143' TERM
trap 'remove; wait; remove; exit 130' INT
trap remove EXIT
docker run --rm --name "$name" --label tfcompose.cluster="$TFC_CLUSTER" --label tfcompose.run="$TFC_RUN_ID" \\
  --label tfcompose.slurm-job="$SLURM_JOB_ID" --network host --user "$(id -u):$(id -g)" -e HOME=/tmp \\
  {env} \\
  {options} "${{gpus[@]}}" --entrypoint tfcompose-entrypoint "$@" &
wait $!
TASK
# The task's arguments: the mounts (expanded here, on the batch node), the image, the command.
srun --ntasks-per-node=1 bash -c "$task" tfcompose-task {mounts} \\
  {image} {command}
"""

# Docker wants the GPU ids of this step on this node: Slurm names them in SLURM_STEP_GPUS
# (CUDA_VISIBLE_DEVICES where its gres plugin sets only that).
DOCKER_GPUS = """devices=${SLURM_STEP_GPUS:-${CUDA_VISIBLE_DEVICES:-}}
if [[ ! $devices =~ ^[A-Za-z0-9,-]+$ ]]; then
  echo "tfcompose: $(hostname): no GPUs in this step's allocation (SLURM_STEP_GPUS and CUDA_VISIBLE_DEVICES are empty)." >&2
  exit 2
fi
gpus=(--gpus "\\"device=$devices\\"")
"""


def slurm_files(plan: Plan) -> dict[str, str]:
    s = plan.cluster.spec.slurm
    results = required(plan, "slurm", "results_dir", "a folder on the shared filesystem for the results")
    command, extra, inside = program(plan)
    gpus = gpus_each(plan, "slurm", "gpus_per_node")
    env = {**task_env(plan, inside, gpus), **extra}
    binds = [('"$results"', inside)] + ([(shlex.quote(s.data_dir), "/data:ro")] if s.data_dir else [])
    config = [] if plan.cluster.spec.run else [('"$here/train.yaml"', f"{CONFIG}:ro")]
    extra_sbatch = (f"#SBATCH --gpus-per-node={gpus}\n" if gpus else "") + \
        (f"#SBATCH --partition={s.partition}\n" if s.partition else "")
    script = SBATCH.format(
        cluster=plan.cluster.name, run=plan.run, nodes=len(plan.cluster.hosts), script=SCRIPT,
        time=s.time_limit, extra_sbatch=extra_sbatch, exports=" ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()),
        results=shlex.quote(results), submit_dir_check=SUBMIT_DIR_CHECK.format(runtime=s.runtime) if config else "",
        launch=launch(plan, s.runtime, binds + config, gpus, list(env), command))
    files = {SCRIPT: script}
    text = train_yaml(plan)
    if text is not None:
        files["train.yaml"] = text
    return files


def launch(plan: Plan, runtime: str, mounts: list[tuple[str, str]], gpus: int, env: list[str],
           command: list[str]) -> str:
    """The srun line that starts one task per node, each running `command` through the image's entrypoint."""
    if runtime == "docker":
        return docker_task(plan, mounts, gpus, env, command)
    joined = ",".join(f"{a}:{b}" for a, b in mounts)
    if runtime == "enroot":   # pyxis: srun's own container options
        runner = f"--container-mounts={joined} --container-image {plan.container_image}"
    else:
        runner = "apptainer exec " + ("--nv " if gpus else "") + f"--bind {joined} docker://{plan.container_image}"
    return f"srun --ntasks-per-node=1 {runner} tfcompose-entrypoint {shlex.join(command)}\n"


def docker_task(plan: Plan, mounts: list[tuple[str, str]], gpus: int, env: list[str], command: list[str]) -> str:
    shm = plan.cluster.spec.defaults.shm_size
    # NCCL keeps buffers in /dev/shm and wants these limits on GPU nodes, as the compose service has.
    options = ["--ipc", "host"] if shm == "host" else ["--shm-size", shm]
    if gpus:
        options += ["--ulimit", "memlock=-1", "--ulimit", "stack=67108864"]
    return DOCKER_TASK.format(
        gpus=DOCKER_GPUS if gpus else "gpus=()\n", env=env_options([*env, *SLURM_VARIABLES]),
        options=shlex.join(options), mounts=" ".join(f"-v {a}:{b}" for a, b in mounts),
        image=shlex.quote(plan.container_image), command=shlex.join(command))


def env_options(names: list[str], per_line: int = 6) -> str:
    """`-e NAME` for each variable (docker passes its value through), a few to a line."""
    lines = [" ".join(f"-e {name}" for name in names[i:i + per_line]) for i in range(0, len(names), per_line)]
    return " \\\n  ".join(lines)
