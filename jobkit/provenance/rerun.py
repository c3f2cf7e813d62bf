"""`jobkit rerun ID [--set ...]`: the job's snapshot and resolved spec submitted again as a
new run (docs/provenance.md). Refused when the snapshot is gone (the line says where it
was): a rerun never runs other code than the job did."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from jobkit.core import private
from jobkit.core.errors import JobkitError
from jobkit.provenance.record import recorded_code

if TYPE_CHECKING:
    from jobkit.manager.submit import Plan
    from jobkit.registry.record import JobRecord
    from jobkit.registry.store import Store
    from jobkit.spec.schema import JobSpec


def rerun_plan(record: JobRecord, sets: Sequence[str]) -> Plan:
    """The plan of a rerun: the recorded spec with `sets` on top, run from the recorded
    snapshot in the recorded submit folder."""
    from jobkit.manager.submit import plan_submission

    if record.task is not None:
        raise JobkitError(
            f"{record.jobkit_id} is task {record.task} of sweep {record.sweep_id}: rerun takes"
            " a job that is not a sweep task (submit the sweep again)"
        )
    code = recorded_code(record.job_dir)
    if code is not None and code.code_dir is not None and not code.code_dir.is_dir():
        raise JobkitError(
            f"{record.jobkit_id}: its code snapshot is gone (it was {code.code_dir}): nothing"
            " to rerun from"
        )
    spec = _spec_with(record, sets)
    template_dir = record.extra.get("template_dir")
    plan = plan_submission(
        spec, workdir=record.workdir, template_dir=Path(template_dir) if template_dir else None
    )
    return replace(plan, code=code)


def _spec_with(record: JobRecord, sets: Sequence[str]) -> JobSpec:
    """The recorded (resolved) spec loaded again as a job file with `sets` layered on top,
    so a bad --set is the usual one-line error."""
    from jobkit.spec.load import load_spec
    from jobkit.spec.schema import JobSpec

    data = dict(record.spec)
    data.pop("profile", None)  # layered already: its values are in the spec
    keep: dict[str, Any] = {k: data[k] for k in ("name", "backend", "run") if k in data}
    defaults = JobSpec.model_validate(keep).model_dump(mode="json")
    data = {**_without_defaults(data, defaults), **keep}
    with tempfile.TemporaryDirectory(prefix="jobkit-rerun-") as folder:
        path = Path(folder) / f"{record.jobkit_id}.yaml"
        private.write_file(path, yaml.safe_dump(data, sort_keys=False))
        return load_spec(path, sets=sets, profile_dirs=[]).spec


def _without_defaults(data: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    """`data` less the values equal to the schema's defaults (as validated): what was
    really asked for, so that a key the backend honours by not having it stays unset."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        default = defaults.get(key)
        if isinstance(value, dict) and isinstance(default, dict) and key != "vars":
            inner = _without_defaults(value, default)
            if inner:
                out[key] = inner
        elif value != default:
            out[key] = value
    return out


def rerun(store: Store, record: JobRecord, sets: Sequence[str]) -> JobRecord:
    """Submit the rerun and note on the new row which job it reruns."""
    from jobkit.manager.submit import submit

    new = submit(store, rerun_plan(record, sets))
    store.update_extra(new.jobkit_id, {"rerun_of": record.jobkit_id})
    return store.get(new.jobkit_id)
