"""Every command the launcher runs on a host's Docker engine, built here and only here (after
SkyPilot's provision/docker_utils.py). Each returns an argv list; the Connection quotes it.
Values go in as positional parameters of `sh -c`, never spliced into the script text.
"""
from __future__ import annotations

from pathlib import Path

LABEL_CLUSTER, LABEL_HOST, LABEL_RUN = "tfcompose.cluster", "tfcompose.host", "tfcompose.run"

# The ids of one host's containers of one cluster, any state, into $ids.
_OWN_IDS = 'ids=$(docker ps -aq --filter "label=tfcompose.cluster=$1" --filter "label=tfcompose.host=$2"); '


def inspect_cluster_containers(cluster: str, host: str) -> list[str]:
    """`docker inspect` (a JSON list) of this host's containers of the cluster; `[]` if none."""
    return ["sh", "-c", _OWN_IDS + 'if [ -n "$ids" ]; then docker inspect $ids; else echo "[]"; fi',
            "sh", cluster, host]


def remove_cluster_containers(cluster: str, host: str, keep: bool = False) -> list[str]:
    """Kill (MWMS ignores SIGTERM) and remove this host's containers of the cluster; prints how many.
    keep=True kills but keeps them, so their logs can still be collected. A paused container
    refuses to be killed: it is unpaused first."""
    action = "docker kill $ids >/dev/null 2>&1" if keep else "docker rm -f $ids >/dev/null"
    return ["sh", "-c", _OWN_IDS + f'if [ -n "$ids" ]; then docker unpause $ids >/dev/null 2>&1; {action}; '
            'echo $ids | wc -w; else echo 0; fi', "sh", cluster, host]


def tfcompose_containers() -> list[str]:
    """Every tfcompose container on the host's engine, whoever started it: `cluster|host|status`
    per line (the leases: a lease whose containers are gone is stale). `.Status` and not `.State`,
    which older engines' `docker ps` lack."""
    return ["docker", "ps", "-a", "--filter", f"label={LABEL_CLUSTER}", "--format",
            f'{{{{.Label "{LABEL_CLUSTER}"}}}}|{{{{.Label "{LABEL_HOST}"}}}}|{{{{.Status}}}}']


def remove_project_networks(project: str) -> list[str]:
    return ["sh", "-c", 'nets=$(docker network ls -q --filter "label=com.docker.compose.project=$1"); '
            '[ -z "$nets" ] || docker network rm $nets >/dev/null 2>&1 || true', "sh", project]


def container_logs(container: str, tail: int | None = None, follow: bool = False, since: str | None = None) -> list[str]:
    """The container's stdout and stderr as one stream."""
    flags = (["--tail", str(tail)] if tail is not None else []) + (["--follow"] if follow else []) \
        + (["--since", since] if since else [])
    return ["sh", "-c", 'docker logs "$@" 2>&1', "sh", *flags, container]


def compose_up(bundle_dir: str, project: str, recreate: bool = False) -> list[str]:
    """Start the host's container; `recreate`: a new one in place of a stopped one (a resumed run)."""
    return ["docker", "compose", "--project-directory", bundle_dir, "-f", f"{bundle_dir}/compose.yaml",
            "-p", project, "up", "-d", "--pull", "never", "--no-build", *(["--force-recreate"] if recreate else [])]


def image_id(image: str) -> list[str]:
    return ["docker", "image", "inspect", "--format", "{{.Id}}", image]


def load_gzipped_archive() -> list[str]:
    """`docker load` of a gzip stream on stdin."""
    return ["sh", "-c", "gunzip -c | docker load"]


def pull(image: str) -> list[str]:
    return ["docker", "pull", "--quiet", image]


def build(base: str, tag: str, context: Path | str) -> list[str]:
    """BuildKit build of the trainer image; no network inside the build (see fetch_wheels)."""
    context = Path(context)
    return ["docker", "buildx", "build", "--load", "-f", str(context / "docker" / "Dockerfile"),
            "--build-arg", f"BASE_IMAGE={base}", "-t", tag, str(context)]


def fetch_wheels(base: str, context: Path | str) -> list[str]:
    return ["bash", str(Path(context) / "docker" / "fetch-wheels.sh"), base]


