"""What keeps the models up: the registry of engines, reloads, the watchdog and systemd.

- `registry.py`: the served engines by name (what requests are routed to).
- `lifecycle.py`: `Lifecycle`, owned by the registry: loads on demand in a fair queue under
  `max_loaded_models`, unloads to make room (between a model's requests, after a minimum
  residency), engines retiring after a reload counted until gone.
- `reload.py`: `Reloader`, graph-directory reloads (SIGHUP, `POST /admin/reload`) and recycling
  one engine, each a swap without dropped requests (the old engine drains, then stops).
- `watchdog.py`: kills engines that made no progress (`engine_hang_seconds`), recycles those
  grown past `engine_max_rss_mb`.
- `supervisor.py`: the loop run for the server's lifetime: the watchdog every tick, and what
  systemd is told (READY, STATUS, WATCHDOG, STOPPING, RELOADING).
- `sdnotify.py`: systemd's notify protocol in stdlib.
- `backoff.py`: how soon a dead engine process is started again.

An engine process that dies (crashed, or killed by the watchdog) is restarted by its
`EngineClient` (`appliance.engine.host.process_lifecycle`) after the delay `backoff.restart_delay`
gives it. Dependencies point down: this package uses the engine and the graph files, never the
service or api layers.
"""
