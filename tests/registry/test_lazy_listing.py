"""A listing read lazily (registry/texts.py, issue 25): `list_jobs(texts=False)`, what
`jobkit status` reads, gives the same records as a whole read; the spec and script are read,
and the JSON columns and job folder decoded, only when a caller asks for them.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from jobkit.registry import texts
from jobkit.registry.db import RegistryError
from jobkit.registry.store import Store, TaskIntent

SPEC = {"name": "lazy", "backend": "slurm", "run": {"command": "true"}}


def _jobs(store: Store, count: int) -> list[str]:
    ids = []
    for i in range(count):
        record = store.create_intent(
            backend="slurm",
            name=f"j{i}",
            spec={**SPEC, "name": f"j{i}"},
            script=f"#!/bin/bash\necho {i}\n",
            workdir=Path("/tmp/work"),
            token=f"tok{i}",
            extra={"n": i},
        )
        store.mark_submitted(
            record.jobkit_id,
            scheduler_id=str(1000 + i),
            argv=["sbatch", f"{i}.sh"],
            log_paths={"out": f"/tmp/{i}.out"},
            extra={"array": False},
        )
        ids.append(record.jobkit_id)
    return ids


def _stored_texts_reads(monkeypatch: pytest.MonkeyPatch, store: Store) -> list[int]:
    """The sizes of the texts queries the store makes from now on."""
    sizes: list[int] = []
    real = store._stored_texts

    def counted(ids: list[str]) -> dict[str, tuple[str, str]]:
        sizes.append(len(ids))
        return real(ids)

    monkeypatch.setattr(store, "_stored_texts", counted)
    return sizes


def test_a_lazy_listing_equals_a_whole_read(monkeypatch: pytest.MonkeyPatch) -> None:
    with Store() as store:
        _jobs(store, 5)
        whole = store.list_jobs()
        reads = _stored_texts_reads(monkeypatch, store)
        lazy = store.list_jobs(texts=False)
        assert [r.to_dict() for r in lazy] == [r.to_dict() for r in whole]
        assert reads == []  # to_dict shows neither spec nor script: nothing read
        assert lazy == whole  # every field, the texts included
        assert [r.spec for r in lazy] == [r.spec for r in whole]
        assert [r.script for r in lazy] == [f"#!/bin/bash\necho {i}\n" for i in range(4, -1, -1)]
        assert all(isinstance(r.job_dir, Path) for r in lazy)
        assert lazy[0].extra == {"n": 4, "array": False}
        assert lazy[0].submit_argv == ["sbatch", "4.sh"]


def test_texts_are_read_one_by_one_then_in_one_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(texts, "ONE_BY_ONE", 2)
    with Store() as store:
        _jobs(store, 6)
        reads = _stored_texts_reads(monkeypatch, store)
        lazy = store.list_jobs(texts=False)
        assert lazy[0].script.endswith("echo 5\n") and lazy[1].spec["name"] == "j4"
        assert reads == [1, 1]
        assert [r.script for r in lazy[2:]] == [f"#!/bin/bash\necho {i}\n" for i in (3, 2, 1, 0)]
        assert reads == [1, 1, 4]  # the rest of the listing at once, then nothing more
        changed = lazy[3].with_columns({"state": "FAILED"})  # a copy keeps its listing
        assert changed.script.endswith("echo 2\n") and reads == [1, 1, 4]


def test_a_sweep_task_gets_the_texts_it_shares() -> None:
    with Store() as store:
        sweep_id = store.new_id()
        store.create_sweep_intents(
            backend="slurm",
            name="sw",
            spec=SPEC,
            script="#!/bin/bash\nshared\n",
            workdir=Path("/tmp/work"),
            sweep_id=sweep_id,
            tasks=[TaskIntent(task=str(i), token=f"t{i}", extra={}) for i in range(3)],
            job_dir=store.jobs_dir / sweep_id,
        )
        lazy = store.list_jobs(texts=False)
        assert {r.script for r in lazy} == {"#!/bin/bash\nshared\n"}
        assert all(r.spec == SPEC for r in lazy)


def test_a_damaged_column_is_refused_when_asked_for(jobkit_home: Path) -> None:
    with Store() as store:
        (jobkit_id,) = _jobs(store, 1)
    with sqlite3.connect(jobkit_home / "jobkit.db") as conn:
        conn.execute("UPDATE jobs SET extra = '{not json' WHERE jobkit_id = ?", (jobkit_id,))
    with Store() as store:
        (record,) = store.list_jobs(texts=False)
        assert record.name == "j0"  # the rest of the row reads
        with pytest.raises(RegistryError, match="a job's row cannot be read: JSONDecodeError"):
            _ = record.extra
        with pytest.raises(RegistryError, match="a job's row cannot be read"):
            store.list_jobs()  # a whole read refuses the same row at once, as before


def test_a_job_gone_from_the_registry_says_so(jobkit_home: Path) -> None:
    with Store() as store:
        (jobkit_id,) = _jobs(store, 1)
        (record,) = store.list_jobs(texts=False)
        with sqlite3.connect(jobkit_home / "jobkit.db") as conn:
            conn.execute("DELETE FROM job_texts WHERE jobkit_id = ?", (jobkit_id,))
        with pytest.raises(RegistryError, match="no longer in the registry"):
            _ = record.script


def test_other_missing_attributes_still_raise() -> None:
    with Store() as store:
        _jobs(store, 1)
        (record,) = store.list_jobs(texts=False)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = record.nope  # type: ignore[attr-defined]
