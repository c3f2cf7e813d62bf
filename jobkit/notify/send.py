"""Sending one message: a webhook (JSON `{"text": ...}`, as Slack and Mattermost take it),
mail (SMTP host, or the local sendmail reading the recipients from the headers), a command
(the facts in its environment). Secrets stay out of argv: the URL is used in this process,
the mail address goes through stdin or SMTP, and errors never show the URL."""

from __future__ import annotations

import json
import os
import shutil
import smtplib
import socket
import subprocess
import urllib.error
import urllib.request
from email.message import EmailMessage

from jobkit.notify.message import Message

TIMEOUT_S = 15.0


class SendError(Exception):
    """A message that could not be sent: one line, without the secret."""


def webhook_url(value: str) -> str:
    """The URL itself: `value`, or the environment variable `$NAME` it names."""
    if value.startswith("$"):
        url = os.environ.get(value[1:], "")
        if not url:
            raise SendError(f"notify.webhook: the environment variable {value[1:]} is not set")
        return url
    return value


def send_webhook(value: str, message: Message) -> None:
    """POST `{"text": ..., "username": "jobkit"}`; a non-2xx answer is an error."""
    body = json.dumps({"text": message.text(), "username": "jobkit"}).encode()
    request = urllib.request.Request(
        webhook_url(value),
        data=body,
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as answer:
            status = answer.status
    except urllib.error.HTTPError as err:
        raise SendError(f"webhook answered HTTP {err.code}") from None
    except (urllib.error.URLError, OSError, ValueError) as err:
        reason = getattr(err, "reason", err)
        raise SendError(f"webhook not reached: {reason}") from None
    if not 200 <= status < 300:
        raise SendError(f"webhook answered HTTP {status}")


def mail(message: Message, address: str) -> EmailMessage:
    """The mail for `address`."""
    mail = EmailMessage()
    mail["To"] = address
    mail["From"] = f"jobkit@{socket.getfqdn()}"
    mail["Subject"] = message.subject
    mail.set_content(message.text())
    return mail


def send_email(address: str, smtp: str | None, message: Message) -> None:
    """Through `smtp` (HOST[:PORT]) or the local `sendmail -t -i` (recipients from the
    headers, so the address is never an argument)."""
    built = mail(message, address)
    if smtp:
        host, _, port = smtp.partition(":")
        try:
            with smtplib.SMTP(host, int(port or 25), timeout=TIMEOUT_S) as server:
                server.send_message(built)
        except (smtplib.SMTPException, OSError) as err:
            raise SendError(f"mail via {smtp} failed: {err}") from None
        return
    sendmail = shutil.which("sendmail") or next(
        (p for p in ("/usr/sbin/sendmail", "/usr/lib/sendmail") if os.access(p, os.X_OK)), None
    )
    if sendmail is None:
        raise SendError("no sendmail on this machine: set notify.smtp to an SMTP host")
    try:
        done = subprocess.run(
            [sendmail, "-t", "-i"],
            input=built.as_bytes(),
            capture_output=True,
            timeout=TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        raise SendError(f"sendmail failed: {err}") from None
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise SendError(f"sendmail exit {done.returncode}: {said[0] if said else ''}")


def run_command(argv: list[str], message: Message) -> None:
    """Run the user's command (no shell) with the facts in its environment."""
    try:
        done = subprocess.run(
            argv,
            env={**os.environ, **message.environment()},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        raise SendError(f"notify.command {argv[0]}: {err}") from None
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise SendError(
            f"notify.command {argv[0]} exit {done.returncode}: {said[-1] if said else ''}"
        )
