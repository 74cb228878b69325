"""The stop: interrupting a turn and stopping its whole session tree (``stop_tree``), and
collecting what the interrupted turn produced.
"""
