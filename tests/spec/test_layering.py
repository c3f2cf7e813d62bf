"""Layering: defaults < site profile < job file < --set (in order) < --backend."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from jobkit.core.errors import SpecError
from jobkit.spec.load import load_spec
from tests.spec.conftest import CliRunner

JOB = """\
name: demo
profile: site
resources:
  nodes: 2
  time: 30
env:
  modules: [mine]
  vars:
    FROM_JOB: "1"
  nccl: ethernet
run:
  train:
    config: tiny-lm
"""

PROFILE = """\
backend: slurm
resources:
  nodes: 8
  partition: gpu
  account: 12345
env:
  modules: [cuda, nccl]
  vars:
    FROM_PROFILE: "1"
  nccl:
    preset: infiniband
    ib_hca: mlx5
"""

OTHER = "backend: pbs\nresources:\n  partition: cpu\n"


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """A job file naming profile `site`, which lives in its own folder; returns the job."""
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "site.yaml").write_text(PROFILE, encoding="utf-8")
    (profiles / "other.yml").write_text(OTHER, encoding="utf-8")
    job = tmp_path / "job.yaml"
    job.write_text(JOB, encoding="utf-8")
    return job


def dirs(job: Path) -> list[Path]:
    return [job.parent / "profiles"]


def test_defaults_fill_what_no_layer_sets(site: Path) -> None:
    loaded = load_spec(site, profile_dirs=dirs(site))
    assert loaded.spec.resources.gpus_per_node == 0
    assert loaded.spec.launch.launcher == "torchrun"
    assert loaded.origin("launch.launcher") == "default"


def test_profile_over_defaults(site: Path) -> None:
    loaded = load_spec(site, profile_dirs=dirs(site))
    assert loaded.spec.backend == "slurm"
    assert loaded.spec.resources.partition == "gpu"
    assert loaded.spec.resources.account == "12345"  # a number where text is expected
    assert loaded.profile_path == site.parent / "profiles" / "site.yaml"
    assert loaded.origin("resources.partition") == f"{site.parent / 'profiles' / 'site.yaml'}:4"


def test_file_over_profile(site: Path) -> None:
    loaded = load_spec(site, profile_dirs=dirs(site))
    assert loaded.spec.resources.nodes == 2
    assert loaded.origin("resources.nodes") == f"{site}:4"


def test_lists_replace_and_mappings_merge(site: Path) -> None:
    loaded = load_spec(site, profile_dirs=dirs(site))
    assert loaded.spec.env.modules == ["mine"]
    assert loaded.spec.env.vars == {"FROM_PROFILE": "1", "FROM_JOB": "1"}


def test_shorthand_merges_like_its_long_form(site: Path) -> None:
    nccl = load_spec(site, profile_dirs=dirs(site)).spec.env.nccl
    assert (nccl.preset, nccl.ib_hca) == ("ethernet", "mlx5")


def test_set_over_file_and_later_set_wins(site: Path) -> None:
    loaded = load_spec(
        site,
        sets=["resources.nodes=3", "env.modules=[cuda, nccl]", "resources.nodes=4"],
        profile_dirs=dirs(site),
    )
    assert loaded.spec.resources.nodes == 4
    assert loaded.spec.env.modules == ["cuda", "nccl"]
    assert loaded.origin("resources.nodes") == "--set resources.nodes=4"
    assert loaded.origin(("env", "modules", 1)) == "--set env.modules=[cuda, nccl]"


def test_backend_over_set(site: Path) -> None:
    loaded = load_spec(site, sets=["backend=local"], backend="pbs", profile_dirs=dirs(site))
    assert loaded.spec.backend == "pbs"
    assert loaded.origin("backend") == "--backend pbs"


def test_set_values_are_yaml(site: Path) -> None:
    loaded = load_spec(
        site,
        sets=[
            "resources.exclusive=yes",
            "resources.time=01:00:00",
            "run.train.overrides.train.steps=50",
            "env.vars.NCCL_DEBUG=INFO",
            "scheduler.mail_type=[END, FAIL]",
            "scheduler.mail_user=me@example.org",
        ],
        profile_dirs=dirs(site),
    )
    spec = loaded.spec
    assert spec.resources.exclusive is True
    assert spec.resources.time == 3600
    assert spec.run.train is not None
    # Overrides are text, as written: the trainer parses `--set train.steps=50` itself.
    assert spec.run.train.overrides == {"train.steps": "50"}
    assert spec.env.vars["NCCL_DEBUG"] == "INFO"
    assert spec.scheduler.mail_type == ["END", "FAIL"]


def test_set_can_swap_train_for_command(site: Path) -> None:
    loaded = load_spec(
        site, sets=["run.train=", "run.command=python3 mine.py --lr 0.1"], profile_dirs=dirs(site)
    )
    assert loaded.spec.run.train is None
    assert loaded.spec.run.command == ["python3", "mine.py", "--lr", "0.1"]


def test_profile_option_over_file(site: Path) -> None:
    loaded = load_spec(site, profile="other", profile_dirs=dirs(site))
    assert loaded.spec.profile == "other"
    assert loaded.spec.resources.partition == "cpu"
    assert loaded.spec.backend == "pbs"
    assert loaded.profile_path == site.parent / "profiles" / "other.yml"


def test_empty_profile_set_drops_the_profile(site: Path) -> None:
    loaded = load_spec(site, sets=["profile="], backend="slurm", profile_dirs=dirs(site))
    assert loaded.profile_path is None
    assert loaded.spec.resources.partition is None


def test_profile_error_names_the_profile_file_and_line(site: Path) -> None:
    bad = site.parent / "profiles" / "site.yaml"
    bad.write_text(PROFILE.replace("account: 12345", "account: 12345\n  mem: 32x"), "utf-8")
    with pytest.raises(SpecError) as caught:
        load_spec(site, profile_dirs=dirs(site))
    assert (
        caught.value.show()
        == f"{bad}:6: resources.mem: must be a size like 32G or 500M (got '32x')"
    )


def test_value_overridden_above_is_not_an_error(site: Path) -> None:
    bad = site.parent / "profiles" / "site.yaml"
    bad.write_text(PROFILE.replace("nodes: 8", "nodes: 0"), "utf-8")
    assert load_spec(site, profile_dirs=dirs(site)).spec.resources.nodes == 2


def test_unknown_profile_lists_those_found(site: Path) -> None:
    site.write_text(JOB.replace("profile: site", "profile: sight"), "utf-8")
    with pytest.raises(SpecError) as caught:
        load_spec(site, profile_dirs=dirs(site))
    assert caught.value.show() == f"{site}:2: profile: unknown profile 'sight' (found: other, site)"


def test_unknown_profile_without_any_profiles(tmp_path: Path) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(JOB, "utf-8")
    with pytest.raises(SpecError) as caught:
        load_spec(job, profile_dirs=[tmp_path / "none"])
    expected = (
        f"{job}:2: profile: unknown profile 'site' (no profiles found in {tmp_path / 'none'})"
    )
    assert caught.value.show() == expected


def test_unknown_profile_option(site: Path) -> None:
    with pytest.raises(SpecError) as caught:
        load_spec(site, profile="gpu", profile_dirs=dirs(site))
    assert (
        caught.value.show() == "--profile gpu: profile: unknown profile 'gpu' (found: other, site)"
    )


def test_profile_name_must_be_a_name(site: Path) -> None:
    site.write_text(JOB.replace("profile: site", "profile: ../etc/x"), "utf-8")
    with pytest.raises(SpecError) as caught:
        load_spec(site, profile_dirs=dirs(site))
    assert caught.value.show() == (
        f"{site}:2: profile: must be a profile name (letters, digits, . _ -; got '../etc/x')"
    )


def test_profile_cannot_name_a_profile(site: Path) -> None:
    (site.parent / "profiles" / "other.yml").write_text("profile: site\n", "utf-8")
    with pytest.raises(SpecError) as caught:
        load_spec(site, profile="other", profile_dirs=dirs(site))
    profile = site.parent / "profiles" / "other.yml"
    assert caught.value.show() == f"{profile}:1: profile: a profile cannot name another profile"


def test_profile_unknown_key_is_reported_in_the_profile(site: Path) -> None:
    profile = site.parent / "profiles" / "other.yml"
    profile.write_text("resources:\n  partition: cpu\n  acount: x\n", "utf-8")
    with pytest.raises(SpecError) as caught:
        load_spec(site, profile="other", profile_dirs=dirs(site))
    assert (
        caught.value.show()
        == f"{profile}:3: resources.acount: unknown key (did you mean 'account'?)"
    )


def test_profile_template_dir_is_relative_to_the_profile(site: Path) -> None:
    folder = site.parent / "profiles" / "tpl"
    folder.mkdir()
    profile = site.parent / "profiles" / "other.yml"
    profile.write_text(OTHER + "template_dir: tpl\n", "utf-8")
    loaded = load_spec(site, profile="other", profile_dirs=dirs(site))
    assert loaded.template_dir == folder
    override = site.parent / "mine"
    override.mkdir()
    loaded = load_spec(site, profile="other", template_dir=override, profile_dirs=dirs(site))
    assert loaded.template_dir == override


def test_profile_template_dir_must_exist(site: Path) -> None:
    profile = site.parent / "profiles" / "other.yml"
    profile.write_text("backend: pbs\ntemplate_dir: missing\n", "utf-8")
    with pytest.raises(SpecError) as caught:
        load_spec(site, profile="other", profile_dirs=dirs(site))
    missing = profile.parent / "missing"
    assert caught.value.show() == f"{profile}:2: template_dir: not a directory: {missing}"


def test_template_dir_option_must_exist(
    site: Path, cli: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JOBKIT_PROFILES", str(site.parent / "profiles"))
    result = cli("render", str(site), "--template-dir", "/nonexistent/t")
    assert result.err == "jobkit: --template-dir /nonexistent/t: not a directory: /nonexistent/t\n"
    assert (result.code, result.out) == (2, "")


def test_search_path_from_environment(
    site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_site_profiles: Path
) -> None:
    """JOBKIT_PROFILES entries (folders or files) come first, then $XDG_CONFIG_HOME."""
    user = no_site_profiles / "jobkit" / "profiles"
    user.mkdir(parents=True)
    (user / "site.yaml").write_text("backend: slurm\nresources:\n  partition: from-user\n", "utf-8")
    assert load_spec(site).spec.resources.partition == "from-user"

    single = tmp_path / "single" / "site.yaml"
    single.parent.mkdir()
    single.write_text("backend: slurm\nresources:\n  partition: from-file\n", "utf-8")
    monkeypatch.setenv(
        "JOBKIT_PROFILES", os.pathsep.join([str(single), str(site.parent / "profiles")])
    )
    loaded = load_spec(site)
    assert loaded.spec.resources.partition == "from-file"
    assert loaded.profile_path == single

    monkeypatch.setenv("JOBKIT_PROFILES", str(site.parent / "profiles"))
    assert load_spec(site).spec.resources.partition == "gpu"


def test_cli_layers(site: Path, cli: CliRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI options reach load_spec: a bad value set on the command line names the option."""
    monkeypatch.setenv("JOBKIT_PROFILES", str(site.parent / "profiles"))
    result = cli("render", str(site), "--set", "resources.nodes=0", "--backend", "slurm")
    assert result.err == "jobkit: --set resources.nodes=0: resources.nodes: must be >= 1 (got 0)\n"
    result = cli("render", str(site), "--backend", "local")
    assert result.err == (
        f"jobkit: {site}:4: resources.nodes: the local backend runs on one node (got 2)\n"
    )
