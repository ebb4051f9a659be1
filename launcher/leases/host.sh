# tfcompose leases: what the launcher runs on a host to take, wait for and give back leases
# (take.py sends this text as `sh -c <this> sh <what> <folder> <args>`; every value is an
# argument, never spliced in). The launcher decides; this script only reads, locks and writes.
#
#   session DIR SID       make DIR if it is absent (by root: mode 1777, every user of the host
#                         writes there and nobody removes another's file; by another user: theirs
#                         alone, 0755), check that nobody but root and this user can remove or
#                         rename what is in it or above it, then hold SID's session: print `held`
#                         and keep its lock while stdin brings the launcher's heartbeat (a `.`
#                         every few seconds): until it ends, which is when the launcher's SSH
#                         connection ends, however the launcher ended, or stays silent for
#                         SESSION_SILENCE_S (the connection was cut off, and sshd cannot tell);
#                         the file goes with it
#   look DIR              this user, the host's clock, every lease, ticket and tombstone (name,
#                         owner, first 8 KB in base64) and every session, alive or dead; or, past
#                         MAX_FILES of either, `crowded` and how many (never a part that could
#                         hide a lease)
#   change DIR PRINT NAME...  under DIR's lock: unless the listed files but NAME... still have the
#                         fingerprint PRINT (SHA-256 of `look`'s entry lines; - for any), exit 4 and
#                         change nothing; else apply stdin's lines, each `write NAME BASE64`
#                         (written beside, then renamed) or `remove NAME` (only a file this user
#                         owns). NAME...: the files this change itself writes or removes, for all
#                         the hosts of one `up`, which may share this folder
#   release DIR CLUSTER HOST   remove this user's lease of CLUSTER on HOST
#
# Status 3: the folder cannot be used (why on stderr); 4: the files changed since `look`;
# 5: the folder stayed locked too long.
set -u
export LC_ALL=C
umask 022
what=$1 dir=$2
shift 2
LOCK_WAIT_S=30
SESSION_SILENCE_S=${TFC_SESSION_SILENCE_S:-30}   # the launcher beats every ssh/connection.HOLD_BEAT_S (5 s)
MAX_FILES=512
HINT="every user of this host must be able to write there (its owner can run \`chmod 1777\` on it), or set lease_dir in the inventory"
SHARED="ask root to make it root's: sudo chown root:root $dir && sudo chmod 1777 $dir (or set lease_dir to a folder of your own: then only your runs see each other)"

fail() {
  echo "$1" >&2
  exit "${2:-3}"
}

usable() {  # the folder is a real folder (not a link) this user can write in
  [ -L "$dir" ] && fail "the lease folder $dir is a symbolic link (set lease_dir to the folder itself)"
  if [ ! -e "$dir" ]; then
    why=$(made 2>&1) || [ -d "$dir" ] || fail "cannot make the lease folder $dir: $why; $HINT"
  fi
  [ -d "$dir" ] || fail "the lease folder $dir is not a folder; $HINT"
  secure
  [ -w "$dir" ] && [ -x "$dir" ] \
    || fail "cannot write in the lease folder $dir (owner $(stat -c %U -- "$dir"), mode $(stat -c %a -- "$dir")); $HINT"
  command -v flock >/dev/null 2>&1 || fail "flock (util-linux) is missing on this host"
}

made() {  # a new lease folder: everyone's (1777) when root makes it, else this user's alone
  if [ "$(id -u)" = 0 ]; then mkdir -p -m 1777 -- "$dir"; else mkdir -p -m 0755 -- "$dir"; fi
}

