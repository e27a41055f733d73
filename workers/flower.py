"""Start Flower on the Membrane broker, with basic auth unless explicitly opened (RFC 14.1).

``python -m workers.flower [--address=127.0.0.1] [--port=5555] [--open]``. The
credentials come from ``MEMBRANE_FLOWER_BASIC_AUTH`` (``user:password``, several
separated by commas) and reach Flower through its own environment variable, never
the command line. Like the API's keys they never travel in plaintext off loopback
(RFC 7.5): a non-loopback address with basic auth needs ``MEMBRANE_TLS_CERTFILE`` and
``MEMBRANE_TLS_KEYFILE`` (passed to Flower as ``--certfile``/``--keyfile``) or
``MEMBRANE_ALLOW_INSECURE_CREDENTIALS=true``.
"""

from __future__ import annotations

import argparse
import os
import sys

from membrane_core import Settings, errors
from membrane_core.listen import check_credentials, tls_files
from workers.app import broker_url


def command(argv: list[str] | None = None) -> tuple[list[str], dict[str, str]]:
    """The Flower argv and environment for ``argv`` (RFC 14.1, 7.5).

    Exits when auth is missing, and with status 2 when basic auth would travel in
    plaintext off loopback or the TLS files are wrong (RFC 7.5).
    """
    parser = argparse.ArgumentParser(prog="python -m workers.flower")
    parser.add_argument("--address", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=5555)
    parser.add_argument(
        "--open", action="store_true", help="serve Flower without authentication (explicit opt-in)"
    )
    args = parser.parse_args(argv)
    settings = Settings()
    env = dict(os.environ)
    env.pop("FLOWER_BASIC_AUTH", None)
    if settings.flower_basic_auth is not None:
        env["FLOWER_BASIC_AUTH"] = settings.flower_basic_auth.get_secret_value()
    elif not args.open:
        raise SystemExit(
            "Flower needs MEMBRANE_FLOWER_BASIC_AUTH=user:password; "
            "pass --open to serve it without authentication"
        )
    try:
        tls = tls_files(settings.tls_certfile, settings.tls_keyfile)
        if settings.flower_basic_auth is not None:
            warning = check_credentials(
                args.address, "Flower basic auth", tls=tls, allow_insecure=settings.allow_insecure_credentials
            )
            if warning:
                print(f"python -m workers.flower: warning: {warning}", file=sys.stderr)
    except errors.MembraneError as exc:
        print(f"python -m workers.flower: {exc.message}", file=sys.stderr)
        raise SystemExit(2) from exc
    flower = [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "workers.app:app",
        f"--broker={broker_url(settings)}",
        "flower",
        f"--address={args.address}",
        f"--port={args.port}",
    ]
    if tls is not None:
        flower += [f"--certfile={tls[0]}", f"--keyfile={tls[1]}"]
    return flower, env


def main() -> None:
    """Replace this process with Flower."""
    argv, env = command(sys.argv[1:])
    os.execve(sys.executable, argv, env)


if __name__ == "__main__":
    main()
