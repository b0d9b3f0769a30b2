"""OpenAI's Realtime API (GA), free of the websocket (the route is `api/realtime_routes.py`):

- `session`: one session, client events in and server events out; the input audio buffer, server
  VAD, commits and their transcription; the seam a conversation plugs into (`Conversation`);
- `config`: the session's configuration, `session.update` checked and merged;
- `turns`: server VAD turn detection on the voice-activity model's frame probabilities;
- `talk`: the conversation side of a `realtime` session, plugged into the session's seam;
  `conversation` (its items and its one response in flight), `items` (the items as chat
  messages), `plan` (the settings and items as one chat request), `answer` (one response's
  events, spoken sentence by sentence by the voice graph), `speaking` (sentences and pcm16).

The wire structs are `protocol/realtime/`; the audio formats are decoded in `media/live_audio.py`.
"""
