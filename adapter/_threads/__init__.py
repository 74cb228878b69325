"""Threads: the registry of threads and the sessions each owns, a thread's state, its
session tree, its stored history, compactions, and resume cursors.
"""
