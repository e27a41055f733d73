"""The ``membrane`` operator CLI (RFC 14.1)."""
