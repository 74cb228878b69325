"""The Stop button: interrupting a turn and tearing a thread down (``_interrupt``), stopping a
session and every session it spawned (``_stop_tree``, the project's model module),
collecting what the interrupted turn produced (``_partial_collector``) in bounded copies
(``_truncation``).

The same as the package's paragraph in ``docs/architecture.md`` (a test compares them).
"""
