"""Turns validated API requests into engine requests and engine events into API responses.

A chat request is planned once, in this order (`chat.plan_chat`), then handed to the routes as one
`chat.ChatCall`:

- `prompt_limits`: cheap bounds on messages and tools, before any rendering;
- `chat_prompt` (with `images`): the messages and template options the chat template receives;
- `tool_plan`: whether tools are in play, decided once (template, parser, forced call);
- `constraints` (with `tool_parsers` for a forced call): the output grammar, off the event loop;
- `sampling` (with `speculative`): the engine's SamplingParams;
- `chat_output` (with `reasoning`, `tool_parsers`, `streams`): engine events -> answer or chunks.

`completions` serves completions (`completion_output` builds their answers), `tokenize` the tokenizer routes;
`lmi` and `elastic` translate their dialects onto completions and chat; `responses` translates
OpenAI's Responses API onto chat (`responses_input`: items -> messages; `responses_output`: chunks
-> events; `response_store`: stored responses). `field_policy`: the OpenAI fields accepted without
effect, and those refused with a reason.
"""
