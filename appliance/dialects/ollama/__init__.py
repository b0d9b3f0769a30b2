"""Ollama's API on the chat, completions and embeddings core, for the apps that speak only Ollama
(Open WebUI's Ollama connection, Home Assistant, Continue, n8n, the `ollama` libraries, LangChain's
`ChatOllama`).

- `plan`: `/api/chat` and `/api/generate` requests -> a chat completion request (a completion
  request for `raw` generation), Ollama's options mapped or refused, `keep_alive` read.
- `input`: Ollama's messages -> chat messages (images, tool calls and results), and chat's error
  paths back in Ollama's names.
- `output`: the answer's pieces (or a raw generation's events) -> Ollama's answer objects, streamed
  one per line or whole.
- `models`: `/api/tags`, `/api/show` and `/api/ps` from the graphs, the models' files and the lifecycle.
- `errors`: Ollama's error body.
"""
