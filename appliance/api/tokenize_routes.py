"""vLLM's tokenizer routes: `POST /tokenize` and `/detokenize`, also under /v1 and /v3.

Both run on the engine like a generation's prompt (admitted against the model's queue limit, see
`EngineClient.tokenize`) and are abandoned if the client leaves first.
"""

from __future__ import annotations

from litestar import Request, post

from appliance.api.handling import unless_disconnected
from appliance.api.profiles import OPERATION, Operation
from appliance.entry import Entry, named
from appliance.entry.decoding import decode_body
from appliance.protocol.tokenize import DetokenizeRequest, DetokenizeResponse, TokenizeRequest, TokenizeResponse
from appliance.service import tokenize as service

__all__ = ["routes"]


@post(
    ["/tokenize", "/v1/tokenize", "/v3/tokenize"],
    status_code=200,
    opt={OPERATION: Operation(summary="Tokenize", body=TokenizeRequest)},
)
async def tokenize(request: Request, entry: Entry) -> TokenizeResponse:
    body = decode_body(await request.body(), TokenizeRequest)
    named(body.model, None)
    return await unless_disconnected(request, service.tokenize(entry.engine(body.model), body))


@post(
    ["/detokenize", "/v1/detokenize", "/v3/detokenize"],
    status_code=200,
    opt={OPERATION: Operation(summary="Detokenize", body=DetokenizeRequest)},
)
async def detokenize(request: Request, entry: Entry) -> DetokenizeResponse:
    body = decode_body(await request.body(), DetokenizeRequest)
    named(body.model, None)
    return await unless_disconnected(request, service.detokenize(entry.engine(body.model), body))


routes = [tokenize, detokenize]
