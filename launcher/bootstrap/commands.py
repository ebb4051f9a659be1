"""Every command `tfcompose bootstrap` runs on a host, built here and only here (as
docker_commands.py is for Docker). Each returns an argv list (the Connection joins it with
shlex.quote); values go in as positional parameters of `sh -c` or as lines of the plan file,
never spliced into a script's text.

The installation itself is one fixed root script (APPLY) that reads what to do from a plan file
(`plan_text`), runs detached from the SSH session (setsid, its output in
/var/log/tfcompose-bootstrap/run.log, its exit status in …/status), and is followed from here by
reading that log. So a link lost mid-install does not cut apt off half-way: the installation ends
on the host, and the next `tfcompose bootstrap` sees it (facts.py: `running`) and follows it, or
finds its work done. Ctrl-C here likewise leaves it to finish.

Never removed: apt runs with --no-remove. Never half-written: a key or an apt source is written
beside its final name and renamed; a source this run added is taken away again if the run fails.
"""
from __future__ import annotations

import re
from typing import Optional, Sequence

from launcher.bootstrap.facts import STATE_DIR
from launcher.bootstrap.probe import PROBE

LOG_READ = 64 << 10          # what one look at the install's log reads at most


def probe(workdir: str, data_dir: str, peer: str = "") -> list[str]:
    """What the host is (probe.PROBE); `peer`: an address whose route names the cluster's interface."""
    return ["sh", "-c", PROBE, "sh", workdir, data_dir, STATE_DIR, peer]


def dpkg_status() -> list[str]:
    """The host's dpkg database (what it has installed): apt on this machine resolves against it."""
    return ["cat", "/var/lib/dpkg/status"]


def sudo(argv: Sequence[str], with_password: bool) -> list[str]:
    """argv as root: `sudo -n` (never waits for a password), or `sudo -S` reading the password from
    stdin (never from the command line, with no prompt printed)."""
    return ["sudo", "-S", "-p", "", "--", *argv] if with_password else ["sudo", "-n", "--", *argv]


def check_password() -> list[str]:
    return ["sudo", "-S", "-p", "", "-k", "--", "true"]


# --- the installation: started detached, followed through its log ---------------------------------

START = r"""
state=$1; script=$2; plan=$3
mkdir -p -m 0755 "$state" && chmod 0755 "$state" && cd / || exit 1
p=$(cat "$state/pid" 2>/dev/null)
if [ -n "$p" ] && grep -q tfcompose-bootstrap "/proc/$p/cmdline" 2>/dev/null; then echo "running $p"; exit 0; fi
rm -f "$state/added"
[ -f "$state/run.log" ] && mv -f "$state/run.log" "$state/previous.log"
rm -f "$state/status"; : > "$state/run.log"; chmod 0644 "$state/run.log"
setsid sh -c "$script" tfcompose-bootstrap "$plan" "$state" </dev/null >>"$state/run.log" 2>&1 &
echo $! > "$state/pid"; echo started
"""


def start_apply(plan_path: str, with_password: bool) -> list[str]:
    return sudo(["sh", "-c", START, "sh", STATE_DIR, APPLY, plan_path], with_password)


def look(offset: int, state: str = STATE_DIR) -> list[str]:
    """The installation's exit status (empty while it runs), whether its process lives, the log's
    size, then the log from byte `offset` on: at most LOG_READ bytes, and never past that size (so
    the next look starts exactly where this one stopped, whatever the bytes are)."""
    script = ('s=$(head -c 16 "$1/status" 2>/dev/null); echo "status=$s"; p=$(head -c 16 "$1/pid" 2>/dev/null); '
              'if [ -n "$p" ] && [ -d "/proc/$p" ]; then echo alive=yes; else echo alive=no; fi; '
              'n=$(stat -c %s "$1/run.log" 2>/dev/null || echo 0); echo "size=$n"; echo ---; '
              'k=$((n - $2)); [ "$k" -gt "$3" ] && k=$3; [ "$k" -gt 0 ] && tail -c "+$(($2 + 1))" "$1/run.log" | head -c "$k"; true')
    return ["sh", "-c", script, "sh", state, str(int(offset)), str(LOG_READ)]


