"""Turns validated API requests into engine requests and engine events into API responses.

A chat request is planned once, in this order (`chat.plan_chat`), then handed to the routes as one
`chat.ChatCall`:

- `prompt_limits`: cheap bounds on messages and tools, before any rendering;
- `chat_prompt` (with `images`): the messages and template options the chat template receives;
- `tool_plan`: whether tools are in play, decided once (template, parser, forced call);
- `constraints` (with `tool_parsers` for a forced call): the output grammar, built on the grammar
  pool (`grammar_builds`: threads of its own, once per constraint in flight, abandoned when the
  client leaves);
- `sampling` (with `speculative`, and `engine_floats`: one rule for the floats an engine reads in
  32 bits, a temperature below 1e-5 greedy): the engine's SamplingParams;
- `chat_output` (with `reasoning`, `tool_parsers`, `streams`): engine events -> answer or chunks;
  the model families' call formats are the `tool_formats` package, one module per family.

`completions` serves completions (`completion_output` builds their answers), `tokenize` the tokenizer
routes, `retrieval` embeddings (and the bounds every retrieval request shares), `relevance` rerank
and score (one rule for both routes, on cross-encoders and bi-encoders). `field_policy`: the OpenAI fields accepted without effect, and those refused with a reason.
`tts` speaks text on a text-to-speech graph (voice, input bound, what SpeechT5 cannot do refused).
`speech_formats` renders a transcript in each of OpenAI's audio `response_format`s and knows
Whisper's languages.
The other APIs (Responses, LMI, Elasticsearch, Anthropic Messages) are dialects on this core, in
`appliance.dialects`.
"""
