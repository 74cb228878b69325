"""Turns and their lifecycle: the phases of a thread and a turn, one turn's record, and the
only place that moves them (``_lifecycle``); sending prompts and commands and following what
the server runs for them (``_running``); deciding from the server's word that a turn is
over, with its watchdog (``_settling``); adopting a run this adapter did not start, found at
attach or seen live (``_adoption``); which turn a message belongs to (``_message_turns``);
what a host may send as a prompt (``_prompt_input``); a turn's usage metered as it runs and
its throttled live reports (``_usage_meter``); and the background subagents a turn still
waits on after its root went idle (``_background``).

The same as the package's paragraph in ``docs/architecture.md`` (a test compares them).
"""