secure() {  # nobody but root and this user can remove or rename what is in the folder, or above it
  me=$(id -u)
  p=$(cd -P -- "$dir" 2>/dev/null && pwd -P) || fail "cannot enter the lease folder $dir; $HINT"
  what="the lease folder $dir"
  while :; do
    info=$(stat -c '%u %a %U' -- "$p" 2>/dev/null) || fail "cannot look at $p (above the lease folder $dir)"
    set -- $info
    m=$((0$2))
    if [ "$1" != 0 ] && [ "$1" != "$me" ]; then
      [ "$what" = "the lease folder $dir" ] \
        && fail "the lease folder $dir belongs to $3 (mode $2): $3 could remove or replace anyone's lease in it; $SHARED"
      fail "$what belongs to $3 (mode $2): $3 could move the lease folder away; set lease_dir to a folder under one only root owns, such as /var/tmp"
    fi
    if [ $((m & 022)) -ne 0 ] && [ $((m & 01000)) -eq 0 ]; then
      fail "$what is writable by others but not sticky (owner $3, mode $2): anyone could remove or rename what is in it; its owner can run \`chmod +t $p\` (as /tmp is: 1777)"
    fi
    [ "$p" = / ] && break
    p=${p%/*}
    [ -n "$p" ] || p=/
    what="$p, above the lease folder $dir,"
  done
}

crowded() {  # KIND PATTERN: how many such files, and whose most of them are (never a part of them)
  n=$(ls -A -- "$dir" 2>/dev/null | grep -c -E "$2")
  top=$(cd -- "$dir" && ls -A | grep -E "$2" | head -n 4096 | tr '\n' '\0' | xargs -0 stat -c %U -- 2>/dev/null \
        | sort | uniq -c | sort -rn | head -n 1 | tr -c '0-9A-Za-z_.@ \n-' '?')
  echo "crowded $1 $n ${top:-0 ?}"
}

entries() (  # every lease, ticket and tombstone, one line each, in name order; all of them or none
  # Past MAX_FILES the answer would outgrow what the launcher reads: then none is listed, and the
  # launcher refuses the host (a listing cut short could leave out the very lease in the way).
  if [ "$(ls -A -- "$dir" 2>/dev/null | grep -c -E '[.](lease|ticket|broken)$')" -gt "$MAX_FILES" ]; then
    crowded lease '[.](lease|ticket|broken)$'
    exit 0
  fi
  set --
  for f in "$dir"/*.lease "$dir"/*.ticket "$dir"/*.broken; do
    [ -f "$f" ] && [ ! -L "$f" ] || continue
    name=${f##*/}
    case $name in *[!A-Za-z0-9._-]*|.*) continue ;; esac
    if [ "$#" -ge "$MAX_FILES" ]; then crowded lease '[.](lease|ticket|broken)$'; exit 0; fi
    set -- "$@" "$name"
  done
  [ "$#" -gt 0 ] && cd "$dir" || exit 0
  # One `stat` for every owner; the names in plain ASCII: these lines are compared byte for byte
  # (`printed`). A file swapped for a FIFO after the test above holds the answer until the
  # command's own time limit (ssh.command_timeout_s) ends it.
  stat -c '%n %u %U' -- "$@" 2>/dev/null | tr -c '0-9A-Za-z_.@ \n-' '?' | while read -r name uid owner; do
    printf 'entry %s %s %s ' "$name" "$uid" "$owner"
    head -c 8192 -- "$name" 2>/dev/null | base64 | tr -d '\n'
    echo
  done
)

sessions() {  # each session alive (its launcher holds the lock) or dead; past MAX_FILES, `crowded`
  if [ "$(ls -A -- "$dir" 2>/dev/null | grep -c -E '[.]session$')" -gt "$MAX_FILES" ]; then
    crowded session '[.]session$'
    return 0
  fi
  n=0
  for f in "$dir"/*.session; do
    [ -f "$f" ] && [ ! -L "$f" ] && [ -r "$f" ] || continue
    sid=${f##*/}
    sid=${sid%.session}
    case $sid in *[!0-9a-f]*|'') continue ;; esac
    n=$((n + 1))
    if [ "$n" -gt "$MAX_FILES" ]; then crowded session '[.]session$'; return 0; fi
    # A shared lock is refused while the session's launcher holds its exclusive one.
    if { flock -n -s 8; } 8<"$f" 2>/dev/null; then echo "session $sid dead"; else echo "session $sid alive"; fi
  done
}

printed() {  # the fingerprint of the listed files, those named in the arguments left out
  entries | awk -v skip=" $* " 'index(skip, " " $2 " ") == 0' | sha256sum | cut -c 1-64
}

