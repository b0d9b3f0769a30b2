"""OpenAI's Realtime API (GA), free of the websocket (the route is `api/realtime_routes.py`):

- `session`: one session, client events in and server events out; the input audio buffer, server
  VAD, commits and their transcription; the seam a conversation plugs into (`Conversation`);
- `config`: the session's configuration, `session.update` checked and merged;
- `turns`: server VAD turn detection on the voice-activity model's frame probabilities.

The wire structs are `protocol/realtime.py`; the audio formats are decoded in `media/live_audio.py`.
"""
