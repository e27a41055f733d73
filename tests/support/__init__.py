"""Helpers the tests share (fixtures live in the ``conftest.py`` files).

- ``services``: the embedded Postgres (shared, or private to a test) and redis-servers;
- ``sql``: one-statement SQL helpers for assertions against a test database;
- ``api``: the live API's uvicorn server and a broker that is down;
- ``processes``: child processes (workers, beat, Flower) and waiting on a condition;
- ``load``: a capture load on the live API and what its accepted captures left;
- ``records``: records planted for the read-path tests and the caller they are hidden from;
- ``roots``: the ``retrieval_roots`` statement's parameters and a corpus to run it on;
- ``scripted_model``: an OpenAI-compatible chat model answering from a script.
"""
