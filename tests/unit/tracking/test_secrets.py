"""The tracker's secrets: shown without them, scrubbed from text, kept out of a hook's environment."""
from __future__ import annotations

from launcher.tracking import secrets

URI = "https://lab:pw-7c1f9e2a@mlflow.lab:5000/base?token=q-5d2b8c"


def test_a_uri_is_shown_without_its_user_part_and_query():
    assert secrets.shown(URI) == "https://***@mlflow.lab:5000/base?***"
    assert secrets.shown("http://127.0.0.1:5000") == "http://127.0.0.1:5000"
    assert secrets.has_secret(URI) and not secrets.has_secret("http://127.0.0.1:5000")
    assert secrets.shown("https://tok-9f8e7d6c@host/") == "https://***@host/"      # a token given as the user


def test_every_secret_is_found_in_the_uri_and_the_environment_and_scrubbed_from_text():
    env = {"MLFLOW_TRACKING_TOKEN": "tok-aaaa1111", "MLFLOW_TRACKING_PASSWORD": "basic-bbbb2222"}
    found = secrets.secrets(URI, env)
    assert {"pw-7c1f9e2a", "q-5d2b8c", "tok-aaaa1111", "basic-bbbb2222", URI} <= set(found)
    said = secrets.scrub(f"API request to {URI}/api/2.0/runs failed (Bearer tok-aaaa1111)", found)
    assert "pw-7c1f9e2a" not in said and "tok-aaaa1111" not in said and "q-5d2b8c" not in said
    assert said.startswith("API request to ***")


def test_a_short_user_name_is_no_secret_and_leaves_text_alone():
    found = secrets.secrets("http://tfc:pw-0123456789@127.0.0.1:5000", {})
    assert "tfc" not in found
    assert secrets.scrub("tfcompose: sent", found) == "tfcompose: sent"
    assert secrets.secrets("http://127.0.0.1:5000", {"MLFLOW_TRACKING_TOKEN": "abc"}) == []   # too short to mask


def test_a_hooks_environment_loses_the_secret_variables_and_any_holding_a_secret():
    env = {"MLFLOW_TRACKING_TOKEN": "tok-aaaa1111", "MLFLOW_TRACKING_USERNAME": "me", "MLFLOW_TRACKING_PASSWORD": "p-bbbb2222",
           "MLFLOW_TRACKING_URI": URI, "MY_TOKEN": "pw-7c1f9e2a", "PATH": "/usr/bin", "TFC_CLUSTER": "tfc"}
    kept = secrets.without_secrets(env, URI)
    assert kept == {"PATH": "/usr/bin", "TFC_CLUSTER": "tfc"}
    plain = {"MLFLOW_TRACKING_URI": "http://127.0.0.1:5000", "PATH": "/usr/bin"}
    assert secrets.without_secrets(plain, "http://127.0.0.1:5000") == plain          # nothing secret: kept
