"""Background jobs: one handler module per job, all run by one batch runner (RFC 6, 9.4, 12).

:mod:`runner` claims, applies, retries and buries work items; :mod:`decay`,
:mod:`prune`, :mod:`compress`, :mod:`consolidate`, :mod:`embed` and :mod:`extract` each
hold one job's handler; :mod:`maintenance` runs a job by its name (:class:`~membrane_core.enums.Job`).
"""
