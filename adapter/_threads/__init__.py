"""Threads: the registry, which owns registering a thread and mapping each session of its tree
to it, with the clients per directory (``_registry``), the limits it hands every concept
(``_limits``), what the adapter holds for one thread (``_thread_state``), which thread a
session of the server belongs to (``_session_owners``), the live session tree
(``_session_tree``), the rule of where each stored turn starts and what a rollback reverted
(``_turn_boundaries``), what the host reads and rewinds of a thread's history, with its live
tree (``_history``), compactions (``_compaction``), resume cursors and resuming into another
directory, which forks (``_resume_cursors``), a host's fork of a thread at one of its turns
(``_fork_at_turn``), and the tree's subagents as tasks, each with exactly one end
(``_subagent_tasks``).

The same as the package's paragraph in ``docs/architecture.md`` (a test compares them).
"""
