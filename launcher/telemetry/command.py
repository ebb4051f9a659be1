"""The sampler: one POSIX sh process per host, over the SSH connection tfcompose holds, with
nothing installed on the host. Built here and only here; values reach it as positional
parameters of `sh -c`, never spliced into the script (the Connection quotes the argv with
shlex).

Every `period` seconds it prints one line of raw counters (`S`): /proc/uptime; the trainer
container's CPU time, the time its threads sat runnable waiting for a CPU (the sum of each
thread's /proc/<tid>/schedstat) and its memory, from its cgroup (v2, or v1's cpuacct and memory controllers;
the container found by its tfcompose labels, its cgroup from /proc/<pid>/cgroup, looked up again
when the container restarts); its CPU quota; the NIC's bytes in and out (/proc/net/dev; the NIC
that routes to the peers); the host's pages swapped in and out (/proc/vmstat). Beside it, one
long-lived `nvidia-smi --query-gpu=… --format=csv,noheader,nounits -lms <period>` writes its own
CSV lines (restarted after a crash, at most RESTARTS times). Everything but `read`, `printf` and
`sleep` happens once (or once per container start): the loop forks only `sleep`, and reads one
small file per thread of the container.

Lines it prints (parse.py reads them; anything else is garbage to drop):
    T <wall clock, UTC s> <uptime s>       the host's clock, at the start and every 60 ticks
    H <cpus> <MemTotal kB> <page bytes>    the host, once
    N <nic>                                the NIC counted
    G none                                 GPUs wanted, but no nvidia-smi on the PATH
    K <1|2> <container id> <cpuset>        the container's cgroup was found
    S <uptime> <cpu µs> <mem B> <mem limit B> <quota µs> <quota period µs> <rx B> <tx B> <swapped in> <out> <queued µs>
    E <status> / X                         nvidia-smi ended (and is restarted) / given up on
    0, 87, 10240, 16384, 215.43, 71        nvidia-smi's own line for one GPU

Its life is bounded three ways: `timeout` (BOUND_S, then the launcher starts a new one); its
stdin, where the launcher writes a heartbeat byte every few seconds: closed (the launcher
ended, however) or silent for SILENCE_S (its network lost) and the whole process group is ended,
nvidia-smi included (which has been seen to outlive a closed pipe: netdata#7143); and `ticks`
for a one-shot (`status`), whose one nvidia-smi runs under its own `timeout` (ONCE_GPU_S, then
KILL to it and all it started): a hung driver costs `status` seconds, not its CPU and memory
figures, and leaves nothing running (it says `E 124` or `E 137`).
"""
from __future__ import annotations

import re
from typing import Optional

from launcher.docker_commands import LABEL_CLUSTER, LABEL_HOST

DEFAULT_PERIOD_S = 1.0
BOUND_S = 24 * 3600          # a sampler lives at most a day; the session starts the next
SILENCE_S = 30               # no heartbeat for this long: the launcher is gone, the sampler ends
RESTARTS = 5                 # nvidia-smi restarted at most this often after it ends
ONCE_GPU_S = 3               # a one-shot's nvidia-smi answers within this, or is ended (1 s later KILLed)
QUERY = "index,utilization.gpu,memory.used,memory.total,power.draw,temperature.gpu"
NIC_NAME = re.compile(r"^[A-Za-z0-9_.:@-]{1,15}$")