# The root script. $1: the plan file, $2: the state folder. Phases in host_plan.ORDER's order; each
# says `TFC-STEP <kind> …` when it begins, `TFC-WAIT …` while it waits and `TFC-FAIL <why>` when it
# fails; the exit status lands in $2/status.
APPLY = r"""
set -u
PLAN=$1; STATE=$2
umask 022
export DEBIAN_FRONTEND=noninteractive LC_ALL=C PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
finish() {
  s=$?
  if [ "$s" != 0 ]; then for f in $(cat "$STATE/added" 2>/dev/null); do rm -f "$f"; done; fi
  rm -f "$STATE/added"; echo "$s" > "$STATE/status"
}
trap finish EXIT
trap 'exit 143' TERM HUP INT
get() { awk -v k="$1" '$1 == k {sub(/^[^ ]+ ?/, ""); print; exit}' "$PLAN"; }
all() { awk -v k="$1" '$1 == k {sub(/^[^ ]+ ?/, ""); print}' "$PLAN"; }
has() { grep -q "^$1\( \|\$\)" "$PLAN"; }
fail() { echo "TFC-FAIL $*"; exit 1; }
USER_=$(get user); STAGE=$(get stage); WAIT=$(get lock_wait); OFFLINE=$(get offline)
APT="apt-get -q -y -o DPkg::Lock::Timeout=$WAIT -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold"
holders() {
  for f in /var/lib/dpkg/lock-frontend /var/lib/dpkg/lock /var/lib/apt/lists/lock /var/cache/apt/archives/lock; do
    [ -e "$f" ] || continue
    d=$(stat -c %D "$f") && i=$(stat -c %i "$f") || continue
    want=$(printf '%02x:%02x:%s' $((0x$d >> 8)) $((0x$d & 255)) "$i")
    p=$(awk -v w="$want" '$2 != "->" && $6 == w {print $5; exit}' /proc/locks)
    [ -n "$p" ] && { echo "$(cat "/proc/$p/comm" 2>/dev/null) (pid $p) holds $f"; return; }
  done
}
wait_apt() {
  end=$(( $(date +%s) + ${WAIT%.*} )); said=""
  while h=$(holders) && [ -n "$h" ]; do
    [ "$h" != "$said" ] && { echo "TFC-WAIT apt's lock: $h"; said=$h; }
    [ "$(date +%s)" -ge "$end" ] && fail "apt's lock is still held after ${WAIT%.*} s: $h"
    sleep 2
  done
}
engine_up() {
  i=0; while [ $i -lt 60 ]; do docker info >/dev/null 2>&1 && return 0; i=$((i + 1)); sleep 1; done
  fail "Docker did not answer within 60 s of its start: $(docker info 2>&1 | tail -n 1)"
}
installed() { dpkg-query -W -f='${db:Status-Abbrev}' "$1" 2>/dev/null | grep -q '^ii'; }
local_repo() {  # $1: a folder; the plan's .debs, checked, as a flat apt repository there
  mkdir -p "$1/repo" && : > "$1/repo/Packages"
  all deb | while read -r sum name; do
    [ -f "$STAGE/debs/$name" ] || fail "the shipped $name is missing from $STAGE/debs"
    printf '%s  %s\n' "$sum" "$STAGE/debs/$name" | sha256sum -c --quiet - || fail "the shipped $name is damaged"
    ln -sf "$STAGE/debs/$name" "$1/repo/$name"
    { dpkg-deb -f "$STAGE/debs/$name"; echo "Filename: ./$name"; echo "Size: $(stat -c %s "$STAGE/debs/$name")"
      echo "SHA256: $sum"; echo; } >> "$1/repo/Packages"
  done || exit 1
  echo "deb [trusted=yes] file:$1/repo ./" > "$1/parts/tfcompose-local.list"
}

if has finish_dpkg; then
  echo "TFC-STEP finish-dpkg dpkg --configure -a"; wait_apt
  dpkg --configure -a || fail "dpkg --configure -a failed: the host's package database needs a hand (sudo dpkg --configure -a)"
fi

if has repo; then
  echo "TFC-STEP repository $(all repo | cut -d' ' -f1 | tr '\n' ' ')"; wait_apt
  if ! installed ca-certificates; then
    $APT update && $APT install --no-install-recommends --no-remove ca-certificates || fail "installing ca-certificates failed"
  fi
  install -d -m 0755 /etc/apt/keyrings
  all repo | while read -r name key source; do
    for pair in "$STAGE/keys/$key /etc/apt/keyrings/tfcompose-$name.asc" "$STAGE/keys/$source /etc/apt/sources.list.d/tfcompose-$name.sources"; do
      set -- $pair
      [ -e "$2" ] || echo "$2" >> "$STATE/added"
      install -m 0644 -o root -g root "$1" "$2.tfc-tmp" && mv -f "$2.tfc-tmp" "$2" || fail "could not write $2"
    done
  done || exit 1
fi

NAMES=$(all install | tr '\n' ' ')
if [ -n "$(echo $NAMES)" ]; then
  echo "TFC-STEP install $NAMES"
  work=$(mktemp -d /var/tmp/tfcompose-apt.XXXXXX); mkdir -p "$work/parts" "$work/lists/partial"
  O=""
  if [ "$OFFLINE" = 1 ]; then
    local_repo "$work"
    O="-o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts=$work/parts -o Dir::State::Lists=$work/lists -o APT::Sandbox::User=root"
    $APT $O update || fail "apt could not read the shipped packages"
  else
    wait_apt
    $APT update || fail "apt-get update failed (is the mirror reachable from the host?)"
    if has next; then
      get next | { read -r suite names; mirror=$(get mirror)
        mkdir -p "$work/next/lists/partial" "$work/next/parts" "$STAGE/debs"
        printf 'Types: deb\nURIs: %s\nSuites: %s\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
          "$mirror" "$suite" > "$work/next/parts/next.sources"
        N="-o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts=$work/next/parts -o Dir::State::Lists=$work/next/lists"
        $APT $N update || fail "could not read Debian $suite's package index from $mirror"
        cd "$work/next" && apt-get -q $N -o APT::Sandbox::User=root download $names || fail "could not download $names from $suite"
        for f in "$work/next"/*.deb; do echo "deb $(sha256sum "$f" | cut -d' ' -f1) $(basename "$f")" >> "$PLAN"; mv -f "$f" "$STAGE/debs/"; done
      } || exit 1
      cd /
    fi
    if has deb; then
      for f in /etc/apt/sources.list.d/*; do [ -e "$f" ] && ln -s "$f" "$work/parts/"; done
      local_repo "$work"
      O="-o Dir::Etc::SourceParts=$work/parts -o APT::Sandbox::User=root"
      $APT $O update || fail "apt-get update failed"
    fi
  fi
  wait_apt
  $APT $O install --no-install-recommends --no-remove $NAMES || fail "apt-get install $NAMES failed (nothing was removed)"
  rm -rf "$work"
fi

if has start; then
  echo "TFC-STEP start docker"
  systemctl enable --now docker || fail "could not enable and start Docker (systemctl enable --now docker)"
  engine_up
fi

if has group; then
  echo "TFC-STEP group $USER_"
  getent group docker >/dev/null || groupadd --system docker || fail "could not make the docker group"
  usermod -aG docker "$USER_" || fail "could not add $USER_ to the docker group"
fi

all folder | while read -r path; do
  echo "TFC-STEP folders $path"
  [ -e "$path" ] || { mkdir -p "$path" && chown "$USER_:$(id -gn "$USER_")" "$path"; } || fail "could not make $path"
done || exit 1

if has nvidia_runtime; then
  echo "TFC-STEP nvidia-runtime nvidia-ctk runtime configure --runtime=docker"
  nvidia-ctk runtime configure --runtime=docker || fail "nvidia-ctk runtime configure --runtime=docker failed"
  systemctl restart docker || fail "could not restart Docker after giving it the nvidia runtime"
  engine_up
fi

if has gpu_check; then
  echo "TFC-STEP gpu-check"
  smi=$(command -v nvidia-smi) || fail "nvidia-smi is missing"
  root=$(mktemp -d /var/tmp/tfcompose-gpu.XXXXXX)
  mkdir -p "$root/usr/bin" "$root/etc" "$root/tmp" "$root/proc" "$root/sys" "$root/dev"
  cp -L /etc/ld.so.conf "$root/etc/" 2>/dev/null; cp -rL /etc/ld.so.conf.d "$root/etc/" 2>/dev/null
  for l in $(ldd "$smi" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}'); do
    mkdir -p "$root$(dirname "$l")" && cp -L "$l" "$root$l"
  done
  tag=tfcompose-gpu-check:$$
  (cd "$root" && tar -c .) | docker import - "$tag" >/dev/null || fail "could not make the GPU check's image"
  n=$(docker run --rm --gpus all --network none "$tag" nvidia-smi -L 2>&1 | grep -c '^GPU ')
  docker rmi "$tag" >/dev/null 2>&1; rm -rf "$root"
  [ "$n" -ge 1 ] || fail "a container given --gpus all sees no GPU: check /etc/docker/daemon.json's nvidia runtime"
  echo "TFC-GPUS $n"
fi
echo "TFC-DONE"
"""


