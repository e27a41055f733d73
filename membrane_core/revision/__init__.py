"""Correction: supersede, fork, merge, retract, contest, reinforce, penalize (RFC 5).

:mod:`rules` parses and checks revision bodies (pure), :mod:`engine` applies them under
lock, with :mod:`targets` (locking and checking targets), :mod:`derive` (the new record of
a supersede, fork or merge) and :mod:`writes` (tombstones and queued records), and
:mod:`history` reads and hard-deletes with the audit log (RFC 5.5).
"""
