"""OpenAI's Responses API on the chat core: `plan` (the request as a chat request), `input` (input
items -> chat messages, and the chat fields' names back to the Responses request's), `output` (the
chat answer's pieces -> typed stream events and the response), `store` (stored responses per API
key, for `previous_response_id`)."""
