"""Permission and question requests of a thread's tree: opened, answered, withdrawn
(``_pending``), and answers checked against their questions before they are sent
(``_answers``).

The same as the package's paragraph in ``docs/architecture.md`` (a test compares them).
"""
