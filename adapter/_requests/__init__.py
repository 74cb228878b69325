"""Permission and question requests of a thread's tree: opened, answered, withdrawn,
and the answers checked before they are sent.
"""
