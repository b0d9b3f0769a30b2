"""The HTTP layer (Litestar): routes, error envelopes and SSE framing. Handlers stay thin."""
