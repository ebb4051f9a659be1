"""A stand-in `nvidia-smi` for hosts without a GPU (this machine has none): put on a host's PATH,
it answers what tfcompose asks as the real one does, and misbehaves on request.

What the real one prints for `--query-gpu=index,utilization.gpu,memory.used,memory.total,
power.draw,temperature.gpu --format=csv,noheader,nounits` is one line per GPU, fields separated
by ", ", numbers without units, a field the GPU does not report as `[N/A]` or `[Not Supported]`
(nvidia-smi's own manual; netdata's go.d nvidia_smi testdata, tesla-p100.csv):

    0, 87, 10240, 16384, 215.43, 71

Asked `--query-gpu=driver_version,name,memory.total` (what `tfcompose bootstrap` and `init` ask), one
line per GPU: `550.54.15, Stand-in GPU, 16384 MiB`. With `-lms N` it prints every GPU's line again every N ms until it is killed; `-L` lists the
GPUs (`GPU 0: … (UUID: GPU-…)`), which preflight counts. `--id=0,2` limits the GPUs (two unless
`install` was given another count).

The mode is read from `<script>.mode` at every loop (so a test switches it while it runs):
    good      one line per GPU per period; utilisation from `<script>.util` (default 3), power 55.5 W
    na        power and temperature `[N/A]`, as on many consumer GPUs
    garbage   what no nvidia-smi prints: escape sequences, a 100 kB line, NULs, wrong field counts,
              numbers out of range, an XID-like event line
    flood     the same line as fast as the pipe takes it
    silent    nothing, for an hour (a wedged driver)
    crash     one period's lines, then SIGSEGV (exit 139)
`<script>.ignore-term` makes it ignore SIGTERM (netdata#7143: a looping nvidia-smi outlived its reader).
"""
from __future__ import annotations

from pathlib import Path

SCRIPT = r"""#!/bin/sh
me=$0 ms=0
ids=$(cat "$me.ids" 2>/dev/null || echo 0,1)
for arg in "$@"; do
  case $arg in
    -L) for i in $(echo "$ids" | tr , ' '); do echo "GPU $i: Stand-in GPU (UUID: GPU-0000000$i-stand-in)"; done; exit 0;;
    --query-gpu=driver_version*) for i in $(echo "$ids" | tr , ' '); do echo "550.54.15, Stand-in GPU, 16384 MiB"; done; exit 0;;
    --id=*) ids=${arg#--id=};;
    -lms) next=ms;;
    *) [ "${next:-}" = ms ] && ms=$arg; next=;;
  esac
done
[ -f "$me.ignore-term" ] && trap '' TERM
echo $$ >> "$me.pids"
period() { if [ "$ms" = 0 ]; then exit 0; fi; sleep "$(awk -v ms="$ms" 'BEGIN { printf "%.3f", ms / 1000 }')"; }
while :; do
  mode=$(cat "$me.mode" 2>/dev/null || echo good)
  util=$(cat "$me.util" 2>/dev/null || echo 3)
  case $mode in
    good) for i in $(echo "$ids" | tr , ' '); do echo "$i, $util, 1024, 16384, 55.5, 41"; done;;
    na) for i in $(echo "$ids" | tr , ' '); do echo "$i, $util, 1024, 16384, [N/A], [N/A]"; done;;
    garbage)
      printf '0, 50, 1024, 16384, 55.5, 41\033]52;c;aGFjaw==\007\n'
      printf '\033[2J\033[31mred alert\n'
      head -c 100000 /dev/zero | tr '\0' 'x'; echo
      printf '1, 50\0, 1024, 16384\n'
      echo "0, 50, 1024"
      echo "0, 250, 1024, 16384, 55.5, 41"
      echo "1, -5, 1024, 16384, 55.5, 41"
      echo "99999999999999999999, 5, 1, 1, 1, 1"
      echo "Xid (PCI:0000:01:00): 79, pid=1234, GPU has fallen off the bus."
      echo "S 1 2 3"
      echo "T not a time";;
    flood) while :; do echo "0, 50, 1024, 16384, 55.5, 41"; done;;
    silent) sleep 3600;;
    crash) for i in $(echo "$ids" | tr , ' '); do echo "$i, $util, 1024, 16384, 55.5, 41"; done; kill -SEGV $$;;
  esac
  period
done
"""


def install(folder: Path, mode: str = "good", util: int = 3, ignore_term: bool = False, gpus: int = 2) -> Path:
    """The stand-in as `folder/nvidia-smi` (folder: a directory on the host's PATH), with `gpus` GPUs."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "nvidia-smi"
    path.write_text(SCRIPT)
    path.chmod(0o755)
    path.with_name("nvidia-smi.ids").write_text(",".join(str(i) for i in range(gpus)) + "\n")
    set_mode(path, mode, util)
    ignore = path.with_name("nvidia-smi.ignore-term")
    if ignore_term:
        ignore.write_text("")
    elif ignore.exists():
        ignore.unlink()
    return path


def set_mode(path: Path, mode: str, util: int | None = None) -> None:
    path.with_name("nvidia-smi.mode").write_text(mode + "\n")
    if util is not None:
        path.with_name("nvidia-smi.util").write_text(f"{util}\n")


def running(path: Path) -> list[int]:
    """The stand-in's processes still alive (each one writes its pid when it starts)."""
    pids = path.with_name("nvidia-smi.pids")
    alive = []
    for line in (pids.read_text().split() if pids.exists() else []):
        proc = Path(f"/proc/{line}/cmdline")
        if proc.exists() and str(path) in proc.read_bytes().decode(errors="replace"):
            alive.append(int(line))
    return alive