# Facts about a host, one `key=value` per line: Docker, compose, GPUs, port, workdir, disk, data, clock.
HOST_PROBE = r"""
workdir=$1 data_dir=$2 tf_port=$3 cluster=$4 host=$5 peer=$6
say() { printf '%s=%s\n' "$1" "$2"; }
if out=$(docker info --format '{{json .Runtimes}}' 2>&1); then say docker ok; say runtimes "$out"
else say docker "$(printf '%s' "$out" | tail -n 1)"; fi
say compose "$(docker compose version --short 2>/dev/null || echo missing)"
say gpu_count "$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)"
say own_running "$(docker ps -q --filter "label=tfcompose.cluster=$cluster" --filter "label=tfcompose.host=$host" 2>/dev/null | wc -l)"
if [ -z "$tf_port" ]; then say port_busy 0
elif command -v ss >/dev/null 2>&1; then say port_busy "$(ss -Hltn "sport = :$tf_port" | wc -l)"; else say port_busy unknown; fi
# Writable is what a file made there says (root's `[ -w ]` is true on a full or read-only disk),
# and why not is the system's own words: a unique name, so two probes at once never meet.
if why=$(mkdir -p -- "$workdir" 2>&1) && why=$(mktemp "${workdir%/}/.tfcompose-probe.XXXXXX" 2>&1); then
  rm -f -- "$why"; say workdir ok
else say workdir "$(printf '%s' "$why" | tail -n 1 | tr -d '\r' | cut -c 1-200)"; fi
say free_kb "$(df -Pk "$workdir" 2>/dev/null | awk 'NR==2 {print $4}')"
if [ -n "$data_dir" ]; then if [ -d "$data_dir" ]; then say data_dir ok; else say data_dir missing; fi; fi
bundle="${workdir%/}/$cluster"
if [ -e "$bundle/.tfcompose-cluster" ] || [ -e "$bundle/.tfcompose-bundle" ]; then say bundle ours
elif [ -d "$bundle" ] && [ -n "$(ls -A "$bundle" 2>/dev/null)" ]; then say bundle foreign
elif [ -e "$bundle" ] && [ ! -d "$bundle" ]; then say bundle foreign; else say bundle none; fi
say uid "$(id -u):$(id -g)"
# The host's current run (launcher/runs.py): its id and configuration, whether it finished, its container.
if [ -f "$bundle/.tfcompose-run" ]; then
  run=$(sed -n 's/^run=//p' "$bundle/.tfcompose-run" | head -n 1 | head -c 64)
  config=$(sed -n 's/^config=//p' "$bundle/.tfcompose-run" | head -n 1 | head -c 64)
  case "$run$config" in *[!0-9a-z-]*) run= config= ;; esac
  if [ -n "$run" ]; then
    say run "$run"; say run_config "$config"
    if [ -e "$bundle/runs/$run/finished" ] || [ -e "$bundle/runs/$run/results/results.json" ]; then say run_finished 1; else say run_finished 0; fi
    say run_state "$(docker ps -a --filter "label=tfcompose.cluster=$cluster" --filter "label=tfcompose.host=$host" --filter "label=tfcompose.run=$run" --format '{{.Status}}' 2>/dev/null | head -n 1 | head -c 100)"
  fi
fi
if [ -n "$peer" ] && command -v ip >/dev/null 2>&1; then
  case "$peer" in *[!0-9a-fA-F.:]*) peer=$(getent hosts "$peer" 2>/dev/null | awk '{print $1; exit}');; esac
  say route "$(ip -o route get "$peer" 2>/dev/null | head -n 1)"
fi
say clock "$(date +%s.%N)"
say end ok
"""


def host_probe(workdir: str, data_dir: str, tf_port, cluster: str, host: str, peer: str = "") -> list[str]:
    """Facts about a host (HOST_PROBE); `tf_port`: the port its container will listen on, or ""."""
    return ["sh", "-c", HOST_PROBE, "tfcompose-preflight", workdir, data_dir, str(tf_port), cluster, host, peer]


def port_listening(port: int) -> list[str]:
    """How many sockets listen on the port (TensorFlow's, for `run:` programs)."""
    return ["sh", "-c", 'ss -Hltn "sport = :$1" | wc -l', "sh", str(port)]


# --- the links probe (links.py): python3 on the host, else python3 in the trainer image ----------
_PY = ('if command -v python3 >/dev/null 2>&1; then py() { exec python3 "$@"; }; '
       'else py() { exec docker run --rm -i --network host --entrypoint python3 "$image" "$@"; }; fi; ')
_PROBE_FILES = 'f="${TMPDIR:-/tmp}/tfcompose-links-$(id -u)-$name"; '