# --- the plan file: what APPLY does, one directive a line --------------------------------------

SAFE = re.compile(r"^[A-Za-z0-9._+~:/@%=,-]{1,512}$")     # every value in the plan (no space, no newline)


class Unsafe(ValueError):
    """A value that cannot go into the plan file as it is (names and paths are checked first)."""


def _value(text: str) -> str:
    if not SAFE.fullmatch(text):
        raise Unsafe(f"{text!r} is not a plain name or path")
    return text


def plan_text(*, user: str, stage: str, lock_wait_s: float, offline: bool, mirror: str = "",
              finish_dpkg: bool = False, repositories: Sequence[tuple[str, str, str]] = (),
              next_release: Optional[tuple[str, Sequence[str]]] = None, install: Sequence[str] = (),
              debs: Sequence[tuple[str, str]] = (), start: bool = False, group: bool = False,
              folders: Sequence[str] = (), nvidia_runtime: bool = False, gpu_check: bool = False) -> str:
    """The plan file APPLY reads. repositories: (name, key file, source file) inside the stage's
    keys/; debs: (sha256, file name) inside its debs/."""
    lines = [f"user {_value(user)}", f"stage {_value(stage)}", f"lock_wait {int(lock_wait_s)}",
             f"offline {1 if offline else 0}"]
    lines += [f"mirror {_value(mirror)}"] if mirror else []
    lines += ["finish_dpkg"] if finish_dpkg else []
    lines += [f"repo {_value(n)} {_value(k)} {_value(s)}" for n, k, s in repositories]
    if next_release:
        lines.append(f"next {_value(next_release[0])} " + " ".join(_value(n) for n in next_release[1]))
    lines += [f"install {_value(name)}" for name in install]
    lines += [f"deb {_value(sha)} {_value(name)}" for sha, name in debs]
    lines += ["start"] if start else []
    lines += ["group"] if group else []
    lines += [f"folder {_value(path)}" for path in folders]
    lines += ["nvidia_runtime"] if nvidia_runtime else []
    lines += ["gpu_check"] if gpu_check else []
    return "\n".join(lines) + "\n"


