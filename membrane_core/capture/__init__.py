"""Capture: a client's request becomes typed records (RFC 3).

:mod:`plan` turns a request into records (pure), :mod:`mentions` finds the entities it
names (pure), and :mod:`service` checks trust and writes a batch in one transaction.
"""
