"""A site's own backend, installed by another package through the `jobkit.backends` entry-point
group: the registry finds it, the spec accepts its name, and the built-ins keep theirs."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from jobkit.backends import registry
from jobkit.backends.base import Backend
from jobkit.core.errors import UsageError

PLUGIN = """
from jobkit.backends.base import Backend, Submitted


class SiteBackend(Backend):
    name = "site"
    display_name = "Site Scheduler"
    chooses_nodes = True
    accounting_sources = frozenset({"site-history"})
    honours = {"resources.time": "directive"}

    @classmethod
    def task_label(cls, scheduler_id, task):
        return f"{scheduler_id}:{task}"

    @classmethod
    def split_task_id(cls, scheduler_id):
        job, sep, task = scheduler_id.partition(":")
        return (job, task) if sep and task.isdigit() else (scheduler_id, None)

    def submit_argv(self, request):
        return ["site-submit", str(request.script_path)]

    def submit(self, request):
        return Submitted("1", self.submit_argv(request))

    def poll(self, jobs):
        return {}

    def cancel(self, jobs):
        return None

    def script(self, spec, template_dir, workdir):
        return "#!/bin/bash\\necho site\\n"
"""


@pytest.fixture
def site_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """An installed distribution (a dist-info folder on sys.path) with the entry point
    `site = jobkit_site_backend:SiteBackend`, and another that tries to take `slurm`."""
    (tmp_path / "jobkit_site_backend.py").write_text(PLUGIN)
    info = tmp_path / "jobkit_site_backend-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: jobkit-site-backend\nVersion: 1.0\n"
    )
    (info / "entry_points.txt").write_text(
        "[jobkit.backends]\nsite = jobkit_site_backend:SiteBackend\n"
        "slurm = jobkit_site_backend:SiteBackend\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    registry._plugins.cache_clear()
    registry.backend_class.cache_clear()
    yield
    registry._plugins.cache_clear()
    registry.backend_class.cache_clear()
    sys.modules.pop("jobkit_site_backend", None)


def test_an_installed_backend_is_found_and_usable(site_package: None) -> None:
    assert registry.backend_names()[-1] == "site"
    assert registry.is_known("site")
    backend = registry.get_backend("site")
    assert isinstance(backend, Backend) and backend.name == "site"


def test_a_plugin_cannot_take_a_builtin_name(site_package: None) -> None:
    assert registry.backend_class("slurm").__module__ == "jobkit.backends.slurm.backend"


def test_the_spec_accepts_an_installed_backend(site_package: None) -> None:
    from jobkit.spec.schema import JobSpec

    spec = JobSpec.model_validate({"name": "x", "backend": "site", "run": {"command": ["true"]}})
    assert spec.backend == "site"


def test_without_the_package_the_name_is_unknown() -> None:
    registry._plugins.cache_clear()
    assert not registry.is_known("site")
    with pytest.raises(UsageError, match="unknown backend 'site'"):
        registry.get_backend("site")


def test_an_installed_backend_gets_its_facts_used_everywhere(
    site_package: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Display name, bad nodes, task ids, accounting sources and honoured keys come from the
    backend's own class: nothing outside jobkit/backends/ names a backend."""
    from dataclasses import replace

    from jobkit.cli.sweepview import backend_word
    from jobkit.core.errors import SpecError
    from jobkit.manager.attempts import accounting_sources
    from jobkit.manager.badnodes import failure_of
    from jobkit.registry.ids import resolve_job_task
    from jobkit.registry.store import Store
    from jobkit.spec.load import load_spec

    assert backend_word("site") == "Site Scheduler"
    assert "site-history" in accounting_sources("site")
    monkeypatch.setenv("JOBKIT_HOME", str(tmp_path / "home"))
    with Store() as store:
        record = store.create_intent(
            backend="site", name="s", spec={}, script="", workdir=tmp_path, extra={"array": "0-3"}
        )
        store.mark_submitted(record.jobkit_id, scheduler_id="77", argv=[], log_paths={})
        found, task = resolve_job_task(store, "77:2")
        assert (found.jobkit_id, task) == (record.jobkit_id, "2")
        failed = replace(store.get(record.jobkit_id), state="NODE_FAIL", nodes="s1 s2")
    failure = failure_of(failed, registry.backend_class("site").node_names)
    assert failure is not None and failure.nodes == ("s1", "s2")

    spec = tmp_path / "job.yaml"
    spec.write_text(
        "name: s\nbackend: site\nresources:\n  time: 10\n  mem: 1G\nrun:\n  command: prog\n"
    )
    with pytest.raises(SpecError) as refused:
        load_spec(spec, profile_dirs=[])
    assert refused.value.show() == (
        f"{spec}:5: resources.mem: the site backend has no memory request here (remove the key)"
    )
