"""The cases, in the order they run; each module has NAME, TITLE and run(ctx)."""

from __future__ import annotations

from types import ModuleType

from bench.cases import (
    cli_startup,
    frozen_code,
    gpu,
    log_follow,
    status_scale,
    submit_train,
    sweep_submit,
    trainer,
)

CASES: list[ModuleType] = [
    cli_startup,
    status_scale,
    submit_train,
    sweep_submit,
    trainer,
    log_follow,
    gpu,
    frozen_code,
]
SHORT = {
    "cli": "cli_startup",
    "status": "status_scale",
    "submit": "submit_train",
    "sweep": "sweep_submit",
    "trainer": "trainer",
    "logs": "log_follow",
    "gpu": "gpu",
    "frozen": "frozen_code",
}


def resolve_cases(text: str) -> list[ModuleType]:
    """`all` or comma-separated names / short names -> case modules, in run order."""
    by_name = {module.NAME: module for module in CASES}
    if text.strip() == "all":
        return list(CASES)
    wanted: set[str] = set()
    for word in text.split(","):
        word = word.strip()
        if not word:
            continue
        name = SHORT.get(word, word)
        if name not in by_name:
            known = ", ".join(f"{full} ({short})" for short, full in SHORT.items())
            raise ValueError(f"--cases: unknown case {word!r} (known: {known})")
        wanted.add(name)
    if not wanted:
        raise ValueError("--cases: name at least one case")
    return [module for module in CASES if module.NAME in wanted]
