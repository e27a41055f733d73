"""Benchmarks: commands that print figures beside a baseline, never timed tests (RFC 14.1)."""
