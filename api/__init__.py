"""The HTTP adapter: thin FastAPI routes over ``membrane_core`` (RFC 10)."""
