"""Which hosts are this machine, and its address and interfaces as other hosts see them."""
from __future__ import annotations

import socket

import pytest

from tasks.launch.remote.addresses import head_address, interface_names, interface_of, is_local, local_addresses

ELSEWHERE = "203.0.113.7"  # TEST-NET-3: an address of no host here (only compared, never sent to)


@pytest.fixture
def elsewhere() -> str:
    if ELSEWHERE in local_addresses():
        pytest.skip(f"{ELSEWHERE} is an address of this machine")
    return ELSEWHERE


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1", socket.gethostname()])
def test_this_machine_by_name_or_loopback_address_is_local(host: str) -> None:
    assert is_local(host)


def test_every_address_of_this_machines_interfaces_is_local() -> None:
    addresses = local_addresses()
    assert "127.0.0.1" in addresses
    assert all(is_local(address) for address in addresses)


def test_a_name_that_does_not_resolve_is_not_local() -> None:
    assert not is_local("nosuchhost.invalid")


def test_an_address_of_another_machine_is_not_local(elsewhere: str) -> None:
    assert not is_local(elsewhere)


def test_the_head_of_hosts_all_on_this_machine_is_localhost() -> None:
    assert head_address(["localhost", "127.0.0.1", socket.gethostname()]) == "localhost"
    assert head_address(["localhost"]) == "localhost"


def test_the_loopback_address_is_on_the_lo_interface() -> None:
    assert interface_of("127.0.0.1") == "lo"


def test_an_address_on_no_interface_here_has_no_interface(elsewhere: str) -> None:
    assert interface_of(elsewhere) is None


def test_this_machines_interfaces_are_listed_once_each_sorted_with_lo() -> None:
    names = interface_names()
    assert "lo" in names and names == sorted(set(names))
