"""How a failure ends on the command line: one `error: ...` line last on stderr, exit 2 for bad input, 1 for a
failure of the run."""
from __future__ import annotations

import pytest

from tasks.errors import BAD_INPUT_EXIT, FAILURE_EXIT, is_bad_input, report, sentence
from tasks.launch.errors import PreflightError
from tasks.params import ParamsError
from trainer.checkpoint_files import CheckpointMismatch


class Flagged(RuntimeError):
    bad_input = True


def test_an_error_is_bad_input_only_when_its_class_says_so() -> None:
    assert is_bad_input(Flagged("x"))
    assert not is_bad_input(RuntimeError("x"))
    assert not is_bad_input(None)


@pytest.mark.parametrize("error", [PreflightError("p"), ParamsError("p"), CheckpointMismatch("p")])
def test_the_project_s_input_errors_say_they_are_bad_input(error: Exception) -> None:
    assert is_bad_input(error)


def test_the_sentence_is_the_first_line_that_says_something() -> None:
    assert sentence(RuntimeError("\n   \n  the host is down  \nTraceback: more")) == "the host is down"


@pytest.mark.parametrize("message", ["", "  \n\t\n"])
def test_an_error_that_says_nothing_is_named_by_its_type(message: str) -> None:
    assert sentence(ValueError(message)) == "ValueError"


def test_bad_input_is_reported_last_on_stderr_with_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    print("progress line")
    assert report(Flagged("bad parameter train.np\nmore detail")) == BAD_INPUT_EXIT == 2
    out, err = capsys.readouterr()
    assert out == "progress line\n"
    assert err.splitlines()[-1] == "error: bad parameter train.np"


def test_a_failure_of_the_run_is_reported_with_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    assert report(RuntimeError("rank 1 on localhost exited with 137")) == FAILURE_EXIT == 1
    assert capsys.readouterr().err == "error: rank 1 on localhost exited with 137\n"
