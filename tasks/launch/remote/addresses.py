"""Which hosts are this machine, and this machine's address and interfaces as other hosts see them."""
from __future__ import annotations

import socket


def local_addresses() -> set[str]:
    """Every IPv4 address of this machine's interfaces."""
    import psutil
    return {address.address for addresses in psutil.net_if_addrs().values() for address in addresses
            if address.family == socket.AF_INET}


def is_local(host: str) -> bool:
    """Whether `host` is this machine (by name or by one of its addresses)."""
    if host in ("localhost", "127.0.0.1") or host == socket.gethostname():
        return True
    try:
        return socket.gethostbyname(host) in local_addresses()
    except OSError:
        return False


def head_address(hosts: list[str]) -> str:
    """This machine's address as the remote hosts reach it (the source address of its route to the first of them);
    'localhost' when every host is this machine."""
    remote = [host for host in hosts if not is_local(host)]
    if not remote:
        return "localhost"
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe_socket:
        probe_socket.connect((socket.gethostbyname(remote[0]), 9))  # no packet is sent: only the route is chosen
        return probe_socket.getsockname()[0]


def interface_of(address: str) -> str | None:
    """The name of this machine's interface holding `address`."""
    import psutil
    return next((name for name, addresses in psutil.net_if_addrs().items()
                 if any(entry.address == address for entry in addresses)), None)


def interface_names() -> list[str]:
    """This machine's network interfaces."""
    import psutil
    return sorted(psutil.net_if_addrs())
