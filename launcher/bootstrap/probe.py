"""The probe (was in facts.py): one POSIX shell script that `tfcompose bootstrap` and `tfcompose
init` run on each host as the SSH user (dash on Ubuntu, so nothing bash-only). It changes nothing;
where the user cannot see something (the engine of a user not yet in the `docker` group) it asks
`sudo -n`, which never waits for a password. It prints `key=value` lines, which facts.py reads.
"""
from __future__ import annotations

# The probe. $1: the workdir, $2: the data_dir to make (or ''), $3: the state folder, $4: a peer's
# address (or ''), whose route names the interface the cluster's traffic leaves by.
PROBE = r"""
LC_ALL=C; export LC_ALL
say() { printf '%s=%s\n' "$1" "$(printf '%s' "$2" | tr '\n\r' '  ' | cut -c1-400)"; }
osf() { sed -n "s/^$1=//p" /etc/os-release 2>/dev/null | head -n 1 | tr -d '"'"'"; }
say os_id "$(osf ID)"; say os_version "$(osf VERSION_ID)"; say os_codename "$(osf VERSION_CODENAME)"
say os_name "$(osf PRETTY_NAME)"
say hostname "$(hostname 2>/dev/null || cat /etc/hostname 2>/dev/null)"
say arch "$(dpkg --print-architecture 2>/dev/null || uname -m)"
say foreign_archs "$(dpkg --print-foreign-architectures 2>/dev/null | tr '\n' ' ')"
say user "$(id -un)"; say uid "$(id -u)"; say home "$HOME"
say groups "$(id -nG)"; say groups_db "$(id -nG "$(id -un)" 2>/dev/null)"
if [ "$(id -u)" = 0 ]; then say sudo root
elif ! command -v sudo >/dev/null 2>&1; then say sudo missing
elif said=$(sudo -n true 2>&1); then say sudo ok
else say sudo refused; say sudo_said "$said"; fi
say docker_cli "$(command -v docker)"; say dockerd "$(command -v dockerd)"
fmt='{{.ServerVersion}}|{{.DockerRootDir}}|{{range $k, $v := .Runtimes}}{{$k}},{{end}}'
if info=$(timeout 20 docker info --format "$fmt" 2>/dev/null); then say docker_user ok; say docker_info "$info"
else say docker_user no
  if [ "$(id -u)" != 0 ] && info=$(timeout 20 sudo -n docker info --format "$fmt" 2>/dev/null); then
    say docker_info "$info"; fi
fi
say compose "$(timeout 20 docker compose version --short 2>/dev/null)"
say docker_active "$(systemctl is-active docker 2>/dev/null)"
say docker_enabled "$(systemctl is-enabled docker 2>/dev/null)"
dpkg-query -W -f='${Package} ${Version} ${db:Status-Abbrev}\n' docker.io docker-ce docker-ce-cli containerd.io \
  containerd runc docker-compose docker-compose-v2 docker-compose-plugin docker-buildx-plugin ca-certificates \
  nvidia-container-toolkit nvidia-container-toolkit-base 2>/dev/null | while IFS= read -r l; do say pkg "$l"; done
dpkg-query -W -f='${db:Status-Abbrev}|${Package}\n' 2>/dev/null \
  | awk -F'|' 'substr($1,2,1) ~ /[UFHWT]/ || substr($1,3,1) == "R" {print $2 " " substr($1,1,3)}' | head -n 40 \
  | while IFS= read -r l; do say dpkg_broken "$l"; done
holder() {
  [ -e "$1" ] || return 0
  d=$(stat -c %D "$1" 2>/dev/null) && i=$(stat -c %i "$1" 2>/dev/null) || return 0
  want=$(printf '%02x:%02x:%s' $((0x$d >> 8)) $((0x$d & 255)) "$i")
  p=$(awk -v w="$want" '$2 != "->" && $6 == w {print $5; exit}' /proc/locks 2>/dev/null)
  [ -n "$p" ] && say apt_lock "$p $(cat "/proc/$p/comm" 2>/dev/null) $1"
}
for f in /var/lib/dpkg/lock-frontend /var/lib/dpkg/lock /var/lib/apt/lists/lock /var/cache/apt/archives/lock; do
  holder "$f"; done
if [ -r "$3/pid" ] && p=$(cat "$3/pid") && [ -n "$p" ] && grep -q tfcompose-bootstrap "/proc/$p/cmdline" 2>/dev/null; then
  say running "$p"; fi
[ -e "$3/status" ] && say last_status "$(head -c 40 "$3/status")"
say apt_lists "$(ls /var/lib/apt/lists/ 2>/dev/null | grep -c '_Packages')"
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
  [ -r "$f" ] && grep -E '^[[:space:]]*deb[[:space:]]' "$f" | head -n 20 | while IFS= read -r l; do say source "$l"; done
done
for f in /etc/apt/sources.list.d/*.sources; do
  [ -r "$f" ] && awk '/^[[:space:]]*$/ {print "--"; next} /^(URIs|Suites|Enabled|Types):/' "$f" | head -n 40 \
    | while IFS= read -r l; do say source822 "$l"; done
  [ -r "$f" ] && say source822 "--"
done
say reboot "$( [ -e /var/run/reboot-required ] && echo yes || echo no)"
say reboot_pkgs "$(head -n 5 /var/run/reboot-required.pkgs 2>/dev/null | tr '\n' ' ')"
say kernel "$(uname -r)"
n=0; for d in /sys/bus/pci/devices/*; do
  [ "$(cat "$d/vendor" 2>/dev/null)" = 0x10de ] || continue
  case "$(cat "$d/class" 2>/dev/null)" in 0x03*) n=$((n + 1));; esac
done; say gpu_pci "$n"
if command -v nvidia-smi >/dev/null 2>&1; then
  if out=$(timeout 30 nvidia-smi --query-gpu=driver_version,name,memory.total --format=csv,noheader 2>&1); then say nvidia_smi ok
  else say nvidia_smi failed; fi
  printf '%s\n' "$out" | head -n 16 | while IFS= read -r l; do say nvidia_said "$l"; done
else say nvidia_smi missing; fi
say nvidia_module "$( [ -e /proc/driver/nvidia/version ] && echo loaded || echo absent)"
say nvidia_ctk "$(nvidia-ctk --version 2>/dev/null | head -n 1)"
say dkms_nvidia "$(ls /var/lib/dkms 2>/dev/null | grep -i nvidia | head -n 1)"
if command -v mokutil >/dev/null 2>&1; then say secure_boot "$(mokutil --sb-state 2>&1 | head -n 1)"
else sb=$(od -An -t u1 -j 4 -N 1 /sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c 2>/dev/null)
  say secure_boot "efivar $sb"; fi
free_at() { p=$1; while [ -n "$p" ] && [ ! -e "$p" ]; do p=$(dirname "$p"); done
  df -Pk "${p:-/}" 2>/dev/null | awk 'NR == 2 {print $4}'; }
root_dir=$(printf '%s' "$info" | cut -d'|' -f2)
say free_docker "$(free_at "${root_dir:-/var/lib/docker}")"
say free_apt "$(free_at /var/cache/apt/archives)"; say free_usr "$(free_at /usr)"; say free_home "$(free_at "$HOME")"
folder() { if [ -z "$1" ]; then echo none; elif [ -d "$1" ] && [ -w "$1" ]; then echo writable
  elif [ -e "$1" ]; then echo not-writable; else echo absent; fi; }
say workdir "$(folder "$1")"; say data_dir "$(folder "$2")"
for d in /sys/class/net/*; do n=${d##*/}; [ -e "$d" ] || continue
  a=$(ip -o -4 addr show dev "$n" 2>/dev/null | awk '{print $4; exit}')
  say nic "$n $(cat "$d/operstate" 2>/dev/null || echo unknown) $(cat "$d/speed" 2>/dev/null || echo -) ${a:--}"; done
if [ -n "${4:-}" ] && command -v ip >/dev/null 2>&1; then say route "$(ip -o route get "$4" 2>/dev/null | head -n 1)"; fi
say end probe
"""
