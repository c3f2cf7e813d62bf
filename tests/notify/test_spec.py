"""notify: checked as the spec loads: a URL without its scheme, a bad address, an unknown
event are one `file:line: key: message` line (and `jobkit submit` exits 2, records nothing)."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobkit.core.errors import SpecError
from jobkit.spec.load import load_spec

BASE = "name: n\nbackend: local\nrun:\n  command: 'true'\nnotify:\n"


def _load(tmp_path: Path, lines: str) -> object:
    path = tmp_path / "job.yaml"
    path.write_text(BASE + lines)
    return load_spec(path, profile_dirs=[]).spec


@pytest.mark.parametrize(
    ("lines", "line", "key", "words"),
    [
        ("  webhook: hooks.slack.com/services/T0/B0/x\n", 6, "notify.webhook", "needs its scheme"),
        ("  webhook: ftp://example.org/x\n", 6, "notify.webhook", "http:// or https://"),
        ("  email: alice\n", 6, "notify.email", "'alice' is not a mail address"),
        ("  email: alice@example.org\n  smtp: 'mail host'\n", 7, "notify.smtp", "HOST:PORT"),
        ("  on: [fail, crash]\n", 6, "notify.on[1]", "(got 'crash')"),
    ],
)
def test_bad_config_is_one_line(
    tmp_path: Path, lines: str, line: int, key: str, words: str
) -> None:
    with pytest.raises(SpecError) as caught:
        _load(tmp_path, lines)
    shown = caught.value.show()
    assert "\n" not in shown
    assert shown.startswith(f"{tmp_path / 'job.yaml'}:{line}: {key}: "), shown
    assert words in shown, shown


def test_good_config_reads_as_written(tmp_path: Path) -> None:
    spec = _load(
        tmp_path,
        "  on: end\n  webhook: $SLACK_URL\n  email: a.b@c-d.example\n  smtp: localhost:2525\n"
        "  command: [notify-send, done]\n",
    )
    notify = spec.notify  # type: ignore[attr-defined]
    assert notify.on == ["end"]
    assert notify.webhook == "$SLACK_URL"
    assert (notify.email, notify.smtp) == ("a.b@c-d.example", "localhost:2525")
    assert notify.command == ["notify-send", "done"]


def test_default_is_fail_only(tmp_path: Path) -> None:
    notify = _load(tmp_path, "  webhook: https://example.org/hook\n").notify  # type: ignore[attr-defined]
    assert notify.on == ["fail"]
