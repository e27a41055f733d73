"""``python -m api``: the API entry point (RFC 13.1)."""

from __future__ import annotations

from api.server import main

main()
