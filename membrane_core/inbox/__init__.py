"""The durable operations inbox (RFC 9.1, 9.2, 9.5).

:mod:`submit` accepts and observes operations (the API side); :mod:`worker` claims,
applies and finishes them (the worker side).
"""
