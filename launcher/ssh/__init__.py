"""The SSH transport (after fabric): hosts known only as a type, no stage, no plan.

    base.py        the Runner protocol (the real connection and the tests' fake), a command's Result
    connection.py  one lazy connection per host: run, stream, hold; every command bounded in time
    session.py     a host's SSH session opened (carrier, host key, retries); sftp.py its SFTP channel
    channel.py     one command's channel pumped: stdin sent, stdout and stderr read, bounded
    group.py       the cluster's connections for the length of a command
    fanout.py      one function on many hosts at once: `.succeeded`, `.failed`
    transfer.py    files over SFTP, what comes back checked
    tunnel.py      a command held for the launcher's life, and a local port carried to a host
    jump.py        the bastions a connection goes through; proxy.py what a session runs over
    host_keys.py   known_hosts honoured, unknown keys refused (strict) or learnt (accept-new)
    explain.py     what a failed connection means, in words the user can act on
"""
