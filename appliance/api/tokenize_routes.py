"""vLLM's tokenizer routes: `POST /tokenize` and `/detokenize`, also under /v1 and /v3.

Both run on the engine like a generation's prompt (admitted against the model's queue limit, see
`EngineClient.tokenize`) and are abandoned if the client leaves first.
"""

from __future__ import annotations

from litestar import Request, post

from appliance.api.decoding import decode_body
from appliance.api.handling import record_request, unless_disconnected
from appliance.api.profiles import OPERATION, Operation
from appliance.protocol.tokenize import DetokenizeRequest, DetokenizeResponse, TokenizeRequest, TokenizeResponse
from appliance.runtime.registry import ModelRegistry
from appliance.service import tokenize as service

__all__ = ["routes"]


@post(
    ["/tokenize", "/v1/tokenize", "/v3/tokenize"],
    status_code=200,
    opt={OPERATION: Operation(summary="Tokenize", body=TokenizeRequest)},
)
async def tokenize(request: Request, models: ModelRegistry) -> TokenizeResponse:
    body = decode_body(await request.body(), TokenizeRequest)
    record_request(body.model, None)
    return await unless_disconnected(request, service.tokenize(models.get(body.model), body))


@post(
    ["/detokenize", "/v1/detokenize", "/v3/detokenize"],
    status_code=200,
    opt={OPERATION: Operation(summary="Detokenize", body=DetokenizeRequest)},
)
async def detokenize(request: Request, models: ModelRegistry) -> DetokenizeResponse:
    body = decode_body(await request.body(), DetokenizeRequest)
    record_request(body.model, None)
    return await unless_disconnected(request, service.detokenize(models.get(body.model), body))


routes = [tokenize, detokenize]