SAMPLER = r"""
period=$1 ms=$2 cluster=$3 host=$4 nic=$5 peer=$6 gpus=$7 silence=$8 ticks=$9 sys=${10} proc=${11} query=${12} restarts=${13} once=${14}
say() { printf '%s\n' "$*"; }
num() { case $1 in ''|*[!0-9]*) return 1;; esac; }
val() { v=; [ -r "$1" ] && read -r v < "$1"; }
anchor() { now=$(date +%s.%N 2>/dev/null); case $now in *[!0-9.]*|'') now=$(date +%s);; esac
  read -r up _ < "$proc/uptime"; say "T $now $up"; }
gpu_loop() {
  n=0
  while :; do
    if [ "$ticks" != 0 ]; then set -- timeout -k 1 "$once" nvidia-smi; else set -- nvidia-smi -lms "$ms"; fi
    if [ "$gpus" = all ]; then "$@" --query-gpu="$query" --format=csv,noheader,nounits 2>/dev/null
    else "$@" --query-gpu="$query" --format=csv,noheader,nounits --id="$gpus" 2>/dev/null; fi
    status=$?
    if [ "$ticks" != 0 ]; then case $status in 124|137) say "E $status";; esac; return 0; fi
    say "E $status"; n=$((n + 1)); [ "$n" -lt "$restarts" ] || { say X; return 0; }
    sleep 10
  done
}
find_container() {
  found=0
  cid=$(docker ps -q --no-trunc --filter "label=TFC_LABEL_CLUSTER=$cluster" --filter "label=TFC_LABEL_HOST=$host" \
        --filter status=running 2>/dev/null | head -n 1)
  case $cid in ''|*[!0-9a-f]*) return 1;; esac
  pid=$(docker inspect -f '{{.State.Pid}}' "$cid" 2>/dev/null)
  num "$pid" && [ "$pid" != 0 ] && [ -r "$proc/$pid/cgroup" ] || return 1
  v2= acct= mem= cpuc= cset=
  while IFS=: read -r _ ctl path; do
    case ",$ctl," in ,,) v2=$path;; esac
    case ",$ctl," in *,cpuacct,*) acct=$path;; esac
    case ",$ctl," in *,memory,*) mem=$path;; esac
    case ",$ctl," in *,cpu,*) cpuc=$path;; esac
    case ",$ctl," in *,cpuset,*) cset=$path;; esac
  done < "$proc/$pid/cgroup"
  if [ -n "$v2" ] && [ -r "$sys$v2/cpu.stat" ]; then
    mode=2 dir=$sys$v2 cpus=- tasks=$sys$v2/cgroup.threads; val "$dir/cpuset.cpus.effective" && [ -n "$v" ] && cpus=$v
  else
    mode=1 cpu_file= quota_dir= mem_dir=$sys/memory$mem cpus=- tasks=
    for d in cpuacct cpu,cpuacct cpuacct,cpu; do [ -r "$sys/$d$acct/cpuacct.usage" ] && cpu_file=$sys/$d$acct/cpuacct.usage && tasks=$sys/$d$acct/tasks && break; done
    for d in cpu cpu,cpuacct cpuacct,cpu; do [ -r "$sys/$d$cpuc/cpu.cfs_quota_us" ] && quota_dir=$sys/$d$cpuc && break; done
    val "$sys/cpuset$cset/cpuset.effective_cpus" && [ -n "$v" ] && cpus=$v
    [ -n "$cpu_file" ] && [ -r "$mem_dir/memory.usage_in_bytes" ] || return 1
  fi
  found=1; say "K $mode ${cid%"${cid#????????????}"} $cpus"
}
stat_value() { v=-; [ -r "$1" ] || return 1
  while read -r key value; do [ "$key" = "$2" ] && { v=$value; return 0; }; done < "$1"; }
container_tick() {
  cpu=- mem=- lim=- quota=- qp=- cur= inactive= queued=-
  if [ "$mode" = 2 ]; then
    stat_value "$dir/cpu.stat" usage_usec && cpu=$v
    val "$dir/memory.current" && cur=$v; stat_value "$dir/memory.stat" inactive_file; inactive=$v
    val "$dir/memory.max" && lim=$v
    [ -r "$dir/cpu.max" ] && read -r quota qp < "$dir/cpu.max"
  else
    val "$cpu_file" && num "$v" && cpu=$((v / 1000))
    val "$mem_dir/memory.usage_in_bytes" && cur=$v; stat_value "$mem_dir/memory.stat" total_inactive_file; inactive=$v
    val "$mem_dir/memory.limit_in_bytes" && lim=$v
    [ -n "$quota_dir" ] && val "$quota_dir/cpu.cfs_quota_us" && quota=$v && val "$quota_dir/cpu.cfs_period_us" && qp=$v
  fi
  if num "$cur" && num "$inactive" && [ "$inactive" -le "$cur" ]; then mem=$((cur - inactive)); elif num "$cur"; then mem=$cur; fi
  queued=-
  if [ -r "$tasks" ]; then    # how long its threads sat runnable, waiting for a CPU (each thread's schedstat)
    queued=0; while read -r tid; do read -r _ w _ 2>/dev/null < "$proc/$tid/schedstat" && num "$w" && queued=$((queued + w)); done < "$tasks"
    queued=$((queued / 1000))
  fi
  num "$cpu" || { found=0; cpu=- mem=- lim=- quota=- qp=- queued=-; }
  num "$lim" || lim=-; num "$quota" || quota=-; num "$qp" || qp=-
}
host_tick() {
  rx=- tx=-
  if [ -n "$nic" ] && [ -r "$proc/net/dev" ]; then
    while IFS= read -r line; do
      name=${line%%:*}; name=${name##* }
      if [ "$name" = "$nic" ]; then set -- ${line#*:}; rx=$1 tx=$9; break; fi
    done < "$proc/net/dev"
  fi
  si=- so=-
  while read -r key value; do case $key in pswpin) si=$value;; pswpout) so=$value; break;; esac; done < "$proc/vmstat"
}
tick_loop() {
  n=0 wait=0 found=0 misses=0
  while :; do
    if [ "$found" = 0 ]; then
      if [ "$wait" -le 0 ]; then   # looked for every 10 ticks, every 30 once it has been missing a minute
        if find_container; then misses=0; else misses=$((misses + 1)); wait=10; [ "$misses" -gt 6 ] && wait=30; fi
      fi
      wait=$((wait - 1))
    fi
    read -r up _ < "$proc/uptime"
    cpu=- mem=- lim=- quota=- qp=- queued=-; [ "$found" = 1 ] && container_tick
    host_tick
    say "S $up $cpu $mem $lim $quota $qp $rx $tx $si $so $queued"
    n=$((n + 1)); [ "$ticks" != 0 ] && [ "$n" -ge "$ticks" ] && return 0
    [ $((n % 60)) = 0 ] && anchor
    sleep "$period"
  done
}
present() { [ -r "$proc/net/dev" ] && while IFS= read -r line; do name=${line%%:*}; [ "${name##* }" = "$1" ] && return 0; done < "$proc/net/dev"; return 1; }
[ -n "$nic" ] && ! present "$nic" && nic=
if [ -z "$nic" ] && command -v ip >/dev/null 2>&1; then
  case $peer in *[!0-9a-fA-F.:]*) peer=$(getent hosts "$peer" 2>/dev/null | awk '{print $1; exit}');; esac
  if [ -n "$peer" ]; then route=$(ip -o route get "$peer" 2>/dev/null | head -n 1)
  else route=$(ip -o route show default 2>/dev/null | head -n 1); fi
  set -- $route; while [ $# -gt 1 ]; do [ "$1" = dev ] && { nic=$2; break; }; shift; done
fi
cpus=$(getconf _NPROCESSORS_ONLN 2>/dev/null); num "$cpus" || cpus=-
memkb=-; while read -r key value _; do [ "$key" = MemTotal: ] && { memkb=$value; break; }; done < "$proc/meminfo"
page=$(getconf PAGESIZE 2>/dev/null); num "$page" || page=4096
anchor; say "H $cpus $memkb $page"; say "N ${nic:--}"
if [ -n "$gpus" ]; then
  if command -v nvidia-smi >/dev/null 2>&1; then gpu_loop & else say "G none"; fi
fi
if [ "$ticks" != 0 ]; then tick_loop; wait; exit 0; fi
tick_loop &
while [ "$(timeout "$silence" head -c 1 2>/dev/null)" = . ]; do :; done
trap '' TERM; kill -TERM 0 2>/dev/null; sleep 1; kill -KILL 0 2>/dev/null
""".replace("TFC_LABEL_CLUSTER", LABEL_CLUSTER).replace("TFC_LABEL_HOST", LABEL_HOST)


