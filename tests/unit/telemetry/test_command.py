"""The sampler script, run by this machine's sh against made-up /proc and /sys/fs/cgroup trees (a
cgroup v2 host and a v1 host, whichever this machine is), a `docker` that names the container,
and the stand-in nvidia-smi: what it prints, and that it ends when its stdin does (nvidia-smi
too, even one that ignores SIGTERM), or when its stdin stays silent."""
from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from launcher.telemetry import command
from support import nvidia_smi

CID = "0123456789ab" + "c" * 52


def fake_host(root: Path, version: int, quota: str = "150000 100000") -> tuple[Path, Path, dict]:
    """(proc, sys, env): a host whose trainer container has pid 4242 and its cgroup."""
    proc, sys_, bin_ = root / "proc", root / "sys", root / "bin"
    for folder in (proc / "4242", proc / "4243", proc / "net", bin_):
        folder.mkdir(parents=True)
    (proc / "4242" / "schedstat").write_text("900 2000000 5\n")      # ns run, ns waited for a CPU, slices
    (proc / "4243" / "schedstat").write_text("900 3000000 5\n")
    (proc / "uptime").write_text("100.25 50.00\n")
    (proc / "meminfo").write_text("MemTotal:       16000000 kB\nMemFree: 1 kB\n")
    (proc / "vmstat").write_text("nr_free_pages 1\npswpin 10\npswpout 20\npgfault 3\n")
    (proc / "net" / "dev").write_text(
        "Inter-|   Receive                                                |  Transmit\n"
        " face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n"
        "    lo:  100 1 0 0 0 0 0 0  100 1 0 0 0 0 0 0\n"
        "  eth0: 5000 7 0 0 0 0 0 0 9000 8 0 0 0 0 0 0\n"
        "eth0.5:   11 1 0 0 0 0 0 0   22 1 0 0 0 0 0 0\n")
    if version == 2:
        (proc / "4242" / "cgroup").write_text(f"0::/system.slice/docker-{CID}.scope\n")
        cg = sys_ / "system.slice" / f"docker-{CID}.scope"
        cg.mkdir(parents=True)
        (cg / "cpu.stat").write_text("usage_usec 7000000\nuser_usec 6000000\n")
        (cg / "memory.current").write_text("3000000\n")
        (cg / "memory.stat").write_text("anon 1\ninactive_file 1000000\n")
        (cg / "memory.max").write_text("max\n")
        (cg / "cpu.max").write_text(quota + "\n")
        (cg / "cpuset.cpus.effective").write_text("0-3\n")
        (cg / "cgroup.threads").write_text("4242\n4243\n4244\n")     # 4244 ended meanwhile
    else:
        path = f"/docker/{CID}"
        (proc / "4242" / "cgroup").write_text(f"4:memory:{path}\n3:cpu,cpuacct:{path}\n2:cpuset:{path}\n"
                                             f"1:name=systemd:{path}\n0::/\n")
        for sub in ("cpu,cpuacct", "memory", "cpuset"):
            (sys_ / sub / path[1:]).mkdir(parents=True)
        acct = sys_ / "cpu,cpuacct" / path[1:]
        (acct / "cpuacct.usage").write_text("7000000000\n")
        (acct / "cpu.cfs_quota_us").write_text("-1\n")
        (acct / "cpu.cfs_period_us").write_text("100000\n")
        (acct / "tasks").write_text("4242\n4243\n4244\n")
        mem = sys_ / "memory" / path[1:]
        (mem / "memory.usage_in_bytes").write_text("3000000\n")
        (mem / "memory.limit_in_bytes").write_text("9223372036854771712\n")
        (mem / "memory.stat").write_text("cache 5\ntotal_inactive_file 1000000\n")
        (sys_ / "cpuset" / path[1:] / "cpuset.effective_cpus").write_text("0-1,3\n")
    for name, script in (("docker", f"case $1 in ps) echo {CID};; inspect) echo 4242;; esac"),
                         ("ip", 'echo "10.1.1.2 dev eth0 src 10.1.1.1 uid 0"')):
        (bin_ / name).write_text(f"#!/bin/sh\n{script}\n")
        (bin_ / name).chmod(0o755)
    return proc, sys_, {**os.environ, "PATH": f"{bin_}:{os.environ['PATH']}"}


