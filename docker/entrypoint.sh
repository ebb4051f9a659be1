#!/bin/sh
# Run the command as the owner of the results folder, so users can delete what it writes.
# The owner is TFC_OWNER (uid:gid) or, failing that, the owner of the results folder's parent
# (the simulation mounts the repository's runs/ there).
set -eu
results=${TFC_RESULTS_DIR:-/results}
owner=${TFC_OWNER:-$(stat -c %u:%g "$(dirname "$results")" 2>/dev/null || echo 0:0)}
if [ "$(id -u)" = 0 ] && [ "$owner" != "0:0" ]; then
  mkdir -p "$results"
  chown "$owner" "$results"
  export HOME=/tmp
  exec setpriv --reuid="${owner%%:*}" --regid="${owner##*:}" --clear-groups "$@"
fi
exec "$@"
