"""Real receivers for the notification tests: a local HTTP server (stdlib http.server)
taking webhook POSTs, and an aiosmtpd SMTP server keeping the mails it gets."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email import message_from_bytes
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Webhook:
    """The URL to post to and every JSON body received, in order."""

    url: str
    bodies: list[dict[str, Any]] = field(default_factory=list)
    status: int = 200


@contextmanager
def webhook_server() -> Iterator[Webhook]:
    """A webhook receiver on 127.0.0.1 (a free port) for the duration of the block."""
    hook = Webhook(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            hook.bodies.append(json.loads(self.rfile.read(length)))
            self.send_response(hook.status)
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    hook.url = f"http://127.0.0.1:{server.server_address[1]}/hooks/secret-token"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield hook
    finally:
        server.shutdown()
        server.server_close()


@dataclass
class Mailbox:
    """The SMTP server's HOST:PORT and the mails it received."""

    address: str
    mails: list[Message] = field(default_factory=list)


@contextmanager
def smtp_server() -> Iterator[Mailbox]:
    """An aiosmtpd server on 127.0.0.1 keeping every mail."""
    import socket

    from aiosmtpd.controller import Controller

    box = Mailbox(address="")

    class Keep:
        async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
            box.mails.append(message_from_bytes(envelope.content))
            return "250 OK"

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    controller = Controller(Keep(), hostname="127.0.0.1", port=port)
    controller.start()
    box.address = f"127.0.0.1:{port}"
    try:
        yield box
    finally:
        controller.stop()
