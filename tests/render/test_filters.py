"""The quoting filters templates use: q, qpath, qjoin, dq, dqwords."""

from __future__ import annotations

import shlex
import subprocess

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobkit.backends.batch import mail_letters as pbs_mail_events
from jobkit.core.errors import SpecError
from jobkit.render.quoting import (
    directive_quote,
    directive_words,
    quote,
    quote_join,
    quote_path,
    shell_word,
)

# What the schema lets reach a script: anything but newline, carriage return and NUL.
script_text = st.text(st.characters(exclude_characters="\n\r\x00", exclude_categories=["Cs"]))


@given(script_text)
def test_q_round_trips_through_shlex(text: str) -> None:
    assert shlex.split(quote(text)) == [text]


@given(script_text)
def test_dq_round_trips_through_shlex(text: str) -> None:
    assert shlex.split("--x=" + directive_quote(text)) == ["--x=" + text]


@given(st.lists(script_text, max_size=5))
def test_qjoin_keeps_every_word(words: list[str]) -> None:
    assert shlex.split(quote_join(words)) == words


def test_q_reaches_bash_as_one_word() -> None:
    text = 'a\'b "c" $(x) `y` \\ ; | & * ~ ü'
    done = subprocess.run(
        ["bash", "-c", f"printf '%s' {quote(text)}"], capture_output=True, text=True, check=True
    )
    assert done.stdout == text


def test_scalars_become_words() -> None:
    assert [shell_word(v) for v in (True, False, 3, 0.5, "x")] == ["true", "false", "3", "0.5", "x"]
    assert quote(12) == "12"
    with pytest.raises(TypeError, match="cannot quote NoneType"):
        quote(None)


def test_qjoin_refuses_a_single_string() -> None:
    with pytest.raises(TypeError, match="list of words"):
        quote_join("python train.py")


def test_dq_leaves_plain_values_bare_and_quotes_the_rest() -> None:
    assert directive_quote("gpu:a100:4") == "gpu:a100:4"
    assert directive_quote("logs/%j.out") == "logs/%j.out"
    assert directive_quote("a b") == '"a b"'
    assert directive_quote('say "hi" \\ now') == '"say \\"hi\\" \\\\ now"'
    assert directive_quote("x#y") == '"x#y"'


def test_qpath_expands_only_a_leading_home() -> None:
    assert quote_path("~/venvs/torch env") == "\"$HOME\"/'venvs/torch env'"
    assert quote_path("~") == '"$HOME"'
    assert quote_path("~user/x") == "'~user/x'"
    assert quote_path("a/~/b") == "'a/~/b'"
    done = subprocess.run(
        ["bash", "-c", f"printf '%s' {quote_path('~/a b')}"],
        capture_output=True,
        text=True,
        check=True,
        env={"HOME": "/home/it's me"},
    )
    assert done.stdout == "/home/it's me/a b"


def test_dqwords_splits_like_a_shell() -> None:
    assert directive_words("--comment='two words' --x=1") == '"--comment=two words" --x=1'
    with pytest.raises(SpecError, match="cannot split"):
        directive_words("'open")


def test_pbs_mail_letters() -> None:
    assert pbs_mail_events(["END", "FAIL"]) == "ea"
    assert pbs_mail_events(["all", "END"]) == "abe"
    assert pbs_mail_events(["NONE"]) == "n"
