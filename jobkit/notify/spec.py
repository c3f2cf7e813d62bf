"""The spec's `notify:` section: which events, and where the message goes (docs/notify.md).

Checked as the spec loads, so a bad address or a URL without its scheme is one
`file:line: key: message` line at submit, never a message lost a week later.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import AfterValidator, BeforeValidator, Field, create_model, model_validator

from jobkit.spec.model import StrictModel
from jobkit.spec.values import Argv, SafeStr

EVENTS = ("start", "end", "fail", "stall")
Event = Literal["start", "end", "fail", "stall"]
_URL = re.compile(r"https?://[^\s/?#]+[^\s]*")
_ENV_REF = re.compile(r"\$[A-Za-z_][A-Za-z0-9_]*")
_ADDRESS = re.compile(r"[^@\s<>,;\"']+@[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?")
_HOST_PORT = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?(?::[0-9]{1,5})?")


def _webhook(value: str) -> str:
    if _ENV_REF.fullmatch(value) or _URL.fullmatch(value):
        return value
    if "://" not in value:
        raise ValueError(
            "a webhook URL needs its scheme (https://...), or $NAME: an environment variable"
            " holding the URL (keeps the secret out of the job file)"
        )
    raise ValueError("a webhook URL is http:// or https:// followed by a host")


def _address(value: str) -> str:
    if not _ADDRESS.fullmatch(value):
        raise ValueError(f"{value!r} is not a mail address (user@host)")
    return value


def _smtp(value: str) -> str:
    if not _HOST_PORT.fullmatch(value):
        raise ValueError(f"{value!r}: give HOST or HOST:PORT")
    return value


def _default_events() -> list[Event]:
    return ["fail"]


def _events(value: object) -> object:
    return [value] if isinstance(value, str) else value


class _NotifyKeys(StrictModel):
    """Messages about the job, sent from the machine that runs `jobkit watch` or `jobkit
    submit --wait` (a login node reaches the network; compute nodes often do not), or by
    the job itself (`notify.from: job`)."""

    on: Annotated[list[Event], BeforeValidator(_events)] = Field(
        default_factory=_default_events,
        description="The events to send: start, end, fail (any end but success), stall (no"
        " progress for monitor.stall_after).",
    )
    webhook: Annotated[SafeStr, AfterValidator(_webhook)] | None = Field(
        None,
        description='A Slack/Mattermost-style incoming webhook (JSON {"text": ...}), or'
        " $NAME: the environment variable that holds it (the URL is a secret).",
    )
    email: Annotated[SafeStr, AfterValidator(_address)] | None = Field(
        None, description="Mail address for the message (the local sendmail, or notify.smtp)."
    )
    smtp: Annotated[SafeStr, AfterValidator(_smtp)] | None = Field(
        None, description="HOST or HOST:PORT of an SMTP server (default: the local sendmail)."
    )
    command: Argv | None = Field(
        None,
        description="A program run with the facts in its environment (JOBKIT_NOTIFY_EVENT,"
        " _JOB, _NAME, _STATE, _ELAPSED, _DIAGNOSIS, _TEXT); never through a shell.",
    )

    @model_validator(mode="after")
    def _job_sends_no_stall(self) -> Any:
        if sender(self) == "job" and "stall" in self.on:
            raise ValueError(
                "notify.on: stall needs a watcher (jobkit watch): with notify.from: job the"
                " job itself sends start, end and fail only"
            )
        return self


SENDERS = ("watcher", "job")

_FROM_KEY: dict[str, Any] = {
    "from": (
        Literal["watcher", "job"],
        Field(
            "watcher",
            description="Who sends: watcher (jobkit watch or submit --wait, where you work)"
            " or job (the job itself as it starts and ends, from its compute node; slurm,"
            " local and ssh).",
        ),
    )
}

# `from` is a Python keyword: the key is added under its own name (read it with `sender`).
if TYPE_CHECKING:
    Notify = _NotifyKeys
else:
    Notify = create_model(
        "Notify",
        __base__=_NotifyKeys,
        __doc__=_NotifyKeys.__doc__,
        __module__=__name__,
        **_FROM_KEY,
    )


def sender(notify: object) -> str:
    """`notify.from` of a section (a model or its JSON form): watcher or job."""
    value = notify.get("from") if isinstance(notify, dict) else getattr(notify, "from", None)
    return str(value) if value in SENDERS else "watcher"
