"""The sampler's output turned into samples: rates from counters, the host's clock, nvidia-smi's
lines (placeholders included), and everything a hostile host can send instead: bounded, dropped,
counted, never a crash."""
from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from launcher.telemetry.parse import FLOOD_BYTES, LINE_MAX, Flood, HostStream, ascii_shown, cpuset_size

HEAD = b"T 1700000000.5 100.0\nH 8 16000000 4096\nN eth0\nK 2 0123456789ab 0-3\n"
TICK1 = b"S 100.0 1000000 1048576 2097152 200000 100000 1000 2000 10 20 0\n"
TICK2 = b"S 101.0 3000000 2097152 2097152 200000 100000 126000 252000 10 276 500000\n"


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def stream(**kw) -> HostStream:
    return HostStream(1.0, kw.pop("gpu_ids", None), kw.pop("clock", Clock()), lambda: 5.0, **kw)


def test_two_ticks_give_rates_on_the_hosts_clock():
    first, second = stream().feed(HEAD + TICK1 + TICK2)
    assert first.time == 1700000000.5 and first.cpu is None and first.mem == 1.0
    assert second.time == 1700000001.5
    assert second.cpu == pytest.approx(2.0)                   # 2 s of CPU in 1 s
    assert second.cpu_queued == pytest.approx(0.5)            # and its threads waited 0.5 s for a CPU
    assert second.cpu_demand == pytest.approx(1.25)           # 2.5 CPUs wanted of the 2 it may use
    assert second.cpu_limit == pytest.approx(2.0)             # quota 2 CPUs < cpuset 4 < host 8
    assert second.mem == 2.0 and second.mem_limit == 2.0      # MiB
    assert second.net_in == pytest.approx(1.0) and second.net_out == pytest.approx(2.0)    # Mbit/s
    assert second.swap == pytest.approx(256 * 4096 / 1e6)     # pages in and out × the page size


def test_without_the_clock_line_the_launchers_clock_stands_in():
    assert stream().feed(TICK1)[0].time == 5.0


def test_a_counter_that_went_back_or_a_gap_gives_no_rate():
    back = TICK2.replace(b"3000000", b"10")
    assert stream().feed(HEAD + TICK1 + back)[1].cpu is None
    gap = TICK2.replace(b"S 101.0", b"S 200.0")
    later = stream().feed(HEAD + TICK1 + gap)[1]
    assert later.cpu is None and later.net_in is None


def test_a_new_container_starts_its_cpu_count_over():
    new = b"K 2 ba9876543210 -\n"
    assert stream().feed(HEAD + TICK1 + new + TICK2)[1].cpu is None


def test_gpu_lines_join_the_next_tick_and_placeholders_mean_not_reported():
    clock = Clock()
    s = stream(clock=clock, gpu_ids=frozenset({0, 1}))
    sample = s.feed(HEAD + b"0, 87, 10240, 16384, 215.43, 71\n1, [N/A], 512, 16384, [Not Supported], [N/A]\n" + TICK1)[0]
    assert [(g.index, g.util, g.mem, g.power, g.temp) for g in sample.gpus] == \
           [(0, 87.0, 10240.0, 215.43, 71.0), (1, None, 512.0, None, None)]
    clock.now = 10.0                    # nvidia-smi silent since: its readings are stale, not shown as now
    assert s.feed(TICK2)[0].gpus == ()


def test_only_the_gpus_asked_about_count():
    sample = stream(gpu_ids=frozenset({1})).feed(HEAD + b"0, 5, 1, 1, 1, 1\n1, 6, 1, 1, 1, 1\n" + TICK1)[0]
    assert [g.index for g in sample.gpus] == [1]


def test_what_nvidia_smi_says_when_it_ends_becomes_a_note():
    s = stream()
    s.feed(b"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\nE 9\nX\n")
    assert s.notes[0].startswith("nvidia-smi ended (exit 9): NVIDIA-SMI has failed")
    assert "no more GPU figures" in s.notes[1]


