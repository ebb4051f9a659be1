"""One host's SSH session opened (was in connection.py): what it runs over (TCP, a channel
through the bastions, or the ProxyCommand) checked to speak first, the host key verified by the
connection's policy and refused if revoked, a failed attempt retried with backoff, and every
failure said in words the user can act on (explain.py)."""
from __future__ import annotations

import socket

import paramiko

from launcher.errors import ConnectError, HostKeyError
from launcher.ssh import host_keys, proxy
from launcher.ssh.explain import explain, private_key, route
from launcher.ssh.jump import keyscan_via

KEEPALIVE_S = 15


def connect(conn) -> tuple[paramiko.SSHClient, proxy.Stream]:
    """The session to `conn.host` and what it runs over (to be closed with it), retried
    `conn.retries` times unless the host key or the login is refused."""
    attempt = 0
    while True:
        try:
            return _connect_once(conn)
        except HostKeyError as exc:  # raised by our policy with the key's name; name the host
            raise HostKeyError(conn.host.name, reason=exc.reason) from None
        except (socket.timeout, TimeoutError, ConnectionError, OSError, paramiko.SSHException, EOFError) as exc:
            if isinstance(exc, (paramiko.AuthenticationException, paramiko.BadHostKeyException)) \
                    or attempt >= conn.retries:
                raise explain(conn.host, exc, conn.known_hosts) from None
        except (ValueError, TypeError, IndexError) as exc:  # paramiko on a malformed key file or answer
            raise explain(conn.host, exc, conn.known_hosts) from None
        attempt += 1
        conn.cancel.wait(conn.backoff * 2 ** (attempt - 1))
        conn.check_cancel()


def _connect_once(conn) -> tuple[paramiko.SSHClient, proxy.Stream]:
    key = private_key(conn.host)       # a key file that is no key fails here, once, naming the file
    client = paramiko.SSHClient()
    known = host_keys.KnownHosts.read(conn.known_hosts, conn.host.name)
    known.install(client, conn.policy, conn.host.ssh_port, via=keyscan_via(conn.host.jumps))
    h = conn.host
    stream = _open_stream(conn)
    try:
        client.connect(h.address, port=h.ssh_port, username=h.ssh_user, pkey=key, sock=stream.sock,
                       timeout=conn.connect_timeout, banner_timeout=conn.connect_timeout,
                       auth_timeout=conn.connect_timeout, allow_agent=True, look_for_keys=h.identity_file is None)
    except Exception:
        client.close()
        stream.close()
        raise
    transport = client.get_transport()
    try:
        known.refuse_revoked(conn.host.name, transport.get_remote_server_key())
    except HostKeyError:
        client.close()
        stream.close()
        raise
    transport.set_keepalive(KEEPALIVE_S)
    return client, stream          # the stream: what the session runs over, ended with it


def _open_stream(conn) -> proxy.Stream:
    """What the session runs over (TCP, a channel through the bastions, or the ProxyCommand),
    once the server has begun to speak: a port where nothing answers with an SSH banner is
    said as such (and not retried), not as paramiko's `No existing session`."""
    h = conn.host
    if h.jumps:
        stream = conn.jumps.reach(h)          # a failed hop is named there
    elif h.proxy_command:
        stream = proxy.command(h.proxy_command, conn.connect_timeout)
    else:
        stream = proxy.tcp(h.address, h.ssh_port, conn.connect_timeout)
    try:
        silent = proxy.silent(stream, conn.connect_timeout)
    except OSError:
        stream.close()
        raise
    if silent:
        said = stream.said()
        stream.close()
        hint = said or f"is an SSH server listening on port {h.ssh_port}?"
        raise ConnectError(h.name, reason=f"ssh {h.ssh_user}@{h.address}:{h.ssh_port}{route(h)}: {silent} ({hint})")
    return stream
