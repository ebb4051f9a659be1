"""The reporter's transfer line."""
from __future__ import annotations



def test_transfer_detail_shows_bytes_rate_and_eta():
    from launcher.reporter import transfer_detail
    assert transfer_detail("image", 50_000_000, 200_000_000, 2.0) == \
        "sending image: 50.0 of 200.0 MB, 25.0 MB/s, ETA 0:00:06"
