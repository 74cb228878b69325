"""OpenCode as a program: finding its binary and a free port (``_binary``), running and tearing
down a local ``opencode serve`` (``_process``), which releases the adapter was tested
against (``_releases``), and the one spelling of a project directory the server uses
(``_directories``).

The same as the package's paragraph in ``docs/architecture.md`` (a test compares them).
"""
