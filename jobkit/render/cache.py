"""A per-user cache of compiled templates: `render` skips Jinja's parse and compile.

Jinja keys each entry by template name and file, and checks it against a hash of the
template's source and Python's bytecode magic, so an edited template (or another Python) is
compiled afresh. The code Jinja compiles also depends on the environment's settings
(whitespace control, sandbox, undefined): entry names carry a fingerprint of them and of
jobkit's version, so no jobkit runs code compiled under other settings. Compiled code is
executed, so the folder is used only when it belongs to this user and nobody else may write
to it. The cache never fails a render: an entry that cannot be read is compiled again, one
that cannot be written is skipped.

Where: $JOBKIT_TEMPLATE_CACHE, else $XDG_CACHE_HOME/jobkit/templates, else
~/.cache/jobkit/templates; `JOBKIT_TEMPLATE_CACHE=off` turns it off.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Mapping

import jinja2
from jinja2.bccache import Bucket

from jobkit.core.cache_folder import cache_dir, private_folder
from jobkit.core.version import __version__


class ForgivingBytecodeCache(jinja2.FileSystemBytecodeCache):
    """Jinja's file cache, except that reading or writing an entry never raises."""

    def load_bytecode(self, bucket: Bucket) -> None:
        """Fill `bucket` from its file; a missing, foreign or damaged entry leaves it empty."""
        try:
            super().load_bytecode(bucket)
        except Exception:  # a damaged entry is only a cache miss
            bucket.reset()

    def dump_bytecode(self, bucket: Bucket) -> None:
        """Write `bucket` (atomically, by Jinja); a full or read-only disk is ignored."""
        with contextlib.suppress(OSError):
            super().dump_bytecode(bucket)


def bytecode_cache(
    env: jinja2.Environment, environ: Mapping[str, str] | None = None
) -> jinja2.BytecodeCache | None:
    """The compiled-template cache for `env`, or None when off or its folder is not safely
    ours."""
    folder = cache_dir(environ)
    if folder is None or not private_folder(folder):
        return None
    return ForgivingBytecodeCache(str(folder), f"__jobkit_{settings_fingerprint(env)}_%s.cache")


def settings_fingerprint(env: jinja2.Environment) -> str:
    """A short hash of what, besides the source, shapes the code Jinja compiles for `env`."""
    settings = (
        __version__,
        type(env).__module__,
        type(env).__qualname__,
        env.block_start_string,
        env.block_end_string,
        env.variable_start_string,
        env.variable_end_string,
        env.comment_start_string,
        env.comment_end_string,
        env.line_statement_prefix,
        env.line_comment_prefix,
        env.trim_blocks,
        env.lstrip_blocks,
        env.newline_sequence,
        env.keep_trailing_newline,
        env.optimized,
        env.autoescape if isinstance(env.autoescape, bool) else "callable",
        env.undefined.__qualname__,
        sorted(env.extensions),
        sorted(getattr(env, "intercepted_binops", ())),
        sorted(getattr(env, "intercepted_unops", ())),
    )
    return hashlib.sha256(repr(settings).encode()).hexdigest()[:16]
