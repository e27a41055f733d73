"""Celery worker pools: thin tasks over ``membrane_core`` (RFC 9.5)."""
