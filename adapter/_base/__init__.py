"""The foundation every layer may use: identifiers, well-formed text, JSON nesting and
JSON-ready copies, and the ownership of background tasks. It imports nothing above it.
"""
