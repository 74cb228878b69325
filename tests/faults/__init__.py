"""Fault-injection suite: every case checks the outcome, that nothing leaked,
and that nothing that was already delivered or produced was lost."""
