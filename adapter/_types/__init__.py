"""What the host receives, as frozen values: the canonical events (``_events``), the small
records (``_records``), usage and cost (``_usage``), partial results of an interrupted turn,
with their rendering as the next prompt (``_partial_result``), the stop's report
(``_stop_report``), permission rules (``_permissions``), and the sessions-by-id reading the
report and the live tree share (``_by_session``). What computes them as a turn runs lives
with the concepts (the usage meter in ``_turns/_usage_meter``, the partial collector in
``_stop/_partial_collector``).

The same as the package's paragraph in ``docs/architecture.md`` (a test compares them).
"""
