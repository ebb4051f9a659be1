"""The reporter's transfer line, and the adapter for work done on this machine."""
from __future__ import annotations



def test_transfer_detail_shows_bytes_rate_and_eta():
    from launcher.reporter import transfer_detail
    assert transfer_detail("image", 100_000_000, 400_000_000, 4.0) == \
        "sending image: 100.0 of 400.0 MB, 25.0 MB/s, ETA 0:00:12"


def test_no_eta_until_the_rate_is_known_well_enough():
    from launcher.reporter import transfer_detail
    # A transfer's first report: its first KB after a second of set-up (was "ETA 359:49:26").
    first = transfer_detail("image", 1_500, 1_490_000_000, 1.3)
    assert first == "sending image: 0.0 of 1,490.0 MB, 0.0 MB/s" and "ETA" not in first
    assert "ETA" not in transfer_detail("image", 10_000_000, 1_490_000_000, 3.5)      # 3.5 s in, but < 2 % sent
    assert "ETA" not in transfer_detail("image", 100_000_000, 1_490_000_000, 2.0)     # 7 % sent, but only 2 s in
    assert transfer_detail("image", 120_000_000, 1_490_000_000, 4.0).endswith("30.0 MB/s, ETA 0:00:46")


def test_work_here_is_reported_about_once_a_second_and_its_end_exactly_once(monkeypatch):
    from launcher import reporter as rep
    now = [100.0]
    monkeypatch.setattr(rep.time, "monotonic", lambda: now[0])
    seen = rep.RecordingReporter()
    on_bytes = rep.local_reporter(seen, "docker save of t:1")
    for step in range(1, 31):                # 30 chunks, 0.1 s apart: 3 s of work
        now[0] += 0.1
        on_bytes(step * 10, 300)
    on_bytes(300, 300)                       # the end, told twice (a caller's last chunk and its close)
    reported = [detail for host, what, detail in seen.events if what == "local"]
    assert reported[-1] == "docker save of t:1 300/300" and reported.count("docker save of t:1 300/300") == 1
    assert 3 <= len(reported) <= 5, reported  # about once a second, not once per chunk


def test_a_transfers_rate_counts_from_its_first_bytes_not_from_the_work_before_them(monkeypatch):
    from launcher import reporter as rep
    now = [1000.0]
    monkeypatch.setattr(rep.time, "monotonic", lambda: now[0])
    seen = []

    class Shown:
        def transfer(self, host, what, done, total, elapsed_s):
            seen.append(rep.transfer_detail(what, done, total, elapsed_s))
    on_bytes = rep.transfer_reporter(Shown(), "h1", "image")
    now[0] += 300.0                          # the image saved and split here first: five minutes
    for second in range(1, 11):              # then 10 MB/s
        now[0] += 1.0
        on_bytes(second * 10_000_000, 1_500_000_000)
    assert seen[-1] == "sending image: 100.0 of 1,500.0 MB, 11.1 MB/s, ETA 0:02:06"     # not 0.3 MB/s, ETA 1:15:00
