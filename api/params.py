"""Query and header parameter types that state the core's rules in ``/openapi.json`` (RFC 10.4).

A list route hands its query to a core request model, which validates it again; these
types say the same rules (lengths, bounds, patterns, formats) where a client reads them,
so that a request the schema allows is one the server accepts.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any

from fastapi import Query
from pydantic import AwareDatetime, BeforeValidator

from membrane_core.listing.requests import MAX_CURSOR, MAX_PAGE
from membrane_core.models import Scope

#: RFC 10.4: the start of an ISO 8601 date-time (``2026-01-31T12:00:00Z``).
_DATE_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}")
#: RFC 13.2: a consistency token (a Postgres LSN), as ``membrane_core.requests`` reads it.
CONSISTENCY_PATTERN = r"^[0-9A-Fa-f]{1,8}/[0-9A-Fa-f]{1,8}$"


def _date_time(value: Any) -> Any:
    # pydantic reads a number, or a string of one, as a Unix time: a date-time parameter is
    # documented as an ISO 8601 string, so anything else is refused rather than read as 1970
    if isinstance(value, datetime):
        return value
    if not isinstance(value, str) or not _DATE_TIME.match(value):
        raise ValueError("must be an ISO 8601 date-time with its offset, like 2026-01-31T12:00:00Z")
    return value


#: RFC 10.4, 10.7: a date-time parameter: an ISO 8601 string with its offset, never a number.
Timestamp = Annotated[AwareDatetime, BeforeValidator(_date_time)]
#: RFC 10.7: the scopes a list narrows to, as many as a request names.
Scopes = Annotated[list[Scope] | None, Query(max_length=256, description="repeat for several scopes")]
#: RFC 10.7: rows a page holds.
PageSize = Annotated[int | None, Query(ge=1, le=MAX_PAGE, description=f"rows a page holds, 1 to {MAX_PAGE}")]
#: RFC 10.7: a page's cursor.
PageCursor = Annotated[
    str | None, Query(min_length=1, max_length=MAX_CURSOR, description="next_cursor of the previous page")
]
