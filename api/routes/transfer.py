"""Export, import and erasure: a store's memories out as a bundle, back in, and forgotten
(RFC 15.1, 15.2, 15.4).

``GET /v1/export`` streams a tar of the bundle as its files are read, with the trust of the
key; ``POST /v1/import`` takes a tar as its body, an operator's. Both turn their input into
one call of ``Membrane.transfer``; what the core refuses answers in the one error shape
before the first byte of the tar is sent.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from api import schemas, writes
from api.deps import Svc, Trust
from api.params import Scopes, Timestamp
from membrane_core import errors
from membrane_core.enums import MemoryType
from membrane_core.transfer.bundle import tar_stream
from membrane_core.transfer.erasure import ErasureRequest, ErasureResult
from membrane_core.transfer.importer import ImportReport

router = APIRouter(prefix="/v1", tags=["transfer"])

_TAR = {"application/x-tar": {"schema": {"type": "string", "format": "binary"}}}


@router.get(
    "/export",
    response_class=StreamingResponse,
    responses={
        200: {"content": _TAR, "description": "the bundle as a tar"},
        **schemas.errors(401, 403, 422, 429),
    },
)
def export(
    svc: Svc,
    policy: Trust,
    scope: Scopes = None,
    type: Annotated[list[MemoryType] | None, Query()] = None,
    created_after: Annotated[Timestamp | None, Query()] = None,
    created_before: Annotated[Timestamp | None, Query()] = None,
    with_vectors: Annotated[bool, Query(description="the embeddings too")] = False,
    open_sealed: Annotated[bool, Query(description="sealed records as plain ones (needs the keys)")] = False,
) -> StreamingResponse:
    """The records the key sees in the scopes asked, with their history, corrections and
    audit, as a tar of NDJSON files and a manifest, streamed (RFC 15.1)."""
    svc.admit(policy)
    given = {
        "scopes": scope,
        "types": type,
        "created_after": created_after,
        "created_before": created_before,
        "with_vectors": with_vectors,
        "open_sealed": open_sealed,
    }
    files = svc.membrane.transfer.stream({k: v for k, v in given.items() if v is not None}, policy)
    stamp = svc.membrane.clock().timestamp()
    return StreamingResponse(
        tar_stream(files, stamp),
        media_type="application/x-tar",
        headers={"content-disposition": 'attachment; filename="membrane-export.tar"'},
    )


@router.post(
    "/import",
    response_model=ImportReport,
    openapi_extra={"requestBody": {"required": True, "content": _TAR}},
    responses=schemas.errors(400, 401, 403, 409, 413, 422, 429),
)
async def import_bundle(
    request: Request,
    response: Response,
    svc: Svc,
    policy: Trust,
    on_conflict: Annotated[
        Literal["skip", "overwrite", "fail"], Query(description="for record ids the store holds")
    ] = "skip",
) -> ImportReport:
    """Import a bundle (a tar as the body), checked whole before anything is written; an
    operator key's (RFC 15.2)."""
    svc.admit(policy)
    if not policy.operator:
        raise errors.Forbidden("an import needs an operator key")
    with tempfile.TemporaryDirectory(prefix="membrane-import-") as folder:
        path = Path(folder) / "bundle.tar"
        with path.open("wb") as out:
            async for chunk in request.stream():
                out.write(chunk)
        try:
            report = await run_in_threadpool(
                svc.membrane.transfer.import_bundle, path, policy, on_conflict=on_conflict
            )
        except errors.MembraneError as exc:
            # the bundle's place on the server's disk is the server's: the caller sent a body
            exc.message = exc.message.replace(str(path), "the request body")
            raise
    # RFC 13.2: the answer's consistency token covers what the import wrote
    response.headers.update(await run_in_threadpool(writes.consistency, svc))
    return report


@router.post(
    "/erase", response_model=ErasureResult, responses=schemas.errors(400, 401, 403, 404, 409, 422, 429)
)
def erase(svc: Svc, policy: Trust, body: ErasureRequest, response: Response) -> ErasureResult:
    """Erase a scope, an entity and what names it, or records: a dry run (the default) counts
    what would go by table and returns its confirmation, which the erasure repeats; keys with
    ``erase`` only, in scopes they read and write (RFC 15.4). The answer's consistency token
    covers the erasure: a read that sends it finds nothing of what went (RFC 13.2)."""
    svc.admit(policy)
    result = svc.membrane.erasure.erase(body, policy)
    response.headers.update(writes.consistency(svc))
    return result
