"""What of the tracker's settings is secret, and text and environments without it.

A token or password reaches MLflow's client in the URI (`https://user:token@host/`, or a
`?token=` query) or in the environment (MLFLOW_TRACKING_TOKEN, MLFLOW_TRACKING_USERNAME and
_PASSWORD for basic auth). None of it may appear in anything tfcompose writes or prints, nor in a
hook's environment: the URI is shown without its user part and query, and every message that
comes from MLflow or requests (which name the URL they failed on) is scrubbed of each secret.
"""
from __future__ import annotations

import os
from typing import Iterable, Optional
from urllib.parse import parse_qsl, unquote, urlsplit, urlunsplit

URI_ENV = "MLFLOW_TRACKING_URI"
SECRET_ENV = ("MLFLOW_TRACKING_TOKEN", "MLFLOW_TRACKING_PASSWORD", "MLFLOW_TRACKING_USERNAME",
              "MLFLOW_TRACKING_CLIENT_CERT_PATH", "MLFLOW_TRACKING_AUTH")
MASK = "***"
MIN_LENGTH = 4


def shown(uri: str) -> str:
    """The URI as it may be printed and kept: `https://***@host:5000/path` (query masked too)."""
    try:
        parts = urlsplit(uri)
    except ValueError:
        return MASK
    netloc = parts.netloc
    if "@" in netloc:
        netloc = MASK + "@" + netloc.rsplit("@", 1)[1]
    return urlunsplit((parts.scheme, netloc, parts.path, MASK if parts.query else "", ""))


def has_secret(uri: str) -> bool:
    return shown(uri) != uri


def secrets(uri: Optional[str], environ: Optional[dict] = None) -> list[str]:
    """Every secret string: the URI's user part (as written and decoded), its password (or the
    user name when there is no password: a token given as the user), its query values, and the
    token and password variables' values; longest first, so a longer one is masked whole. Strings
    under MIN_LENGTH characters are left out: no real secret is that short, and masking every
    `tfc` would garble every message."""
    environ = os.environ if environ is None else environ
    found: set[str] = set()
    if uri:
        try:
            parts = urlsplit(uri)
            userinfo = parts.netloc.rsplit("@", 1)[0] if "@" in parts.netloc else ""
            user, _, password = userinfo.partition(":")
            for piece in (userinfo, password or user) if userinfo else ():
                found.update({piece, unquote(piece)})
            found.update(value for _key, value in parse_qsl(parts.query))
            if userinfo or parts.query:
                found.add(uri)
        except ValueError:
            found.add(uri)
    found.update(environ.get(name, "") for name in ("MLFLOW_TRACKING_TOKEN", "MLFLOW_TRACKING_PASSWORD"))
    return sorted((s for s in found if len(s) >= MIN_LENGTH), key=len, reverse=True)


def scrub(text: str, secret: Iterable[str]) -> str:
    for value in secret:
        text = text.replace(value, MASK)
    return text


def without_secrets(environ: dict[str, str], uri: Optional[str]) -> dict[str, str]:
    """An environment for something of the user's (a hook) with none of the tracker's secrets:
    the secret variables gone, and any variable whose value holds a secret (the URI itself, or a
    variable the inventory's `${…}` took a token from)."""
    secret = secrets(uri, environ)
    return {k: v for k, v in environ.items()
            if k not in SECRET_ENV and not any(s in v for s in secret)}
