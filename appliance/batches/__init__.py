"""OpenAI's Batch API over the entry (`appliance.entry`): a file of requests answered in the
capacity live traffic leaves, each answer kept in the store as it is made.

- `runner`: `BatchRunner`, the batches of every API key: create, read, list, cancel; runs them in
  the background and resumes at start those a stop or a crash interrupted.
- `run`: `BatchRun`, one batch from where it stands to its end (validating, in_progress,
  finalizing, and its final status).
- `lines`: the input file read and every line checked before any runs.
- `endpoints`: the four endpoints a line may name, each decoded and answered as its route does.
- `answers`: one line answered through the entry, logged as a request, and its output line.
- `book`: the batch objects in the store, with their request counts.
"""

from appliance.batches.runner import BatchRunner

__all__ = ["BatchRunner"]