def gpu_ids(gpus) -> str:
    """What nvidia-smi is asked about: the container's GPUs (`all`, a count n: 0…n-1, or a list),
    "" for none (a CPU-only host: no nvidia-smi at all)."""
    if gpus == "all":
        return "all"
    if isinstance(gpus, list):
        return ",".join(str(int(i)) for i in gpus)
    return ",".join(str(i) for i in range(int(gpus))) if int(gpus) > 0 else ""


def nic_name(spec: Optional[str]) -> str:
    """The interface to count from the inventory's `nic` (or the one preflight found): a plain name,
    or NCCL's `=eth0`; a filter such as `^docker,lo` or `eth` names no one interface: "" (the
    sampler then takes the one that routes to the peers)."""
    name = (spec or "").removeprefix("=")
    return name if NIC_NAME.match(name) else ""


def sampler(cluster: str, host: str, *, gpus="", nic: str = "", peer: str = "", period_s: float = DEFAULT_PERIOD_S,
            ticks: int = 0, bound_s: int = BOUND_S, silence_s: int = SILENCE_S, sys_root: str = "/sys/fs/cgroup",
            proc_root: str = "/proc", tag: Optional[str] = None) -> list[str]:
    """The sampler's argv: held (ticks=0, ended by its stdin) or `ticks` samples then exit (status).
    With a tag (connection.new_tag), the command is findable on the host by it (`end_command`):
    for a login shell that hangs before the sampler even starts, so nothing it left can stay."""
    period = f"{max(0.1, min(float(period_s), 60.0)):g}"
    args = [period, str(int(float(period) * 1000)), cluster, host, nic_name(nic), peer, gpus, str(int(silence_s)),
            str(int(ticks)), sys_root, proc_root, QUERY, str(RESTARTS), str(ONCE_GPU_S)]
    argv = ["timeout", "-k", "5", str(int(bound_s)), "sh", "-c", SAMPLER, "tfcompose-telemetry", *args]
    return ["sh", "-c", '"$@"', tag, *argv] if tag else argv