def probe_listen(name: str, image: str, script: str, port: int, seconds: float, read_s: float, cap: int) -> list[str]:
    """A listener on the port, in the background for `seconds`; prints `bound` once it listens.
    Each connection gets the name, then what the peer sends is counted (≤ read_s, ≤ 2 × cap bytes)."""
    return ["sh", "-c", 'name=$1 image=$2; ' + _PY + _PROBE_FILES +
            'py -c "$3" "$4" "$5" "$1" "$6" "$7" < /dev/null > "$f.out" 2>&1 & echo $! > "$f.pid"; '
            'for i in $(seq 100); do grep -q bound "$f.out" 2>/dev/null && break; '
            'kill -0 $! 2>/dev/null || break; sleep 0.1; done; '
            'if grep -q bound "$f.out"; then echo bound; else tail -n 3 "$f.out" >&2; exit 1; fi',
            "sh", name, image, script, str(port), f"{seconds:g}", f"{read_s:g}", str(cap)]


def probe_connect(image: str, script: str, timeout: float, targets: list[str], send_s: float, cap: int,
                  budget_s: float) -> list[str]:
    """Connect to each `name|address|port`, then send to each open one in turn for ≤ send_s or ≤ cap
    bytes (≤ budget_s in all); prints JSON {"reach": name → 'open' or why not, "mbit_s": name → rate}."""
    return ["sh", "-c", 'image=$1; ' + _PY + 'shift; py -c "$@"', "sh", image, script, f"{timeout:g}",
            f"{send_s:g}", str(cap), f"{budget_s:g}", *targets]


def probe_stop(name: str) -> list[str]:
    return ["sh", "-c", 'name=$1; ' + _PROBE_FILES + '[ -f "$f.pid" ] && kill "$(cat "$f.pid")" 2>/dev/null; '
            'rm -f "$f.pid" "$f.out"; true', "sh", name]


def read_progress_files(results: str) -> list[str]:
    """Each worker's progress-<task>.json in the run's results folder, one per line (bounded), then
    the chief queue's search-progress.json after a line `#search` (trainer/spec/progress.py)."""
    return ["sh", "-c", 'for f in "$1"/progress-*.json; do [ -f "$f" ] && head -c 16384 "$f" && echo; done; '
            'if [ -f "$1/search-progress.json" ]; then echo "#search"; head -c 65536 "$1/search-progress.json"; echo; fi; true',
            "sh", results]


def mark_finished(run_dir: str) -> list[str]:
    """The run ended well (its chief exited 0): the next `up` starts a new run instead of resuming it."""
    return ["sh", "-c", '[ -d "$1" ] && : > "$1/finished"; true', "sh", run_dir]


def signal_lost(signals: str, host: str, why: str) -> list[str]:
    """Tell the chief's trial queue that `host` is gone (trainer/search/coordinator.py reads signals/)."""
    return ["sh", "-c", 'mkdir -p "$1" && printf "%s" "$3" > "$1/.$2.tmp" && mv -f "$1/.$2.tmp" "$1/$2.lost"',
            "sh", signals, host, why]


def image_survey(image: str) -> list[str]:
    """First line: the image's ID on the host (empty when absent); second: the engine's storage
    driver status (JSON); then one JSON list of layer diff IDs per image the engine holds (each
    prefix of such a list is a layer chain it has)."""
    return ["sh", "-c", "docker image inspect --format '{{.Id}}' \"$1\" 2>/dev/null || echo; "
            "docker info --format '{{json .DriverStatus}}'; "
            'ids=$(docker image ls -aq --no-trunc | sort -u); '
            "[ -z \"$ids\" ] || docker image inspect --format '{{json .RootFS.Layers}}' $ids", "sh", image]


# --- the dataset (dataset.py): manifests by python3 on the host or in the trainer image; the sync
# itself needs only sh, tar, mv, rm and find. Paths arrive on stdin, one per line, relative to the
# data_dir (the launcher's own walk of its source: no control characters, no `..`).
def dataset_manifest(data_dir: str, cache_file: str, image: str, script: str) -> list[str]:
    """The data_dir's manifest as JSON (dataset_digest.py); `{"missing": true, …}` without one."""
    return ["sh", "-c", 'data=$1 cache=$2 image=$3 script=$4; '
            'if [ ! -d "$data" ]; then echo \'{"missing":true,"files":{},"other":[],"empty_dirs":[],"unreadable":[]}\'; exit 0; fi; '
            'mkdir -p "$(dirname "$cache")"; '
            'if command -v python3 >/dev/null 2>&1; then exec python3 -c "$script" "$data" "$cache"; fi; '
            'exec docker run --rm --pull never --network none -v "$data:/data:ro" -v "$(dirname "$cache"):/cache" '
            '--entrypoint python3 "$image" -c "$script" /data "/cache/$(basename "$cache")"',
            "sh", data_dir, cache_file, image, script]


