"""A listing's records with what a table does not show read when first asked.

Every row holds a spec (~2 KB of JSON) and a rendered script (~10 KB): a status of 10,000
jobs read 120 MB of text, and decoded three JSON columns and a path per row, to print a
table that shows none of them. A listing read lazily (`RegistryReader.list_jobs(texts=False)`)
gives records that fetch `spec_json` and `script` on first access (JobRecord.__getattr__):
one query for the first few records asked, then one batch for the whole listing, so that a
caller that walks every record's spec (a first status that saw them all end) pays one read,
not one per row. Their JSON columns and job folder are kept as stored (`_raw_<field>`) and
decoded on first access too; a damaged value is refused then, as a whole read would have.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

TEXT_FIELDS = ("spec_json", "script")
"""The JobRecord fields a listing may leave out (rows.TEXT_COLUMNS)."""
LOADER_KEY = "_texts"
"""Where a record read without its texts keeps its ListingTexts (in its __dict__)."""
RAW_PREFIX = "_raw_"
"""A lazily decoded field's stored value is kept in the record's __dict__ under this + name."""
ONE_BY_ONE = 16
"""Records asked for alone before the rest of the listing is read in one batch."""


class TextsSource(Protocol):
    """What reads the texts: RegistryReader.texts_of."""

    def texts_of(self, jobkit_ids: Sequence[str]) -> dict[str, tuple[str, str]]: ...


class ListingTexts:
    """The spec and script of the records of one listing, read from the registry on demand."""

    def __init__(
        self,
        source: TextsSource,
        jobkit_ids: Sequence[str],
        path: Path,
        decoders: Mapping[str, Callable[[Any], Any]],
    ) -> None:
        self._source = source
        self._path = path
        self._decoders = decoders
        self._ids = list(jobkit_ids)
        self._found: dict[str, tuple[str, str]] = {}
        self._asked = 0
        self._batched = False

    def decode(self, name: str, stored: Any) -> Any:
        """A lazily decoded field's value from what its column stores."""
        if stored is None:
            return None
        try:
            return self._decoders[name](stored)
        except (ValueError, TypeError, KeyError) as err:  # a damaged value: never shown
            from jobkit.registry.errors import corrupt

            raise corrupt(self._path, f"a job's row cannot be read: {type(err).__name__}") from None

    def texts(self, jobkit_id: str) -> tuple[str, str]:
        """(spec_json, script) of one job of the listing (or of a copy of one of its records)."""
        if jobkit_id not in self._found:
            self._asked += 1
            if self._asked > ONE_BY_ONE and not self._batched:
                self._batched = True
                wanted = [i for i in self._ids if i not in self._found]
                self._found.update(self._source.texts_of(wanted))
            if jobkit_id not in self._found:
                self._found.update(self._source.texts_of([jobkit_id]))
        try:
            return self._found[jobkit_id]
        except KeyError:
            from jobkit.registry.errors import RegistryError

            raise RegistryError(
                f"job {jobkit_id}: its spec and script are no longer in the registry"
            ) from None
