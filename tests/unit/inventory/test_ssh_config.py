"""The ssh config's ProxyJump and ProxyCommand, checked as the inventory's own fields are."""
from __future__ import annotations

import pytest

from launcher.errors import InventoryError
from launcher.inventory.ssh_config import SshConfig


def read(tmp_path, text: str) -> SshConfig:
    path = tmp_path / "ssh_config"
    path.write_text(text)
    return SshConfig(path)


def test_proxyjump_and_proxycommand_are_read_as_written_and_none_switches_them_off(tmp_path):
    config = read(tmp_path, "Host a\n  ProxyJump jump@gate:2200,inner\nHost b\n  ProxyCommand none\n"
                            "Host b c\n  ProxyCommand ssh -W %h:%p gate\n")
    assert config.lookup("a").proxy_jump == "jump@gate:2200,inner"
    assert config.lookup("b").proxy_command is None            # the first value wins, as in OpenSSH
    assert config.lookup("c").proxy_command == "ssh -W c:22 gate"


def test_a_malformed_proxyjump_names_the_file_the_host_and_the_keyword(tmp_path):
    config = read(tmp_path, "Host a\n  ProxyJump gate:ssh\n")
    with pytest.raises(InventoryError) as err:
        config.lookup("a")
    assert str(err.value).startswith(f"{tmp_path}/ssh_config: Host a: ProxyJump: Received 'gate:ssh' (")
    assert "Expected a jump host as [user@]host[:port]" in str(err.value)


def test_proxyjump_and_proxycommand_together_are_refused(tmp_path):
    # OpenSSH takes whichever comes first in the file; paramiko's reader cannot say which did.
    config = read(tmp_path, "Host a\n  ProxyCommand nc %h %p\nHost *\n  ProxyJump gate\n")
    with pytest.raises(InventoryError, match="Host a: ProxyJump: Received 'gate' and a ProxyCommand too"):
        config.lookup("a")
