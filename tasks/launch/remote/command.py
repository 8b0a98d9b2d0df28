"""One way to run a command on a host: directly on this machine, or over ssh (never a password prompt), with a
timeout; a failure is one line naming the host, what was being done, and the reason (the command's last line on
standard error)."""
from __future__ import annotations

import re
import shlex
import subprocess
from concurrent.futures import ThreadPoolExecutor
from typing import IO, Callable, TypeVar

from tasks.launch.remote.addresses import is_local

# never a password prompt; a host that stops answering ends the connection within ServerAliveInterval x
# ServerAliveCountMax seconds (a lost host mid-transfer is an error within a minute, not a hang)
SSH_OPTIONS = ("-o", "BatchMode=yes", "-o", "ConnectTimeout=10", "-o", "ServerAliveInterval=5",
               "-o", "ServerAliveCountMax=4")
SSH_FAILED = 255  # ssh's own exit: the host was not reached, or the connection or the remote process was lost
Result = TypeVar("Result")


class RemoteError(RuntimeError):
    """A command on a host failed or did not answer in time; the message is one line naming the host.
    `unreachable`: ssh itself could not reach the host."""

    def __init__(self, message: str, unreachable: bool = False) -> None:
        super().__init__(message)
        self.unreachable = unreachable


def ssh_command(host: str, remote: str, options: tuple[str, ...] = SSH_OPTIONS) -> list[str]:
    """The argv that runs the shell command line `remote` on `host`."""
    return ["ssh", *options, host, remote]


def host_command(host: str, argv: list[str]) -> list[str]:
    """`argv` as it runs on `host`: itself on this machine, else over ssh (quoted for the remote shell)."""
    return list(argv) if is_local(host) else ssh_command(host, shlex.join(argv))


SUMMARY_LINE = re.compile(r"Exiting with failure status due to previous errors")


def last_line(stderr: str | bytes, default: str = "no message") -> str:
    """The reason a command gave for failing: its last non-empty line on standard error."""
    text = stderr.decode(errors="replace") if isinstance(stderr, bytes) else stderr
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    told = [line for line in lines if not SUMMARY_LINE.search(line)] or lines  # tar's summary names no cause
    return (told or [default])[-1]


# ssh's own words for a connection that was up and went (its keep-alives unanswered, the peer gone)
CONNECTION_LOST = re.compile(r"not responding|closed by remote host|Broken pipe|Connection reset")


def failure(host: str, what: str, code: int, stderr: str | bytes) -> RemoteError:
    """One line for a command that exited non-zero on `host` (ssh's 255: the host was not reached, or was lost)."""
    if code == SSH_FAILED and not is_local(host):
        reason = last_line(stderr, default="")
        if CONNECTION_LOST.search(reason):
            return RemoteError(f"host {host} was lost ({what}): {reason}", unreachable=True)
        if not reason:  # ssh says why at log level INFO: a configured `LogLevel ERROR` hides a lost connection's
            return RemoteError(f"host {host} stopped answering ssh ({what}; ssh gave no reason)", unreachable=True)
        return RemoteError(f"host {host} cannot be reached by ssh without a password: {reason}", unreachable=True)
    return RemoteError(f"host {host}: {what} failed (exit {code}): {last_line(stderr)}")


def run_on(host: str, argv: list[str] | str, what: str, timeout: float = 60, input: str | bytes | None = None,
           stdin: IO[bytes] | int | None = None, stdout: IO[bytes] | int | None = subprocess.PIPE,
           check: bool = True) -> subprocess.CompletedProcess:
    """Run `argv` (or a shell command line) on `host`; RemoteError when it fails (`check`) or takes longer than
    `timeout` seconds. Output is bytes unless `input` is text. Its standard input is `input` or `stdin`, else
    nothing (never the terminal's: ssh would stop a backgrounded launcher on SIGTTIN, or eat what is typed)."""
    command = ssh_command(host, argv) if isinstance(argv, str) and not is_local(host) else \
        ["sh", "-c", argv] if isinstance(argv, str) else host_command(host, argv)
    if input is None and stdin is None:
        stdin = subprocess.DEVNULL
    try:
        done = subprocess.run(command, input=input, stdin=stdin, stdout=stdout, stderr=subprocess.PIPE,
                              text=isinstance(input, str), timeout=timeout)
    except subprocess.TimeoutExpired:
        raise RemoteError(f"host {host} did not answer within {timeout:g} s ({what})") from None
    if check and done.returncode != 0:
        raise failure(host, what, done.returncode, done.stderr)
    return done


def on_each_host(hosts: list[str], ask: Callable[[str], Result]) -> dict[str, Result]:
    """`ask(host)` for every host at once; host -> answer, in the hosts' order."""
    if not hosts:
        return {}
    with ThreadPoolExecutor(max_workers=len(hosts)) as pool:
        return dict(zip(hosts, pool.map(ask, hosts)))
