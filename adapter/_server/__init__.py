"""The OpenCode server as a program: finding its binary, running ``opencode serve``,
which releases the adapter was tested against, and the directory spelling it uses.
"""