GARBAGE = [
    b"0, 50, 1024, 16384, 55.5, 41\x1b]52;c;aGFjaw==\x07",        # an escape sequence riding a good line
    b"\x1b[2J\x1b[31mred alert",
    b"1, 50\x00, 1024, 16384",
    b"0, 50, 1024",                                              # too few fields
    b"0, 250, 1024, 16384, 55.5, 41",                            # 250 %
    b"1, -5, 1024, 16384, 55.5, 41",
    b"0, nan, 1, 1, 1, 1",
    b"0, 1e309, 1, 1, 1, 1",
    b"99999, 5, 1, 1, 1, 1",
    b"S 1 2 3",
    b"S 101.0 -5 1 1 1 1 1 1 1 1 1",
    b"S 101.0 99999999999999999999999 1 1 1 1 1 1 1 1 1",
    b"S 101.0 1 1 1 1 1 1 1 1 1",
    b"T not a time",
    b"K 3 0123456789ab 0",
    b"N eth0;reboot",
    b"E x",
    "0, 5, 1, 1, 1, 1 \u202e".encode(),
    b"Xid (PCI:0000:01:00): 79, pid=1234, GPU has fallen off the bus.",
]


@pytest.mark.parametrize("line", GARBAGE, ids=range(len(GARBAGE)))
def test_garbage_is_counted_and_changes_nothing(line):
    s = stream()
    before = s.feed(HEAD + TICK1)
    after = s.feed(line + b"\n" + TICK2)
    assert s.garbage == 1 and "\x1b" not in s.first_garbage and "\x00" not in s.first_garbage
    assert after[0].cpu == pytest.approx(2.0) and before[0].gpus == after[0].gpus == ()
    assert s.facts.nic == "eth0"


def test_a_line_longer_than_the_bound_is_dropped_without_being_gathered():
    s = stream()
    s.feed(HEAD)
    for _ in range(20):                          # 20 × 400 bytes with no newline: one line of 8 KB
        s.feed(b"x" * 400)
        assert len(s._partial) <= LINE_MAX
    assert s.feed(b"\n" + TICK1)[0].mem == 1.0 and s.garbage == 1


def test_a_flood_is_refused():
    s = stream()
    with pytest.raises(Flood):
        for _ in range(FLOOD_BYTES // 30 + 10):
            s.feed(b"0, 50, 1024, 16384, 55.5, 41\n")


def test_a_burst_after_a_stall_is_no_flood():
    s, clock = stream(clock=Clock()), Clock()
    backlog = HEAD + (b"0, 50, 1024, 16384, 55.5, 41\n" * 8 + TICK1) * 60      # a minute of an 8-GPU host at once
    assert len(s.feed(backlog)) == 60


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=40), min_size=1, max_size=30))
def test_any_split_of_the_stream_gives_the_same_samples(sizes):
    data = HEAD + b"0, 87, 10240, 16384, 215.43, 71\n" + TICK1 + TICK2
    whole = stream().feed(data)
    s, pieces, at = stream(), [], 0
    for size in sizes * (len(data) // sum(sizes) + 1):
        pieces.append(data[at:at + size])
        at += size
    assert [x for piece in pieces for x in s.feed(piece)] == whole


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=2000))
def test_any_bytes_at_all_never_raise_but_a_flood(data):
    s = stream()
    s.feed(HEAD)
    s.feed(data)
    s.feed(b"\n" + TICK1)                       # and the stream still works afterwards
    assert len(s._partial) <= LINE_MAX and len(s._gpus) <= 64


def test_cpusets_and_shown_garbage():
    assert [cpuset_size(x) for x in ("0-3", "0-1,3", "7", "-", "3-1", "a")] == [4, 3, 1, None, None, None]
    assert ascii_shown(b"\x1b[31mred\xff") == "\\x1b[31mred\\xff"
    assert len(ascii_shown(b"y" * 500)) == 60