# A marked folder's marker: its inode and text read from one open file (never the inode of one
# file and the text of the next), again a moment later if that read fails (a host on NFS, another
# host of the cluster looking at the same folder at the same moment): only a marker read whole is
# judged, and one that cannot be read says so (`kind=unreadable`), not "foreign".
_MARKER_READ = ('marker() { i=$(stat -L -c %i /dev/fd/3) && t=$(head -c 1024 <&3 | tr -d "\\n\\r") && [ -n "$i" ]; }; '
                'for try in 1 2 3; do if { marker; } 3< "$m" 2>/dev/null; then echo kind=marked; echo "inode=$i"; '
                'printf "marker=%s\\n" "$t"; exit 0; fi; sleep 0.3; done; '
                'echo kind=unreadable; echo "why=$(head -c 1 "$m" 2>&1 >/dev/null | tail -n 1 | cut -c 1-200)"; ')


def dataset_look(data_dir: str) -> list[str]:
    """What the data_dir is, read only: `kind=` absent, empty, symlink, notdir, foreign (files and
    no marker), marked (with its marker's inode and first KB of text) or unreadable (a marker that
    could not be read, and why)."""
    return ["sh", "-c", 'd=$1 m="$1/.tfcompose-dataset"; '
            'if [ -L "$d" ]; then echo kind=symlink; elif [ ! -e "$d" ]; then echo kind=absent; '
            'elif [ ! -d "$d" ]; then echo kind=notdir; elif [ -z "$(ls -A "$d")" ]; then echo kind=empty; '
            'elif [ -f "$m" ] && [ ! -L "$m" ]; then ' + _MARKER_READ + 'else echo kind=foreign; fi', "sh", data_dir]


def dataset_claim(data_dir: str, marker: str) -> list[str]:
    """Make the data_dir tfcompose's: only while it is absent or empty (or already carries this
    very marker: a folder another host of the cluster shares, claimed a moment ago). Prints the
    marker's inode; status 3 and why otherwise."""
    return ["sh", "-c", 'd=$1 m="$1/.tfcompose-dataset"; [ -L "$d" ] && { echo "$d is a symbolic link" >&2; exit 3; }; '
            'mkdir -p "$d" || exit 3; '
            'if [ -f "$m" ] && [ "$(head -c 1024 "$m")" = "$2" ]; then :; '
            'elif [ -z "$(ls -A "$d")" ]; then t=$(mktemp "$m.XXXXXX") && printf "%s" "$2" > "$t" && chmod 644 "$t" '
            '&& mv -f "$t" "$m" || { rm -f "$t"; exit 3; }; '
            'else echo "$d is no longer empty" >&2; exit 3; fi; stat -c %i "$m"', "sh", data_dir, marker]


def dataset_clear_parts(data_dir: str) -> list[str]:
    """Half-arrived files of a cut sync go (only in a data_dir that is tfcompose's)."""
    return ["find", data_dir, "-name", "*.tfcompose-part", "-type", "f", "-delete"]


def dataset_remove(data_dir: str) -> list[str]:
    """Each path on stdin removed (a file, or a link itself)."""
    return ["sh", "-c", 'cd "$1" || exit 1; while IFS= read -r f; do rm -f -- "./$f" || exit 1; done', "sh", data_dir]


def dataset_prune(data_dir: str) -> list[str]:
    """Folders with nothing in them go (an empty class folder is refused in the source too)."""
    return ["find", data_dir, "-mindepth", "1", "-type", "d", "-empty", "-delete"]


def dataset_extract(data_dir: str) -> list[str]:
    """A tar on stdin into the data_dir, owned by the SSH user (-o)."""
    return ["tar", "-x", "-o", "-f", "-", "-C", data_dir]


def dataset_rename(data_dir: str) -> list[str]:
    """Each arrived `<path>.tfcompose-part` to its final name."""
    return ["sh", "-c", 'cd "$1" || exit 1; while IFS= read -r f; do mv -f -- "./$f.tfcompose-part" "./$f" || exit 1; done',
            "sh", data_dir]


