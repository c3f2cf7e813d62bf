"""The rc file of `jobkit shell`: the job's environment, cut from the backend's own template.

`shell_rc(spec)` renders the `job_identity` block of the backend's template (JOBKIT_JOB_ID,
JOBKIT_RUN_DIR, MASTER_ADDR, MASTER_PORT, JOBKIT_NNODES...) and common/env.sh.j2 (modules,
conda, venv, env.python, env.setup, the NCCL and env.vars exports), then the `cd` to
run.workdir: the same text the job's script runs, so the shell sees what the job would.
Pure: reads template files, runs nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from jobkit.backends.registry import backend_class
from jobkit.core.errors import JobkitError
from jobkit.render.engine import BUILTIN_PREFIX, TemplateError, _environment, template_context
from jobkit.render.quoting import quote, quote_path

if TYPE_CHECKING:
    import jinja2

    from jobkit.spec.schema import JobSpec

IDENTITY_BLOCK = "job_identity"
ENV_TEMPLATE = "common/env.sh.j2"
MACROS_TEMPLATE = "common/macros.sh.j2"


def shell_rc(spec: JobSpec, template_dir: Path | None = None) -> str:
    """Bash lines that give an interactive shell the job's environment (see module doc)."""
    name = backend_class(spec.backend).template
    if name is None:
        raise JobkitError(f"shell: not available for the {spec.backend} backend")
    env = _environment(template_dir)
    try:
        values: dict[str, Any] = template_context(spec)
        values["m"] = env.get_template(MACROS_TEMPLATE).make_module(values)
        identity = _block(env, name, IDENTITY_BLOCK, values)
        software = env.get_template(ENV_TEMPLATE).render(values)
    except JobkitError:
        raise
    except Exception as err:  # a site template's undefined name, syntax error...
        raise TemplateError(f"{name}: cannot render the job's environment: {err}") from err
    parts = [
        "# jobkit shell: the job's environment (the job script's own lines).",
        "set -euo pipefail",
        identity.strip("\n"),
        software.strip("\n"),
    ]
    if spec.run.workdir:
        parts.append(f"cd -- {quote_path(spec.run.workdir)}")
    parts += [
        "# Interactive from here on: a failing command must not end the shell.",
        "set +euo pipefail",
        f'PS1={quote(f"(jobkit {spec.name}) ")}"${{PS1:-}}"',
    ]
    return "\n".join(part for part in parts if part) + "\n"


def _block(env: jinja2.Environment, name: str, block: str, values: dict[str, Any]) -> str:
    """One block of a template; a site template that does not override it falls back to the
    built-in template's."""
    template = env.get_template(name)
    if block not in template.blocks:
        template = env.get_template(f"{BUILTIN_PREFIX}/{name}")
    if block not in template.blocks:
        raise JobkitError(f"template {name} has no block {block!r}: jobkit shell needs it")
    context = template.new_context(values)
    return "".join(template.blocks[block](context))
