"""What reaches a person (launcher/text.py): printable in time linear in the text, whatever its lines,
and without a secret this process knows, however it was cut."""
from __future__ import annotations

import unicodedata

import pytest

from launcher import text


def test_a_printable_line_is_not_looked_at_one_character_at_a_time(monkeypatch):
    """A host's log of 100 MB on one line (#46): each character once through unicodedata took
    longer than the log took to arrive. Printable text passes at C speed; only the rest is filtered."""
    def one_by_one(char):
        raise AssertionError("a printable line looked at character by character")
    monkeypatch.setattr(unicodedata, "category", one_by_one)
    line = "[worker:0] epoch 1/2 loss=0.31 acc=0.91 — ü " * 10_000
    assert text.printable(line) == line and text.printable(f"{line}\n{line}\n") == f"{line}\n{line}\n"
    with pytest.raises(AssertionError, match="character by character"):
        text.printable("a bell\x07 is no printable line")


def test_escape_sequences_controls_and_format_characters_still_go():
    assert text.printable("a\x1b]0;pwned\x07b\x1b[2J\x9bc\u202ed\te\nf\u00a0g") == "abcd\te\nf\u00a0g"


def test_a_known_secret_is_masked_whole_even_when_an_escape_sequence_cut_it_in_two():
    text.hide(["hunter2-pw"])
    assert text.printable("sudo said: hunter2-pw") == "sudo said: ***"
    assert text.printable("sudo said: hunter2\x1b[0m-pw") == "sudo said: ***"
    assert text.scrub("hunter2-pw in a file") == "*** in a file"
    text.hide(["abc"])                                  # too short to be a secret: left alone
    assert text.printable("abc") == "abc"


def test_a_stream_is_scrubbed_across_its_chunks():
    text.hide(["tok-5e5e5e5e"])
    scrubber = text.Scrubber()
    data = b"head tok-5e5e" + b"5e5e tail, tok-5e5e5e5e again\n"
    out = b"".join(scrubber.feed(data[i:i + 3]) for i in range(0, len(data), 3)) + scrubber.close()
    assert out == b"head *** tail, *** again\n"
