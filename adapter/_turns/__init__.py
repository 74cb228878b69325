"""Turns and their lifecycle: sending prompts, following what the server runs for them,
ending them, the phases a thread and a turn move through, and which turn a message belongs to.
"""