# --- files in the stage folder (the SSH user's own) ---------------------------------------------

def prepare_stage(stage: str) -> list[str]:
    """The stage folder (keys/, debs/) made, private to the SSH user."""
    return ["sh", "-c", 'mkdir -p "$1/keys" "$1/debs" && chmod 700 "$1"', "sh", stage]


def debs_present(stage: str, names: Sequence[str]) -> list[str]:
    """For each of these files: `<sha256>  <name>` when the stage holds it whole, `part <bytes>
    <name>` when a cut transfer left part of it (sent on from there)."""
    script = ('cd "$1/debs" 2>/dev/null || exit 0; shift; for f in "$@"; do '
              'if [ -f "$f" ]; then sha256sum -- "$f"; elif [ -f ".$f.part" ]; then echo "part $(stat -c %s ".$f.part") $f"; fi; '
              'done; true')
    return ["sh", "-c", script, "sh", stage, *names]


def receive_deb(stage: str, name: str, sha256: str, offset: int) -> list[str]:
    """One .deb from stdin, appended to its `.part` from `offset` on (0: from the start); renamed to
    its name only once it is whole and its SHA-256 is the one expected (else the part is dropped)."""
    script = ('set -e; cd "$1/debs"; part=".$2.part"; [ "$4" -gt 0 ] || : > "$part"; '
              '[ "$(stat -c %s "$part")" = "$4" ] || { echo "the part of $2 here is not $4 bytes" >&2; rm -f "$part"; exit 3; }; '
              'cat >> "$part"; '
              'if printf "%s  %s\n" "$3" "$part" | sha256sum -c --quiet - >/dev/null 2>&1; then mv -f "$part" "$2"; '
              'else rm -f "$part"; echo "$2 arrived damaged (SHA-256 differs)" >&2; exit 4; fi')
    return ["sh", "-c", script, "sh", stage, _value(name), _value(sha256), str(int(offset))]
