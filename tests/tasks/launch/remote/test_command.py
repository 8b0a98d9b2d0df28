"""Running a command on a host: here directly, elsewhere over ssh; a failure is one line naming the host."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tasks.launch.remote.command import (
    SSH_OPTIONS,
    RemoteError,
    failure,
    host_command,
    last_line,
    on_each_host,
    run_on,
    ssh_command,
)
from tasks.paths import ROOT

UNREACHABLE = "nosuchhost.invalid"  # does not resolve: ssh fails at once, exit 255
SSH_REASON = r"ssh: Could not resolve hostname nosuchhost\.invalid"


def test_an_argv_runs_here_without_a_shell() -> None:
    done = run_on("localhost", ["printf", "%s|", "a b", "$HOME"], "printing")
    assert done.returncode == 0 and done.stdout == b"a b|$HOME|"


def test_a_command_line_runs_here_in_a_shell() -> None:
    assert run_on("127.0.0.1", "echo $((2 + 3)) | tr 5 7", "adding").stdout == b"7\n"


def test_text_input_gives_text_output() -> None:
    assert run_on("localhost", ["tr", "a-z", "A-Z"], "shouting", input="quiet\n").stdout == "QUIET\n"


def test_a_command_that_takes_too_long_is_one_line() -> None:
    with pytest.raises(RemoteError, match=r"^host localhost did not answer within 0\.2 s \(waiting\)$") as raised:
        run_on("localhost", ["sleep", "10"], "waiting", timeout=0.2)
    assert not raised.value.unreachable


def test_a_failing_command_names_the_host_what_and_its_last_line() -> None:
    script = "echo first >&2; echo 'the reason' >&2; echo >&2; exit 3"
    with pytest.raises(RemoteError) as raised:
        run_on("localhost", script, "doing it")
    assert str(raised.value) == "host localhost: doing it failed (exit 3): the reason"
    assert not raised.value.unreachable


def test_a_failure_is_returned_not_raised_unchecked() -> None:
    done = run_on("localhost", "echo out; echo why >&2; exit 4", "trying", check=False)
    assert (done.returncode, done.stdout, done.stderr) == (4, b"out\n", b"why\n")


def test_exit_255_here_is_the_commands_own_not_ssh() -> None:
    with pytest.raises(RemoteError) as raised:
        run_on("localhost", "exit 255", "exiting")
    assert str(raised.value) == "host localhost: exiting failed (exit 255): no message"
    assert not raised.value.unreachable


@pytest.mark.parametrize("command", [["true"], "true"])
def test_a_host_ssh_cannot_reach_is_one_line(command: list[str] | str) -> None:
    with pytest.raises(RemoteError, match=rf"^host {UNREACHABLE} cannot be reached by ssh without a password: "
                                          rf"{SSH_REASON}") as raised:
        run_on(UNREACHABLE, command, "checking")
    assert raised.value.unreachable


def test_failure_of_a_remote_command_is_not_taken_for_ssh_unless_255() -> None:
    error = failure(UNREACHABLE, "copying", 2, b"tar: oops\n")
    assert str(error) == f"host {UNREACHABLE}: copying failed (exit 2): tar: oops" and not error.unreachable
    refused = failure(UNREACHABLE, "copying", 255, "Connection closed\n")
    assert refused.unreachable and str(refused) == f"host {UNREACHABLE} cannot be reached by ssh without a " \
                                                  "password: Connection closed"


@pytest.mark.parametrize(("stderr", "expected"), [
    ("one\ntwo\n", "two"), (b"one\n  two  \n\n", "two"), ("", "no message"), (b"\n \n", "no message"),
    (b"bad \xff byte", "bad \ufffd byte"),
    ("tar: job/model: Cannot stat: No such file or directory\n"
     "tar: Exiting with failure status due to previous errors\n",
     "tar: job/model: Cannot stat: No such file or directory")])
def test_the_last_line_of_standard_error_is_the_reason(stderr: str | bytes, expected: str) -> None:
    assert last_line(stderr) == expected


def test_last_line_default() -> None:
    assert last_line("", default="nothing said") == "nothing said"


def test_an_argv_for_this_machine_is_itself() -> None:
    argv = ["python", "-c", "print('a b')"]
    command = host_command("localhost", argv)
    assert command == argv and command is not argv


def test_an_argv_for_another_host_goes_over_ssh_quoted() -> None:
    """Without a password prompt; the remote shell gets back exactly the arguments given."""
    command = host_command(UNREACHABLE, ["printf", "%s|", "a b", "$HOME", "it's"])
    assert command[:-1] == ["ssh", *SSH_OPTIONS, UNREACHABLE] and "BatchMode=yes" in SSH_OPTIONS
    as_the_remote_shell_runs_it = subprocess.run(["sh", "-c", command[-1]], capture_output=True, text=True, check=True)
    assert as_the_remote_shell_runs_it.stdout == "a b|$HOME|it's|"


def test_ssh_command_takes_other_options() -> None:
    assert ssh_command("h", "true", ("-q",)) == ["ssh", "-q", "h", "true"]
    assert ssh_command("h", "true") == ["ssh", *SSH_OPTIONS, "h", "true"]


def test_each_host_answers_in_the_hosts_order() -> None:
    assert on_each_host(["c", "a", "b"], str.upper) == {"c": "C", "a": "A", "b": "B"}
    assert list(on_each_host(["c", "a", "b"], str.upper)) == ["c", "a", "b"]
    assert on_each_host([], str.upper) == {}


def test_the_hosts_are_asked_at_once(tmp_path: Path) -> None:
    """Each host's command waits (up to 5 s) for the other's to have started: asked one after the other, the first
    would give up."""
    def ask(host: str) -> str:
        other = "b" if host == "a" else "a"
        script = (f"touch {tmp_path}/{host}; for i in $(seq 50); do "
                  f"[ -e {tmp_path}/{other} ] && echo {host} saw {other} && exit 0; sleep 0.1; done; exit 1")
        return run_on("localhost", script, f"waiting for {other}").stdout.decode().strip()
    assert on_each_host(["a", "b"], ask) == {"a": "a saw b", "b": "b saw a"}


def test_a_failure_on_one_host_is_raised() -> None:
    def ask(host: str) -> bytes:
        return run_on(host, ["true"], "checking").stdout
    with pytest.raises(RemoteError, match=f"^host {UNREACHABLE} cannot be reached"):
        on_each_host(["localhost", UNREACHABLE], ask)


@pytest.mark.parametrize("reason", ["Timeout, server h1 not responding.", "Connection to h1 closed by remote host.",
                                    "client_loop: send disconnect: Broken pipe"])
def test_a_host_lost_mid_command_is_said_so(reason: str) -> None:
    lost = failure("h1", "shipping the data /d", 255, f"{reason}\n")
    assert lost.unreachable and str(lost) == f"host h1 was lost (shipping the data /d): {reason}"


def test_ssh_gives_up_on_a_silent_host_within_half_a_minute() -> None:
    options = dict(option.partition("=")[::2] for option in SSH_OPTIONS[1::2])
    seconds = {key: int(options[key]) for key in ("ServerAliveInterval", "ServerAliveCountMax")}
    assert seconds["ServerAliveInterval"] * seconds["ServerAliveCountMax"] <= 30


LAUNCHER_WITH_A_TERMINAL = """
from pathlib import Path
from tasks.launch.remote.command import run_on
from tasks.launch.supervise.processes import Process, run_processes
print(run_on("localhost", ["cat"], "reading", timeout=20).stdout, flush=True)
run_processes([Process(["cat"], {})], Path("."), print)
print("done", flush=True)
"""


def test_no_command_reads_the_launcher_s_input() -> None:
    """The launcher's input stays open and empty (a terminal no one types into): a command that inherited it would
    wait on it (and in the background, ssh would be stopped by SIGTTIN). Stopped after a minute if it waits."""
    launcher = subprocess.Popen([sys.executable, "-c", LAUNCHER_WITH_A_TERMINAL], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True, cwd=ROOT, start_new_session=True)
    watchdog = threading.Timer(60, lambda: os.killpg(launcher.pid, signal.SIGKILL))
    watchdog.start()
    try:
        out = launcher.stdout.read()  # type: ignore[union-attr]
    finally:
        watchdog.cancel()
        launcher.kill()
        launcher.wait()
    assert out.split() == ["b''", "done"]


def test_a_host_that_stopped_answering_without_a_word_is_said_so() -> None:
    """ssh's `Timeout, server ... not responding.` is an INFO message: a `LogLevel ERROR` config hides it."""
    silent = failure("h1", "shipping the data /d", 255, b"")
    assert silent.unreachable and str(silent) == "host h1 stopped answering ssh (shipping the data /d; ssh gave no " \
                                                 "reason)"
