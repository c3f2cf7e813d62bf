"""Slurm's pending-job reason codes in plain words, with what fixes each: data plus one
lookup, `explain(reason)` (pure; docs/why.md is the same table for people).

A reason is matched as Slurm prints it: an exact code (`Resources`), a code with details
after a comma (`ReqNodeNotAvail, UnavailableNodes:n1`), a family of limits by its parts
(`AssocGrpGRES`, `QOSMaxCpuPerUserLimit`: Assoc/QOS, Grp/Max/Min, the resource), or a
sentence Slurm writes instead of a code (`launch failed requeued held`). Anything else is
shown verbatim with a pointer to `man squeue`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from jobkit.backends.slurm.reason_codes import (
    PHRASES,
    REASONS,
    RESUBMIT,
    SHOW_ASSOC,
    SHOW_QOS,
    Entry,
)
from jobkit.backends.waiting import Explanation, unknown_reason

_FAMILY = re.compile(
    r"^(?P<scope>Assoc|QOS|)(?P<kind>Grp|Max|Min)"
    r"(?P<what>Cpus?|CPUs?|Memory|Mem|Nodes?|GRES|SubmitJobs?|Jobs?|Wall|Billing|Energy"
    r"|License|BB|Unknown)(?P<rest>\w*)$"
)
_WHAT = {
    "cpu": ("CPUs", "`resources.cpus_per_task` or `resources.nodes`"),
    "mem": ("memory", "`resources.mem`"),
    "node": ("nodes", "`resources.nodes`"),
    "gres": ("GPUs (generic resources)", "`resources.gpus_per_node` or `resources.nodes`"),
    "job": ("running jobs", ""),
    "submitjob": ("queued jobs", ""),
    "wall": ("wall time", "`resources.time`"),
    "billing": ("billing units", "`resources`"),
    "energy": ("energy", "`resources`"),
    "license": ("licenses", "the licenses in `scheduler.extra`"),
    "bb": ("burst-buffer space", "the burst buffer in `scheduler.extra`"),
    "unknown": ("a resource", "`resources`"),
}


def _what_key(word: str) -> str:
    lowered = word.lower()
    if lowered in ("gres", "bb"):
        return lowered
    return "mem" if lowered == "memory" else lowered.removesuffix("s")


def family_entry(code: str) -> Entry | None:
    """The entry of an Assoc*/QOS* limit code, built from its parts; None if not one."""
    match = _FAMILY.match(code)
    if not match:
        return None
    scope, kind, rest = match["scope"], match["kind"], match["rest"]
    what, keys = _WHAT[_what_key(match["what"])]
    owner = "your account association" if scope == "Assoc" else "its QOS"
    show = SHOW_ASSOC if scope == "Assoc" else SHOW_QOS
    minutes = "Minutes" in rest
    if kind == "Min":
        return Entry(
            f"it asks for fewer {what} than {owner}'s minimum",
            RESUBMIT + f"more {what} ({keys}; {show})",
            never=True,
        )
    counts_jobs = what in ("running jobs", "queued jobs")
    if kind == "Grp" and counts_jobs:
        return Entry(
            f"{owner} already has as many {what} as its group limit allows",
            f"wait for some of them to end ({show})",
        )
    if kind == "Grp":
        if minutes and "Run" in rest:
            return Entry(
                f"{owner}'s running jobs together hold as many minutes of {what} as the"
                " group limit allows",
                f"wait for them to end ({show})",
            )
        if minutes:
            return Entry(
                f"{owner} has used up its budget of minutes of {what}; it starts only when the"
                " usage decays or an administrator raises the limit",
                f"ask your administrators, or use another account/QOS ({show})",
            )
        return Entry(
            f"{owner}'s jobs together already use all the {what} its group limit allows",
            f"wait for those jobs to end, or ask for less ({keys}; {show})",
        )
    if counts_jobs and not rest.startswith("PerJob"):
        whose = "your account" if "PerAccount" in rest else "you"
        return Entry(
            f"{whose} already {'has' if whose != 'you' else 'have'} as many {what} as"
            f" {owner}'s limit allows",
            f"wait for some of them to end ({show})",
        )
    if "PerUser" in rest or "PerAccount" in rest:
        whose = "your account's" if "PerAccount" in rest else "your"
        return Entry(
            f"{whose} other jobs already use all the {what} {owner}'s limit allows at once",
            f"wait for them to end, or ask for less ({keys}; {show})",
        )
    per = "per node" if "PerNode" in rest else "per job"
    if minutes:
        what = f"{what} x time"
        keys = f"{keys} or `resources.time`"
    return Entry(
        f"it asks for more {what} {per} than {owner}'s limit allows",
        RESUBMIT + f"less: {keys} ({show})",
        never=True,
    )


def _split(reason: str) -> tuple[str, str]:
    """`ReqNodeNotAvail, UnavailableNodes:n1` -> (`ReqNodeNotAvail`, `UnavailableNodes:n1`)."""
    code, _, details = reason.partition(",")
    return code.strip(), details.strip()


def lookup(reason: str) -> Entry | None:
    """The table's entry for a reason as Slurm printed it; None when unknown."""
    text = " ".join(reason.split())
    code, _ = _split(text)
    found = REASONS.get(code) or family_entry(code)
    if found is not None:
        return found
    lowered = text.lower()
    for phrase, entry in PHRASES.items():
        if lowered.startswith(phrase):
            return entry
    return None


def explain(reason: str, facts: Mapping[str, str | None] | None = None) -> Explanation:
    """A reason in plain words with its fix; facts (`job`, `partition`, `qos`) fill in the
    commands (defaults ID, PARTITION, QOS). An unknown reason is kept verbatim."""
    text = " ".join(reason.split())
    entry = lookup(text)
    if entry is None:
        return unknown_reason(text)
    values = {"job": "ID", "partition": "PARTITION", "qos": "QOS"}
    values.update({k: v for k, v in (facts or {}).items() if v})
    meaning = entry.meaning
    code, details = _split(text)
    if details and code in REASONS:
        meaning = f"{meaning} ({details})"
    return Explanation(
        code=text,
        meaning=meaning,
        fix=entry.fix.format_map(values),
        never=entry.never,
    )
