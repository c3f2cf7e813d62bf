"""What follows a refresh, for `jobkit status`, `jobkit watch`, `submit --wait` and the API
alike (one path): the nodes of jobs that failed on them go on the exclude list
(manager/badnodes.py), a broken chain is marked (chain/settle.py), a run that asked to go
on is resubmitted as its next attempt (manager/attempts.py, docs/runs.md) and a chain's
later stages are re-linked to it (chain/relink.py). Returns the lines to say; the caller
prints them (the CLI) or logs them (the API)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from jobkit.core.errors import JobkitError
from jobkit.manager.attempts import Resubmission
from jobkit.registry.record import JobRecord
from jobkit.registry.store import Store


@dataclass
class FollowUp:
    """The lines before the resubmissions (nodes, chains), the resubmissions, the lines
    after them (re-linked chains, failed resubmissions)."""

    notes: list[str] = field(default_factory=list)
    resubmissions: list[Resubmission] = field(default_factory=list)
    later: list[str] = field(default_factory=list)


def follow_up(store: Store, before: Sequence[JobRecord], after: Sequence[JobRecord]) -> FollowUp:
    """Everything jobkit does after a refresh of `before` into `after` (see the module)."""
    from jobkit.chain.relink import relink_after
    from jobkit.chain.settle import settle_chains
    from jobkit.manager.attempts import resubmit_ended
    from jobkit.manager.badnodes import note_bad_nodes

    done = FollowUp()
    done.notes += note_bad_nodes(store, before, after)
    done.notes += settle_chains(store, after)

    def on_error(record: JobRecord, err: JobkitError) -> None:
        why = " ".join(err.show().split())
        done.later.append(f"warning: could not resubmit {record.jobkit_id}: {why}")

    done.resubmissions = resubmit_ended(store, before, after, on_error=on_error)
    for resubmission in done.resubmissions:
        done.later += relink_after(store, resubmission.previous, resubmission.record)
    return done
