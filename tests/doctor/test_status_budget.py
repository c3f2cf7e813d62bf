"""How many failed jobs one `jobkit status` diagnoses (doctor/cache.py, issue 25): at most
MAX_NEW_PER_STATUS whose logs must be read, and every one with no log file at all (nothing to
scan), so that a thousand failed jobs without logs are not tried again on 50 statuses."""

from __future__ import annotations

import shutil
from pathlib import Path

from jobkit.core.states import State
from jobkit.doctor.cache import cached, has_log_files, with_diagnoses
from jobkit.registry.store import Store
from tests.doctor.test_cli import NODE_OUT, _job


def test_jobs_without_logs_do_not_wait_for_the_budget(tmp_path: Path) -> None:
    with_logs = [_job(tmp_path / f"logs{i}", State.FAILED, 1, NODE_OUT) for i in range(3)]
    without = [_job(tmp_path / f"bare{i}", State.FAILED, 1, None) for i in range(4)]
    for i in range(4):
        shutil.rmtree(tmp_path / f"bare{i}")
    with Store() as store:
        records = store.list_jobs(texts=False)
        assert [has_log_files(r) for r in records].count(True) == 3
        first = with_diagnoses(store, records, limit=2)
        done = {r.jobkit_id for r in first if cached(r) is not None}
        assert set(without) <= done  # all four, beyond the limit of 2
        assert len(done & set(with_logs)) == 2
        # Kept in the registry: the next status diagnoses the last one and nothing again.
        second = with_diagnoses(store, store.list_jobs(texts=False), limit=2)
        assert all(cached(r) is not None for r in second)
        for record in second:
            entry = cached(record)
            assert entry is not None
            if record.jobkit_id in without:
                assert entry["line"] is None and entry["class"] == "unknown"
            else:
                assert entry["class"] == "python_exception"
