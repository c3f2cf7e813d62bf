"""A chain as one status line: `prep SUCCEEDED -> train FAILED -> eval WILL NEVER START`, and
under it the first failure with its diagnosis and the command to look further."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from jobkit.chain.links import NEVER_WORDS
from jobkit.chain.settle import broken_reason
from jobkit.registry.chains import chains_of
from jobkit.registry.reader import RegistryReader
from jobkit.registry.store import JobRecord, Store


@dataclass(frozen=True)
class ChainView:
    """A chain's stages (records in order), as status shows it."""

    chain_id: str
    stages: tuple[JobRecord, ...]

    def stage_word(self, record: JobRecord) -> str:
        """The stage's state, or WILL NEVER START when its chain broke before it."""
        return NEVER_WORDS if broken_reason(record) else record.state

    def line(self) -> str:
        """`chain chXXXXX: prep SUCCEEDED -> train FAILED -> eval WILL NEVER START`."""
        words = " -> ".join(f"{r.name} {self.stage_word(r)}" for r in self.stages)
        return f"chain {self.chain_id}: {words}"

    def why_line(self) -> str | None:
        """The first broken stage's reason and `jobkit doctor` of the stage that failed."""
        for index, record in enumerate(self.stages):
            why = broken_reason(record)
            if why:
                failed = self.stages[index - 1] if index else record
                return f"  {why} (`jobkit doctor {failed.jobkit_id}`)"
        return None

    def to_dict(self) -> dict[str, object]:
        """JSON form: the chain's id and its stages' ids, names and words."""
        return {
            "chain": self.chain_id,
            "stages": [
                {
                    "jobkit_id": r.jobkit_id,
                    "name": r.name,
                    "state": self.stage_word(r),
                    "never_started": broken_reason(r),
                }
                for r in self.stages
            ],
        }


def chain_views(store: RegistryReader, records: Sequence[JobRecord]) -> list[ChainView]:
    """The chains these jobs belong to (stages read from the registry), oldest first."""
    views: list[ChainView] = []
    ids = [r.run_key for r in records]
    for chain_id, links in chains_of(store, ids).items():
        # read again: settling the chain (after the refresh) may have marked a stage; each
        # stage is its run's newest attempt (a retried stage, chain/relink.py)
        stages = tuple(store.attempts(link.jobkit_id)[-1] for link in links)
        views.append(ChainView(chain_id, stages))
    return sorted(views, key=lambda v: v.stages[0].created_at)


def split_chains(
    store: Store, records: Sequence[JobRecord]
) -> tuple[list[ChainView], list[JobRecord]]:
    """The chains among these jobs, and the jobs in none (shown as usual)."""
    views = chain_views(store, records)
    chained = {r.run_key for view in views for r in view.stages}
    return views, [r for r in records if r.run_key not in chained]


def chains_text(views: Sequence[ChainView]) -> str:
    """Each chain's line (and its why line)."""
    lines: list[str] = []
    for view in views:
        lines.append(view.line())
        if (why := view.why_line()) is not None:
            lines.append(why)
    return "\n".join(lines)