look() {
  echo "user $(id -u) $(id -un 2>/dev/null || echo '?')"
  echo "now $(date +%s)"
  echo "clock $(date +%s%3N 2>/dev/null)"     # ms, where date knows %N: the queue's order
  if [ ! -d "$dir" ] || [ -L "$dir" ]; then echo "dir absent"; exit 0; fi
  exec 7<"$dir"
  flock -w "$LOCK_WAIT_S" -s 7 || fail "the lease folder $dir stayed locked for $LOCK_WAIT_S s" 5
  entries
  sessions
}

check_name() {
  case $1 in *[!A-Za-z0-9._-]*|.*|'') fail "not a lease file name: $1" 2 ;; esac
  case $1 in *.lease|*.ticket|*.broken|*.session) ;; *) fail "not a lease file name: $1" 2 ;; esac
}

change() {
  want=$1
  shift
  usable
  exec 7<"$dir"
  flock -w "$LOCK_WAIT_S" -x 7 || fail "the lease folder $dir stayed locked for $LOCK_WAIT_S s" 5
  if [ "$want" != - ] && [ "$(printed "$@")" != "$want" ]; then
    echo changed
    exit 4
  fi
  while read -r op name data; do
    check_name "$name"
    case $op in
      write)
        at="$dir/$name"
        if [ -L "$at" ] || { [ -e "$at" ] && [ ! -f "$at" ]; }; then
          fail "$at is not a file (owner $(stat -c %U -- "$at" 2>/dev/null || echo '?')) but must be this lease's: only its owner or root can remove it; or set lease_dir"
        fi
        t=$(mktemp "$dir/.tfc-XXXXXXXX") || fail "cannot write in the lease folder $dir"
        if ! { printf '%s' "$data" | base64 -d > "$t" && chmod 644 "$t" && why=$(mv -f -- "$t" "$at" 2>&1); }; then
          rm -f -- "$t"
          fail "cannot write $at (owner $(stat -c %U -- "$at" 2>/dev/null || echo '?')): ${why:-disk full?}"
        fi
        # A folder made at the name meanwhile would have taken the file inside it: never go on
        # holding nothing. (The folder's lock binds tfcompose only, not another account.)
        if [ -L "$at" ] || [ ! -f "$at" ] || [ ! -O "$at" ]; then
          rm -f -- "$at/${t##*/}" 2>/dev/null
          fail "$at is not a file (owner $(stat -c %U -- "$at" 2>/dev/null || echo '?')) but must be this lease's: only its owner or root can remove it; or set lease_dir"
        fi ;;
      remove)
        if [ -O "$dir/$name" ] && [ ! -L "$dir/$name" ]; then rm -f -- "$dir/$name"; fi ;;
      *) fail "unknown change $op" 2 ;;
    esac
  done
  echo done
}

session() {
  sid=$1
  case $sid in *[!0-9a-f]*|'') fail "not a session id: $sid" 2 ;; esac
  usable
  f="$dir/$sid.session"
  (set -C && : > "$f") 2>/dev/null || fail "cannot make $f"
  chmod 644 "$f"
  exec 9<"$f"
  flock -x 9
  echo held
  # The lock is this shell's alone (9<&-): `timeout` runs dd in a process group of its own, which a
  # kill of the session's group misses, and which held the lock until its timeout or stdin's end.
  while beat=$(timeout "$SESSION_SILENCE_S" dd bs=1 count=1 2>/dev/null 9<&-) && [ -n "$beat" ]; do :; done
  rm -f -- "$f"
}

release() {
  for name in "$1" "$2"; do
    case $name in *[!a-z0-9-]*|'') fail "not a cluster or host name: $name" 2 ;; esac
  done
  [ -d "$dir" ] && [ ! -L "$dir" ] || { echo released 0; exit 0; }
  exec 7<"$dir"
  flock -w "$LOCK_WAIT_S" -x 7 || fail "the lease folder $dir stayed locked for $LOCK_WAIT_S s" 5
  f="$dir/$1.$2.$(id -u).lease"
  if [ -O "$f" ] && [ ! -L "$f" ]; then rm -f -- "$f" && echo released 1; else echo released 0; fi
}

case $what in
  session) session "$@" ;;
  look) look ;;
  change) change "$@" ;;
  release) release "$@" ;;
  *) fail "host.sh: unknown $what" 2 ;;
esac
