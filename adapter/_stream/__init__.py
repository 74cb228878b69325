"""Events and their stream: one ``/event`` stream per directory kept connected (``_pump``),
which reports to the ``StreamSink`` it is given (``_pump_sink``: what the directory's
threads hear of it); native events turned into canonical ones (``_translator``, with a
turn's output in ``_output``, shared with the replay of stored messages, the vocabulary
mapping in ``_vocabulary`` the streamed-text bookkeeping in ``_seen_text``, and a turn's
changed files, from its prompt's diff summary, in ``_turn_diff``); the fan-out to any number
of consumers (``_hub``) with its replay window (``_replay_window``); and the native recorder
(``_native_recorder``).

The same as the package's paragraph in ``docs/architecture.md`` (a test compares them).
"""
