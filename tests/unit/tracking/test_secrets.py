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


# Every form a credential takes in a tracking URI, with a password holding what urllib reads as the
# start of a fragment, a path or a query, or refuses (#46: `#` and `/` in a password once left the
# URI with no user part found, so nothing was masked, and MLflow's "Invalid url" quoted it whole).
FORMS = [
    ("https://alice:Kq7#Zxw-0001@mlflow.lab:5000/", "Kq7#Zxw-0001", "https://***@mlflow.lab:5000/"),
    ("https://alice:Kq7/Zxw-0002@mlflow.lab:5000/", "Kq7/Zxw-0002", "https://***@mlflow.lab:5000/"),
    ("https://alice:Kq7?Zxw-0003@mlflow.lab:5000/x", "Kq7?Zxw-0003", "https://***@mlflow.lab:5000/x"),
    ("https://alice:Kq7@Zxw-0004@mlflow.lab:5000", "Kq7@Zxw-0004", "https://***@mlflow.lab:5000"),
    ("https://alice:Kq7%zzZxw-0005@mlflow.lab:5000", "Kq7%zzZxw-0005", "https://***@mlflow.lab:5000"),
    ("https://alice:Kq7%40Zxw-0006@mlflow.lab:5000", "Kq7@Zxw-0006", "https://***@mlflow.lab:5000"),   # written encoded
    ("https://alice:Kq7:Zxw-0007@[::1]:5000/", "Kq7:Zxw-0007", "https://***@[::1]:5000/"),
    ("https://alice:Kq7 Zxw-0008@mlflow.lab", "Kq7 Zxw-0008", "https://***@mlflow.lab"),
    ("https://Kq7#Zxw-0009@mlflow.lab/", "Kq7#Zxw-0009", "https://***@mlflow.lab/"),            # a token as the user
    ("https://mlflow.lab/?token=Kq7#Zx/w-0010", "Kq7#Zx/w-0010", "https://mlflow.lab/?***"),
    ("https://mlflow.lab/p?a=1&token=Kq7;Zxw-0011#frag", "Kq7;Zxw-0011", "https://mlflow.lab/p?***"),
    ("postgresql://u:Kq7/Zxw-0012@db.lab:5432/mlflow", "Kq7/Zxw-0012", "postgresql://***@db.lab:5432/mlflow"),
    ("http://u:Kq7Zxw-0013@[::1:5000", "Kq7Zxw-0013", "http://***@[::1:5000"),                 # urllib refuses it
]


def test_every_form_of_credential_is_found_and_masked_whatever_characters_it_holds():
    for uri, password, shown in FORMS:
        found = secrets.secrets(uri, {})
        assert secrets.shown(uri) == shown, uri
        said = secrets.scrub(f"Invalid url: {uri}/api/2.0/mlflow; password {password}", found)
        assert not any(part in said for part in ("Kq7", "Zx", password[-4:])), (uri, said)   # no piece of it either


def test_a_secret_is_masked_in_all_this_process_prints_once_known():
    from launcher import text
    secrets.remember("https://alice:s3#cr/et-77@mlflow.lab")
    assert text.printable("MLflow said: Invalid url https://alice:s3#cr/et-77@mlflow.lab/api") == \
        "MLflow said: Invalid url ***/api"
    assert text.printable("it was s3#cr\x1b[0m/et-77") == "it was ***"      # whole again once the escape is gone
