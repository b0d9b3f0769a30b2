"""The server side of the engine: what runs in the server process to own engine processes.

- `client`: `EngineClient`, one model's engine process seen from the event loop: its state,
  status and facts, and what its messages mean; `calls` gives it the request side (`reserve`,
  `submit`, `tokenize`, `embed`, ... with admission and time limits, `Reservation`) and
  `process_lifecycle` the process's life (load on demand, unload with a drain, stop, kill, death
  and restart with back-off).
- `engine_process`: one spawned engine process and its pipe (a writer thread, frames read on
  the loop with `frames.FrameReader`).
- `streams`: `RequestStream`, the events of one accepted request.
- `batch_lane`: `BatchLane`, where a batch's lines wait for the capacity live requests leave.
- `client_metrics`: the Prometheus gauges, counters and timings of one client.
- `templates`: `ToolFormat`, how a model gets its tools and how its calls are read.
- `devices`: which OpenVINO devices the machine has (the only OpenVINO import on this side, in
  a function).

Nothing here imports the engine process's side (`appliance.engine.worker`) except
`engine_process`, which names `worker.process.main` as the spawn target;
`tests/unit/test_layers.py` checks it. Both sides share the wire: `appliance.engine.messages`.
"""
