"""The base of every job-spec section (spec/schema.py and backends' own option sections)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    """Unknown keys are errors; values are validated on assignment too.

    A number where text is expected is taken as text (`account: 12345`, `--epochs, 3`).
    """

    model_config = ConfigDict(
        extra="forbid", validate_assignment=True, frozen=False, coerce_numbers_to_str=True
    )
