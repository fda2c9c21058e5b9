"""What every request and response model of the HTTP API shares.

Private: the models themselves are named in :mod:`plait.server.schemas`.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

_NON_BLANK = r"\S"
JsonObject = dict[str, Any]


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")
