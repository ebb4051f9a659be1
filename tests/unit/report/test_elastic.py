"""An elastic run's re-forms in the report: said in report.md, marked on the trial's curves."""
from __future__ import annotations

from launcher.report import elastic

REFORM = {"generation": 1, "at": "2026-11-28T05:00:00Z", "lost": ["h2"], "why": "h2: silent for 46 s",
          "hosts_after": ["h0", "h1"], "workers_before": 3, "candidate": "small_cnn", "epochs_done": 2}


def test_each_re_form_is_said_with_the_hosts_before_and_after_and_where_the_trial_went_on():
    doc = {"elastic": {"batch": "keep_global", "workers_at_start": 3, "reforms": [REFORM]}}
    text = "\n".join(elastic.lines(doc))
    assert "## The cluster changed" in text
    assert "generation 1, h2 lost for good (h2: silent for 46 s): 3 → 2 hosts (h0, h1); small_cnn went on from " \
           "epoch 3." in text
    assert "the same global batch" in text and "the run ended on 2 host(s)" in text
    assert elastic.lines({}) == [] and elastic.lines({"elastic": {"reforms": []}}) == []


def test_the_mark_sits_between_the_last_epoch_kept_and_the_first_trained_again_on_that_trial_only():
    doc = {"elastic": {"batch": "keep_global", "workers_at_start": 3, "reforms": [REFORM]}}
    assert elastic.marks(doc, "small_cnn") == [(2.5, "3→2 hosts")]
    assert elastic.marks(doc, "deep_cnn") == [] and elastic.marks({}, "small_cnn") == []


def test_a_host_taken_back_is_said_as_such_and_the_run_ends_on_the_hosts_after_it():
    back = {"generation": 2, "at": "2026-11-28T05:03:00Z", "lost": [], "joined": ["h2"], "why": "",
            "hosts_after": ["h0", "h1", "h2"], "workers_before": 2, "candidate": "small_cnn", "epochs_done": 5}
    doc = {"elastic": {"batch": "keep_global", "workers_at_start": 3, "reforms": [REFORM, back]}}
    text = "\n".join(elastic.lines(doc))
    assert "generation 2, h2 taken back: 2 → 3 hosts (h0, h1, h2); small_cnn went on from epoch 6." in text
    assert "the run ended on 3 host(s)" in text and elastic.marks(doc, "small_cnn")[1] == (5.5, "2→3 hosts")


def test_a_resume_says_why_the_hosts_came_back():
    resume = {"generation": 2, "at": "2026-11-28T06:00:00Z", "lost": [], "joined": ["h2"],
              "why": "resumed by `up` after the run stopped", "hosts_after": ["h0", "h1", "h2"],
              "workers_before": 2}
    text = "\n".join(elastic.lines({"elastic": {"batch": "keep_global", "workers_at_start": 3,
                                                "reforms": [REFORM, resume]}}))
    assert "generation 2, h2 taken back (resumed by `up` after the run stopped): 2 → 3 hosts (h0, h1, h2)." \
           in text
