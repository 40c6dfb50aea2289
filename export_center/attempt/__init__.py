"""The export engine: one claimed attempt, from the provider's first batch to the stored
file and the settled task row.

* :mod:`~export_center.attempt.run`: :class:`ExportRun`, which builds the attempt, picks
  its producer and settles the task row by how the attempt ended;
* :mod:`~export_center.attempt.steps`: :class:`Attempt`, the claimed attempt and its
  public steps (provider request, fetch, convert, write, store, progress, log fields),
  and the :class:`Producer` protocol;
* :mod:`~export_center.attempt.single`: the single-stream producer;
* :mod:`~export_center.attempt.sharded`: the sharded producer (day shards in parallel,
  checkpoints, resume, the parts joined), with its plan in
  :mod:`~export_center.attempt.shards`;
* :mod:`~export_center.attempt.fetching`: a fetch stream (fetch thread, page size,
  cursors); :mod:`~export_center.attempt.batches`: provider rows to typed columns;
* :mod:`~export_center.attempt.watchdog` (lease renewal, cancel and deadline checks) and
  :mod:`~export_center.attempt.pauses` (pauses of the process);
* :mod:`~export_center.attempt.writes`: the attempt's fenced database writes;
  :mod:`~export_center.attempt.stream_guard`: the lease check before every write to
  storage; :mod:`~export_center.attempt.context`: what every attempt shares.

This module imports nothing, so that importing one leaf of the engine (a test of the
shard plan, the consumer's :class:`~export_center.attempt.context.RunContext`) does not
load the rest. The engine depends on the storage port, never the other way round.
"""
