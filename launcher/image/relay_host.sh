# tfcompose relay: what the launcher runs on a host around a relayed ship (relay.py sends this
# text as `sh -c <this> sh <what> <args>`; every value is an argument, never spliced in).
#
#   add-key LINE                 add LINE to the SSH user's authorized_keys
#   remove-keys MARK             remove every authorized_keys line holding MARK; print how many are left
#   clean PARENT PREFIX CLUSTER  end and remove this cluster's relay folders PARENT/PREFIX*
#
# authorized_keys is never edited in place: the new content is written to a file beside it,
# checked to hold exactly the lines it must, then renamed over it. A full disk or a folder that
# cannot be written leaves the file as it was (status 3 and why on stderr), never emptied or cut.
# A link is followed: the new file goes beside its target. Status 3 also refuses a key that could
# not be removed again later (~/.ssh not writable).
set -u
umask 077
f="$HOME/.ssh/authorized_keys"
t=""

fail() {
  [ -z "$t" ] || rm -f -- "$t"
  echo "$1; $f is left as it was" >&2
  exit 3
}

lines() {  # lines in a file, the last one counted even without its newline
  grep -c '' "$1" 2>/dev/null || true
}

beside() {  # a new file next to the real authorized_keys
  mkdir -p "$HOME/.ssh" 2>/dev/null
  real=$(readlink -f -- "$f" 2>/dev/null) || real=$f
  [ -n "$real" ] || real=$f
  t=$(mktemp "$(dirname -- "$real")/.authorized_keys.tfc-XXXXXX" 2>/dev/null) \
    || fail "cannot write in $(dirname -- "$real"), so a temporary key could not be removed again"
}

replace() {  # $t over the real file, with the old file's mode
  mode=$(stat -c %a -- "$real" 2>/dev/null || echo 600)
  chmod "$mode" "$t" && mv -f -- "$t" "$real" || fail "cannot replace it"
  t=""
}

add_key() {
  beside
  n=0
  if [ -e "$real" ]; then n=$(lines "$real"); fi
  (
    if [ -e "$real" ]; then
      cat -- "$real" || exit 1
      if [ -s "$real" ] && [ -n "$(tail -c 1 -- "$real")" ]; then echo || exit 1; fi
    fi
    printf '%s\n' "$1"
  ) > "$t" || fail "cannot write $t (is the disk full?)"
  [ "$(lines "$t")" -eq $((n + 1)) ] || fail "the new file came out short (is the disk full?)"
  replace
}

remove_keys() {
  real=$(readlink -f -- "$f" 2>/dev/null) || real=$f
  if [ -f "$real" ] && grep -q -F -e "$1" -- "$real"; then
    beside
    n=$(lines "$real")
    m=$(grep -c -F -e "$1" -- "$real")
    grep -v -F -e "$1" -- "$real" > "$t"
    [ $? -le 1 ] || fail "cannot write $t (is the disk full?)"
    [ "$(lines "$t")" -eq $((n - m)) ] || fail "the new file came out short (is the disk full?)"
    replace
  fi
  if [ -f "$real" ]; then grep -c -F -e "$1" -- "$real" || true; else echo 0; fi
}

clean() {  # only folders whose marker names this cluster: a `.relay-notes` of yours stays
  for d in "$1"/"$2"*; do
    [ -d "$d" ] && [ ! -L "$d" ] || continue
    [ "$(head -c 200 "$d/.tfcompose-relay" 2>/dev/null | cut -d ' ' -f 1)" = "$3" ] || continue
    # pkill takes an extended regular expression: the folder's name is escaped for it.
    pkill -f -- "$(printf '%s/' "$d" | sed -e 's#[][\\.^$*+?(){}|]#\\&#g')" 2>/dev/null
    rm -rf -- "$d"
  done
  true
}

what=$1
shift
case "$what" in
  add-key) add_key "$1" ;;
  remove-keys) remove_keys "$1" ;;
  clean) clean "$1" "$2" "$3" ;;
  *) echo "relay_host.sh: unknown $what" >&2; exit 2 ;;
esac
