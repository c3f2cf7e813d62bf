"""`jobkit report`'s usage errors: one line, exit 2, no traceback."""

from __future__ import annotations

from tests.plugins.invoke import Invoke


def test_no_id_is_a_usage_error(jobkit: Invoke) -> None:
    result = jobkit("report")
    assert (result.code, result.err) == (2, "jobkit: give one or more job IDs, or --last\n")


def test_an_unknown_id_is_named(jobkit: Invoke) -> None:
    result = jobkit("report", "nosuch", "--json")
    assert (result.code, result.out, result.err) == (2, "", "jobkit: no tracked job 'nosuch'\n")


def test_last_without_jobs(jobkit: Invoke) -> None:
    result = jobkit("report", "--last")
    assert (result.code, result.err) == (2, "jobkit: --last: no tracked jobs yet\n")