def run_once(tmp_path, version: int, **kw) -> list[str]:
    proc, sys_, env = fake_host(tmp_path, version)
    argv = command.sampler("c", "h0", nic="eth0", period_s=0.5, ticks=2, sys_root=str(sys_), proc_root=str(proc), **kw)
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=30)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    return done.stdout.splitlines()


@pytest.mark.parametrize("version", [2, 1])
def test_it_reads_the_containers_cgroup_the_nic_and_swap(tmp_path, version):
    lines = run_once(tmp_path, version)
    assert lines[0].startswith("T ") and lines[0].endswith(" 100.25")
    assert lines[1].startswith("H ") and lines[1].split()[2:] == ["16000000", str(os.sysconf("SC_PAGE_SIZE"))]
    assert lines[2] == "N eth0"
    cpuset = "0-3" if version == 2 else "0-1,3"
    assert lines[3] == f"K {version} {CID[:12]} {cpuset}"
    limit, quota = ("-", "150000 100000") if version == 2 else ("9223372036854771712", "- 100000")
    # CPU in µs, memory without the page cache, the limit, the quota, eth0's bytes (not eth0.5's), swap
    # pages, and the µs its threads waited for a CPU.
    assert lines[4:] == [f"S 100.25 7000000 2000000 {limit} {quota} 5000 9000 10 20 5000"] * 2


def test_without_nvidia_smi_it_says_so_and_with_it_passes_its_lines_on(tmp_path):
    assert "G none" in run_once(tmp_path / "a", 2, gpus="all")
    proc, sys_, env = fake_host(tmp_path / "b", 2)
    nvidia_smi.install(Path(env["PATH"].split(":")[0]), util=42)
    argv = command.sampler("c", "h0", gpus="0,1", period_s=0.5, ticks=2, sys_root=str(sys_), proc_root=str(proc))
    lines = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=30).stdout.splitlines()
    assert [line for line in lines if line[0].isdigit()] == ["0, 42, 1024, 16384, 55.5, 41", "1, 42, 1024, 16384, 55.5, 41"]
    assert "G none" not in lines


def test_a_one_shot_whose_nvidia_smi_hangs_still_reports_cpu_and_memory_and_leaves_nothing_running(tmp_path):
    """`status` on a host whose driver is wedged (a stand-in nvidia-smi silent and deaf to SIGTERM):
    the CPU and memory lines come within seconds, nvidia-smi is said to have been ended, and is."""
    proc, sys_, env = fake_host(tmp_path, 2)
    stand_in = nvidia_smi.install(Path(env["PATH"].split(":")[0]), mode="silent", ignore_term=True)
    argv = command.sampler("c", "h0", gpus="0", period_s=0.5, ticks=2, sys_root=str(sys_), proc_root=str(proc))
    started = time.monotonic()
    sampler = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=env, start_new_session=True)
    try:
        out, _ = sampler.communicate(timeout=30)
        took = time.monotonic() - started
        assert took < command.ONCE_GPU_S + 5, f"took {took:.1f} s"
        assert len([line for line in out.splitlines() if line.startswith("S ")]) == 2
        assert "E 137" in out.splitlines() or "E 124" in out.splitlines(), out
        time.sleep(0.3)
        assert nvidia_smi.running(stand_in) == []
    finally:
        os.killpg(sampler.pid, 9) if sampler.poll() is None else None
        for pid in nvidia_smi.running(stand_in):
            os.kill(pid, 9)


