"""Events and their stream: the event pump per directory, the translator from native to
canonical events, the fan-out to consumers with its replay window, and the native recorder.
"""