# --- TensorBoard next to a host's container (stages/tensorboard.py) ------------------------------
LABEL_TENSORBOARD, LABEL_KEEPER = "tfcompose.tensorboard", "tfcompose.keeper"
KEEPER_PREFIX = "tfcompose-tb-"

# Runs TensorBoard from the cluster's image on the host's loopback (a port the kernel picks), with
# the results folder read-only, and lives exactly as long as the launcher holds it: the launcher
# writes "." on its stdin every few seconds and the keeper answers each with an ACK byte (so each
# side knows the other is there). Stdin closed (Ctrl-C, or the launcher killed: the SSH session
# ends), silent for $silence_s seconds (the network lost) or its answer undeliverable (SIGPIPE) ends
# the loop, and the EXIT trap removes the container. Prints `url=…` once TensorBoard answers, then
# why it ended (`ended` and TensorBoard's last words, `gone`, `slow`), then `removed` once it is gone.
# Every docker call is bounded: a wedged engine cannot hold the keeper.
TENSORBOARD_KEEPER = r"""
cluster=$1 host=$2 tag=$3 image=$4 results=$5 logdir=$6 start_s=$7 silence_s=$8
cid=$(timeout 60 docker run -d --pull never --network host --user "$(id -u):$(id -g)" --read-only --tmpfs /tmp \
  --label "tfcompose.tensorboard=$cluster" --label "tfcompose.host=$host" --label "tfcompose.keeper=$tag" \
  --mount "type=bind,src=$results,dst=/results,readonly" -e TF_CPP_MIN_LOG_LEVEL=2 --entrypoint python3 \
  "$image" -m tensorboard.main --logdir "$logdir" --host 127.0.0.1 --port 0) || exit 3
gone() { if timeout 20 docker rm -f "$cid" >/dev/null 2>&1; then echo removed; else echo "not removed"; fi; }
trap gone EXIT; trap 'exit 129' HUP; trap 'exit 130' INT; trap 'exit 141' PIPE; trap 'exit 143' TERM
said() { timeout 10 docker logs --tail 20 "$cid" 2>&1 | tail -c 2000; }
running() {
  state=$(timeout 10 docker inspect -f '{{.State.Running}}' "$cid" 2>/dev/null) || { echo gone; exit 4; }
  [ "$state" = true ] || { echo ended; said; exit 4; }
}
i=0
while running; do
  url=$(timeout 10 docker logs "$cid" 2>&1 | grep -o 'http://127\.0\.0\.1:[0-9]*/' | head -n 1)
  [ -n "$url" ] && break
  i=$((i + 1)); [ "$i" -le $((start_s * 4)) ] || { echo slow; said; exit 5; }
  sleep 0.25
done
echo "url=$url"
while [ "$(timeout "$silence_s" head -c 1)" = . ]; do running; printf '\006'; done
"""


def tensorboard_keeper(cluster: str, host: str, tag: str, image: str, results: str, logdir: str,
                       start_s: int, silence_s: int) -> list[str]:
    """TensorBoard over the host's `results` folder (mounted at /results; `logdir` inside it),
    kept while the launcher holds the command (TENSORBOARD_KEEPER)."""
    return ["sh", "-c", TENSORBOARD_KEEPER, "tfcompose-tensorboard", cluster, host, tag, image, results, logdir,
            str(int(start_s)), str(int(silence_s))]


def remove_tensorboards(cluster: str, host: str, which: str = "all") -> list[str]:
    """Remove this host's TensorBoard containers of the cluster and print how many: `all`, only
    `orphans` (their keeper is no longer running: its launcher's session ended without the clean-up,
    e.g. the keeper itself was killed), or the one kept by the keeper tag `which`."""
    return ["sh", "-c", 'n=0; for c in $(docker ps -aq --filter "label=tfcompose.tensorboard=$1" '
            '--filter "label=tfcompose.host=$2"); do '
            'tag=$(docker inspect -f \'{{index .Config.Labels "tfcompose.keeper"}}\' "$c" 2>/dev/null); '
            'case "$3" in all) ;; orphans) command -v pgrep >/dev/null 2>&1 || continue; '
            'case "${tag#' + KEEPER_PREFIX + '}" in "$tag"|""|*[!0-9a-f]*) ;; '
            '*) pgrep -f "$tag" >/dev/null 2>&1 && continue;; esac;; '
            '*) [ "$tag" = "$3" ] || continue;; esac; '
            'docker rm -f "$c" >/dev/null 2>&1 && n=$((n + 1)); done; echo "$n"', "sh", cluster, host, which]