def test_an_interface_the_host_lacks_gives_way_to_the_one_that_routes_to_the_peers(tmp_path):
    proc, sys_, env = fake_host(tmp_path, 2)
    argv = command.sampler("c", "h0", nic="eth", peer="10.1.1.2", period_s=0.5, ticks=2, sys_root=str(sys_),
                           proc_root=str(proc))
    assert "N eth0" in subprocess.run(argv, capture_output=True, text=True, env=env, timeout=30).stdout.splitlines()


def test_no_container_no_route_and_odd_files_give_dashes_not_errors(tmp_path):
    proc, sys_, env = fake_host(tmp_path, 2)
    (Path(env["PATH"].split(":")[0]) / "ip").write_text("#!/bin/sh\nexit 2\n")
    (sys_ / "system.slice" / f"docker-{CID}.scope" / "cpu.stat").write_text("usage_usec lots\n")
    lines = subprocess.run(command.sampler("c", "h0", nic="wlan9", period_s=0.5, ticks=2, sys_root=str(sys_),
                                           proc_root=str(proc)), capture_output=True, text=True, env=env,
                           timeout=30).stdout.splitlines()
    assert [line.split()[2:] for line in lines if line.startswith("S ")] == [["-", "-", "-", "-", "-", "-", "-", "10", "20", "-"]] * 2


def held(tmp_path, ignore_term: bool, silence_s: int = 30):
    proc, sys_, env = fake_host(tmp_path, 2)
    stand_in = nvidia_smi.install(Path(env["PATH"].split(":")[0]), ignore_term=ignore_term)
    argv = command.sampler("c", "h0", gpus="0", period_s=0.5, silence_s=silence_s, sys_root=str(sys_), proc_root=str(proc))
    sampler = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, start_new_session=True)
    deadline = time.monotonic() + 20
    while not nvidia_smi.running(stand_in) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert nvidia_smi.running(stand_in)
    return sampler, stand_in


@pytest.mark.parametrize("ignore_term", [False, True])
def test_a_held_sampler_ends_with_its_stdin_nvidia_smi_included(tmp_path, ignore_term):
    sampler, stand_in = held(tmp_path, ignore_term)
    try:
        sampler.stdin.write(b".")
        sampler.stdin.flush()
        time.sleep(1)
        assert sampler.poll() is None
        sampler.stdin.close()                 # the launcher ended, however
        sampler.wait(10)
        time.sleep(0.3)
        assert nvidia_smi.running(stand_in) == []
    finally:
        os.killpg(sampler.pid, 9) if sampler.poll() is None else None


def test_a_held_sampler_whose_stdin_stays_silent_ends_by_itself(tmp_path):
    sampler, stand_in = held(tmp_path, True, silence_s=2)
    try:
        started = time.monotonic()
        sampler.wait(15)                      # nobody writes: the network to the launcher is gone
        assert time.monotonic() - started < 10
        time.sleep(0.3)
        assert nvidia_smi.running(stand_in) == []
    finally:
        os.killpg(sampler.pid, 9) if sampler.poll() is None else None


def test_what_nvidia_smi_is_asked_and_which_nic_is_counted():
    assert [command.gpu_ids(g) for g in ("all", 0, 2, [1, 3])] == ["all", "", "0,1", "1,3"]
    assert [command.nic_name(n) for n in ("eth0", "=eth0", "^docker,lo", "eth", None, "a;rm")] == \
           ["eth0", "eth0", "", "eth", "", ""]
    argv = command.sampler("c", "h0", gpus="all", nic="$(reboot)")
    assert argv[:6] == ["timeout", "-k", "5", str(command.BOUND_S), "sh", "-c"]
    assert "$(reboot)" not in argv           # the nic is no plain name: the route decides
    tagged = command.sampler("c", "h0", tag="tfcompose-cmd-00ff")
    assert tagged[:4] == ["sh", "-c", '"$@"', "tfcompose-cmd-00ff"] and tagged[4:] == command.sampler("c", "h0")
