"""Retrieval: hybrid, trust-aware and bounded (RFC 8).

:mod:`retriever` runs the hybrid statement and applies trust; :mod:`fusion` fuses the
arms' features (pure), :mod:`graph` expands around the roots, and :mod:`selector`
chooses among competence and plan graph candidates (pure).
"""
