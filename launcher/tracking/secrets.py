"""What of the tracker's settings is secret, and text and environments without it.

A token or password reaches MLflow's client in the URI (`https://user:token@host/`, or a
`?token=` query) or in the environment (MLFLOW_TRACKING_TOKEN, MLFLOW_TRACKING_USERNAME and
_PASSWORD for basic auth). None of it may appear in anything tfcompose writes or prints, nor in a
hook's environment: the URI is shown without its user part and query, and every message that
comes from MLflow or requests (which name the URL they failed on) is scrubbed of each secret.

The URI is taken apart by hand, not by urllib: a password may hold `#`, `/`, `?`, `@` or a stray
`%`, which urllib reads as the start of a fragment, a path or a query (and so finds no user part
at all) or refuses. Here the user part is everything between `scheme://` and the last `@` of the
URI, whatever it holds: a URI that is ambiguous is masked more, never less.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Iterable, Optional
from urllib.parse import quote, unquote

from launcher.text import MASK, MIN_SECRET, hide, scrub as scrub_known

URI_ENV = "MLFLOW_TRACKING_URI"
SECRET_ENV = ("MLFLOW_TRACKING_TOKEN", "MLFLOW_TRACKING_PASSWORD", "MLFLOW_TRACKING_USERNAME",
              "MLFLOW_TRACKING_CLIENT_CERT_PATH", "MLFLOW_TRACKING_AUTH")
MIN_LENGTH = MIN_SECRET
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):(//)?")


@dataclass(frozen=True)
class Parts:
    scheme: str          # "" when the URI has none (a plain path)
    slashes: bool        # `scheme://`
    userinfo: str        # "" when there is none
    host: str            # host[:port], as written
    rest: str            # the path, then `?query` and `#fragment` as written


def parts(uri: str) -> Parts:
    """The URI taken apart with the user part found whatever characters it holds."""
    match = _SCHEME.match(uri)
    if not match:
        return Parts("", False, "", "", uri)
    scheme, slashes, after = match.group(1), bool(match.group(2)), uri[match.end():]
    if not slashes:
        return Parts(scheme, False, "", "", after)
    userinfo, at, hostpart = after.rpartition("@")
    if not at:
        hostpart = after
    cut = min((i for i in (hostpart.find(c) for c in "/?#") if i >= 0), default=len(hostpart))
    return Parts(scheme, True, userinfo, hostpart[:cut], hostpart[cut:])


def shown(uri: str) -> str:
    """The URI as it may be printed and kept: `https://***@host:5000/path` (its query masked, its
    fragment left out); a URI without a scheme's `//` is shown whole only when it holds no `@`."""
    p = parts(uri)
    if not p.slashes:
        return uri if "@" not in uri and "?" not in uri else MASK
    path, _, _ = p.rest.partition("#")
    path, question, _ = path.partition("?")
    return (f"{p.scheme}://" + (f"{MASK}@" if p.userinfo else "") + p.host + path + (f"?{MASK}" if question else ""))


def has_secret(uri: str) -> bool:
    return shown(uri) != uri


def _forms(value: str) -> set[str]:
    """A secret as written, decoded, and encoded as a URL would carry it (messages quote any)."""
    return {value, unquote(value), quote(value, safe=""), quote(unquote(value), safe=""), quote(unquote(value), safe=":")}


def _query_values(text: str) -> set[str]:
    found = set()
    for pair in text.split("&"):
        _, eq, value = pair.partition("=")
        found |= _forms(value) if eq else set()
    return found


def secrets(uri: Optional[str], environ: Optional[dict] = None) -> list[str]:
    """Every secret string: the URI's user part (as written, decoded and encoded), its password (or
    the user name when there is no password: a token given as the user), its query values, the
    whole URI when it holds any of these, and the token and password variables' values; longest
    first, so a longer one is masked whole. Strings under MIN_LENGTH characters are left out: no
    real secret is that short, and masking every `tfc` would garble every message."""
    environ = os.environ if environ is None else environ
    found: set[str] = set()
    if uri:
        p = parts(uri)
        user, colon, password = p.userinfo.partition(":")
        if p.userinfo:
            found |= _forms(p.userinfo) | _forms(password if colon else user)
        query = p.rest.partition("#")[0].partition("?")[2]
        found |= _query_values(query) | _query_values(uri.partition("?")[2])     # (a `?` in a password too)
        query = query or uri.partition("?")[2]
        if p.userinfo or query or (not p.slashes and "@" in uri):
            found |= {uri, p.userinfo + "@" + p.host} if p.userinfo else {uri}
    found.update(environ.get(name, "") for name in ("MLFLOW_TRACKING_TOKEN", "MLFLOW_TRACKING_PASSWORD"))
    return sorted((s for s in found if len(s) >= MIN_LENGTH), key=len, reverse=True)


def remember(uri: Optional[str], environ: Optional[dict] = None) -> list[str]:
    """The URI's secrets, also made known to every printer of this process (launcher/text.py)."""
    secret = secrets(uri, environ)
    hide(secret)
    return secret


def scrub(text: str, secret: Iterable[str] = ()) -> str:
    for value in sorted(secret, key=len, reverse=True):
        text = text.replace(value, MASK)
    return scrub_known(text)


def without_secrets(environ: dict[str, str], uri: Optional[str]) -> dict[str, str]:
    """An environment for something of the user's (a hook) with none of the tracker's secrets:
    the secret variables gone, and any variable whose value holds a secret (the URI itself, or a
    variable the inventory's `${…}` took a token from)."""
    secret = secrets(uri, environ)
    return {k: v for k, v in environ.items()
            if k not in SECRET_ENV and not any(s in v for s in secret)}
