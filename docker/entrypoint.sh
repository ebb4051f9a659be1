#!/bin/sh
# Run the command as the owner of the results folder, so users can delete what it writes, under
# trainer/runner.py: tf.keras as tf_keras for your own program too (unless its environment sets
# TF_USE_LEGACY_KERAS), its own error line said when it fails, and not started again after it
# failed twice alike at its start (a restart would only repeat a deterministic exception).
# The owner is TFC_OWNER (uid:gid), else the owner of TFC_OWNER_OF (a cluster host's pushed
# train.yaml, owned by the SSH user), else of the results folder's parent (the simulation
# mounts the repository's runs/ there).
set -eu
# Under Kubernetes or Slurm, with no TF_CONFIG given: build it from the scheduler's variables
# (trainer/cluster/rank.py), for `run:` scripts as for the trainer.
if [ -z "${TF_CONFIG:-}" ]; then
  exports=$(python3 -m trainer.cluster.rank) || exit 2
  eval "$exports"
fi
results=${TFC_RESULTS_DIR:-/results}
owner_of=${TFC_OWNER_OF:-$(dirname "$results")}
owner=${TFC_OWNER:-$(stat -c %u:%g "$owner_of" 2>/dev/null || echo 0:0)}
if [ "$(id -u)" = 0 ] && [ "$owner" != "0:0" ]; then
  mkdir -p "$results"
  chown "$owner" "$results"
  export HOME=/tmp
  exec setpriv --reuid="${owner%%:*}" --regid="${owner##*:}" --clear-groups python3 -m trainer.runner "$@"
fi
exec python3 -m trainer.runner "$@"
