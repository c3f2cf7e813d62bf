"""Template errors, the sandbox and site templates (render's template_dir)."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobkit.core.errors import JobkitError, SpecError
from jobkit.render.engine import TemplateError, render, template_context
from tests.render.helpers import spec_from

BASE = {"name": "site", "backend": "slurm", "run": {"command": ["hostname"]}}


def _site(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / "site" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path / "site"


def test_sandbox_refuses_python_internals(tmp_path: Path) -> None:
    site = _site(tmp_path, {"slurm/job.sh.j2": "#!/bin/bash\n{{ ''.__class__.__mro__ }}\n"})
    with pytest.raises(TemplateError) as caught:
        render(spec_from(BASE), site)
    message = caught.value.show()
    assert message.startswith(f"{site / 'slurm/job.sh.j2'}:2: ")
    assert "refused by the template sandbox" in message and "__class__" in message
    assert caught.value.exit_code == 2 and isinstance(caught.value, JobkitError)


def test_sandbox_refuses_unsafe_call_on_spec(tmp_path: Path) -> None:
    """Templates see the spec, but cannot reach Python internals through it either."""
    site = _site(tmp_path, {"slurm/job.sh.j2": "{{ spec.__init__.__globals__ }}\n"})
    with pytest.raises(TemplateError, match="refused by the template sandbox"):
        render(spec_from(BASE), site)


def test_template_cannot_change_the_spec(tmp_path: Path) -> None:
    site = _site(tmp_path, {"slurm/job.sh.j2": "{{ spec.env.vars.update({'X': '1'}) }}\n"})
    spec = spec_from(BASE)
    with pytest.raises(TemplateError, match="refused by the template sandbox"):
        render(spec, site)
    assert spec.env.vars == {}


def test_undefined_variable_is_an_error_with_its_line(tmp_path: Path) -> None:
    site = _site(tmp_path, {"slurm/job.sh.j2": "#!/bin/bash\n\necho {{ no_such_thing }}\n"})
    with pytest.raises(TemplateError) as caught:
        render(spec_from(BASE), site)
    assert caught.value.show() == (
        f"{site / 'slurm/job.sh.j2'}:3: undefined value: 'no_such_thing' is undefined"
    )


def test_undefined_attribute_is_not_an_empty_string(tmp_path: Path) -> None:
    site = _site(tmp_path, {"slurm/job.sh.j2": "echo {{ spec.resources.no_such_key | q }}\n"})
    with pytest.raises(TemplateError, match=r"job\.sh\.j2:1: undefined value: .*no_such_key"):
        render(spec_from(BASE), site)


def test_syntax_error_names_file_and_line(tmp_path: Path) -> None:
    site = _site(tmp_path, {"slurm/job.sh.j2": "#!/bin/bash\n{% if %}\n"})
    with pytest.raises(TemplateError) as caught:
        render(spec_from(BASE), site)
    message = caught.value.show()
    assert message.startswith(f"{site / 'slurm/job.sh.j2'}:2: template syntax error: ")
    assert "\n" not in message


def test_error_inside_an_included_partial_names_the_partial(tmp_path: Path) -> None:
    site = _site(tmp_path, {"common/env.sh.j2": "# site env\n{{ missing_in_partial }}\n"})
    with pytest.raises(TemplateError) as caught:
        render(spec_from(BASE), site)
    assert caught.value.show().startswith(f"{site / 'common/env.sh.j2'}:2: undefined value")


def test_quoting_filter_refuses_none(tmp_path: Path) -> None:
    """`q` of a missing optional value is a template bug, not an empty word."""
    site = _site(tmp_path, {"slurm/job.sh.j2": "echo {{ spec.resources.partition | q }}\n"})
    with pytest.raises(TemplateError, match=r"job\.sh\.j2:1: TypeError: cannot quote NoneType"):
        render(spec_from(BASE), site)


def test_site_template_replaces_a_whole_template(tmp_path: Path) -> None:
    site = _site(tmp_path, {"slurm/job.sh.j2": "#!/bin/bash\necho {{ spec.name | q }} site\n"})
    assert render(spec_from(BASE), site) == "#!/bin/bash\necho site site\n"


def test_site_template_extends_the_builtin_and_overrides_blocks(tmp_path: Path) -> None:
    child = (
        '{% extends "builtin/slurm/job.sh.j2" %}\n'
        "{% block directives %}\n"
        "{{ super() }}"
        "#SBATCH --reservation={{ spec.resources.partition or 'none' | dq }}\n"
        "{% endblock %}\n"
        "{% block environment %}\n"
        "{{ super() }}"
        "source /site/profile.sh\n"
        "{% endblock %}\n"
    )
    site = _site(tmp_path, {"slurm/job.sh.j2": child})
    builtin = render(spec_from(BASE))
    script = render(spec_from(BASE), site)
    assert "#SBATCH --open-mode=append\n#SBATCH --reservation=none\n" in script
    assert "source /site/profile.sh\n" in script
    # Everything else is the built-in script, line for line.
    extra = {"#SBATCH --reservation=none", "source /site/profile.sh"}
    assert [line for line in script.splitlines() if line not in extra] == builtin.splitlines()


def test_site_partial_overrides_the_builtin_partial(tmp_path: Path) -> None:
    """A site's common/env.sh.j2 is used by every backend's template."""
    site = _site(tmp_path, {"common/env.sh.j2": "module purge  # site environment\n"})
    for backend in ("slurm", "local"):
        script = render(spec_from({**BASE, "backend": backend}), site)
        assert "module purge  # site environment\n" in script


def test_missing_site_dir_falls_back_to_builtin(tmp_path: Path) -> None:
    assert render(spec_from(BASE), tmp_path / "nothing-here") == render(spec_from(BASE))


def test_extending_a_missing_template_is_a_clear_error(tmp_path: Path) -> None:
    site = _site(tmp_path, {"slurm/job.sh.j2": '{% extends "builtin/slurm/nope.j2" %}\n'})
    with pytest.raises(TemplateError, match=r"template not found: builtin/slurm/nope\.j2"):
        render(spec_from(BASE), site)


def test_submitit_renders_no_script() -> None:
    assert render(spec_from({**BASE, "backend": "submitit"})) == ""


def test_backslash_in_logs_dir_is_refused_for_slurm() -> None:
    spec = spec_from({**BASE, "logs": {"dir": "a\\b"}})
    with pytest.raises(SpecError) as caught:
        render(spec)
    assert caught.value.key == "logs.dir" and "backslash" in caught.value.show()


def test_hetjob_directive_is_refused() -> None:
    spec = spec_from({**BASE, "scheduler": {"extra": ["HetJob"]}})
    with pytest.raises(SpecError) as caught:
        render(spec)
    assert caught.value.key == "scheduler.extra"
    assert "heterogeneous job" in caught.value.show()


def test_words_containing_hetjob_are_fine() -> None:
    """sbatch 22.05 only splits at a line whose first word is hetjob (checked on the cluster)."""
    spec = spec_from({**BASE, "scheduler": {"extra": ["--comment='no hetjob here'"]}})
    assert '#SBATCH "--comment=no hetjob here"\n' in render(spec)


def test_unsplittable_extra_entry_is_refused() -> None:
    spec = spec_from({**BASE, "scheduler": {"extra": ["--comment='unbalanced"]}})
    with pytest.raises(SpecError) as caught:
        render(spec)
    assert caught.value.key == "scheduler.extra" and "cannot split" in caught.value.show()


def test_pbs_pro_array_syntax_is_checked() -> None:
    spec = spec_from({**BASE, "backend": "pbs", "scheduler": {"array": "1,3,5"}})
    with pytest.raises(SpecError) as caught:
        render(spec)
    assert caught.value.key == "scheduler.array"
    torque = spec_from(
        {**BASE, "backend": "pbs", "scheduler": {"array": "1,3,5", "pbs_flavor": "torque"}}
    )
    assert "#PBS -t 1,3,5\n" in render(torque)


def test_pbs_mail_type_without_equivalent_is_refused() -> None:
    spec = spec_from(
        {
            **BASE,
            "backend": "pbs",
            "scheduler": {"mail_user": "a@b", "mail_type": ["TIME_LIMIT_80"]},
        }
    )
    with pytest.raises(SpecError) as caught:
        render(spec)
    assert caught.value.key == "scheduler.mail_type" and "TIME_LIMIT_80" in caught.value.show()


def test_context_lists_the_documented_variables() -> None:
    """docs/templates.md documents exactly these names."""
    context = template_context(spec_from(BASE))
    documented = Path(__file__).resolve().parents[2] / "docs" / "templates.md"
    text = documented.read_text()
    for name in context:
        assert f"`{name}`" in text, f"context variable {name} is not documented"


def test_site_partial_can_wrap_the_builtin_partial(tmp_path: Path) -> None:
    partial = '{% include "builtin/common/env.sh.j2" %}\nsource /site/ml-env.sh\n'
    site = _site(tmp_path, {"common/env.sh.j2": partial})
    spec = spec_from({**BASE, "backend": "local", "env": {"vars": {"A": "1"}}})
    script = render(spec, site)
    assert "  export A=1\n  source /site/ml-env.sh\n" in script


def test_child_blocks_see_the_parent_top_level_names(tmp_path: Path) -> None:
    child = (
        '{% extends "builtin/slurm/job.sh.j2" %}\n'
        "{% block header %}echo {{ res.nodes }} {{ m.program_words() }}\n{% endblock %}\n"
    )
    site = _site(tmp_path, {"slurm/job.sh.j2": child})
    spec = spec_from({**BASE, "run": {"command": ["my prog"]}})
    assert "\necho 1 'my prog'\n" in render(spec, site)


def test_docs_example_is_the_rendered_script() -> None:
    docs = (Path(__file__).resolve().parents[2] / "docs" / "templates.md").read_text()
    start = docs.index("<!-- rendered: slurm-2node.slurm.sh -->\n```bash\n")
    body = docs[start:].split("```bash\n", 1)[1].split("```\n<!-- end rendered -->", 1)[0]
    golden = Path(__file__).resolve().parent / "golden/examples/slurm-2node.slurm.sh"
    assert body == golden.read_text()
