"""The bases of every saved record of the measurement model (runner.model, runner.memory_model).

A record ignores fields it does not know (a run saved by a later version still loads) and takes a field by its
name or by the alias it is saved under; it is frozen, unless it grows as the run goes (then each assignment is
validated). Pure data: pydantic only.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)


class Mutable(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True, validate_assignment=True)
