"""Correction: supersede, fork, merge, retract, contest, reinforce, penalize (RFC 5).

:mod:`rules` parses and checks revision bodies (pure), :mod:`engine` applies them under
lock, and :mod:`history` reads and hard-deletes with the audit log (RFC 5.5).
"""
