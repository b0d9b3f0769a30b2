"""Other APIs' dialects, each a translation onto the chat or completions core, in and out.

A dialect turns its request into the core's (`service.chat.ChatCompletionRequest` planned by
`service.chat.open_chat`, or `service.completions.open_completion`), so limits, images, tools,
grammars, sampling, admission and cancellation are the core's; and it builds its answer from the
core's typed answer pieces (`service.pieces`), not from OpenAI's chunks. Nothing here knows the web
framework: the routes in `api/` decode, call a dialect and frame its events.

- `responses/`: OpenAI's Responses API (`plan`: request -> chat request, `input`: items ->
  messages, `output`: pieces -> typed events and the response, `store`: stored responses per key).
- `anthropic/`: Anthropic's Messages API (`plan`, `input`, `output`, `errors`).
- `hosted_tools`: the one rule for tools that run on a provider's side (web search, ...): not
  offered to the model, named in the answer's `x-dropped-tools` header.
- `ollama/`: Ollama's API (`plan`: chat and generate -> a chat or completion request, `input`,
  `output`: pieces -> answer objects, `models`: tags, show, ps, `errors`).
- `shared`: an error message led by its field, a call's arguments as an object (Anthropic's and
  Ollama's wires); `field_paths`: a chat request's fields named as a dialect names them.
- `lmi`: AWS LMI / TGI `/invocations` on completions (and chat bodies on chat).
- `elastic`: Elasticsearch's inference chat completion client on chat.
"""
