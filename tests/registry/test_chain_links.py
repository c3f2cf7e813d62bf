"""The chain_links table (migration 4): links in order, --after joining a chain, one row per
stage whatever is recorded twice."""

from __future__ import annotations

from pathlib import Path

from jobkit.registry.chains import add_link, chain, chains_of
from jobkit.registry.store import Store


def _job(store: Store, tmp_path: Path, name: str) -> str:
    return store.create_intent(
        backend="local", name=name, spec={"name": name}, script="", workdir=tmp_path
    ).jobkit_id


def test_links_in_order_and_after_joins(tmp_path: Path) -> None:
    with Store(tmp_path / "home") as store:
        a, b, c, d = (_job(store, tmp_path, n) for n in "abcd")
        first = add_link(store, a, after_id=None, condition=None)
        add_link(store, b, after_id=a, condition="ok")
        add_link(store, c, after_id=b, condition="any", keep_broken=True)
        again = add_link(store, c, after_id=a, condition="fail")  # kept as first recorded
        links = chain(store, first.chain_id)
        assert [(k.jobkit_id, k.position, k.after_id, k.condition) for k in links] == [
            (a, 0, None, None),
            (b, 1, a, "ok"),
            (c, 2, b, "any"),
        ]
        assert again.condition == "any" and links[2].keep_broken
        # --after a job in no chain: it becomes the first stage of a new one
        e = _job(store, tmp_path, "e")
        joined = add_link(store, e, after_id=d, condition="ok")
        assert [k.jobkit_id for k in chain(store, joined.chain_id)] == [d, e]
        assert set(chains_of(store, [b, e])) == {first.chain_id, joined.chain_id}
        assert chains_of(store, []) == {}
