"""A scripted, OpenAI-compatible chat-completions server for tests.

`ScriptedModelServer` listens on 127.0.0.1 and answers ``POST /v1/chat/completions``
with server-sent events in the ``chat.completion.chunk`` format, which is what
OpenCode's ``@ai-sdk/openai-compatible`` provider consumes. What it answers is
decided by *scripts*:

* ``model.script("greet", [Text("hello")])`` registers a script named ``greet``.
* A conversation selects its script with a ``[[script:greet]]`` marker (see
  :func:`script_marker`) somewhere in its **first** user message.
* The Nth request of a conversation, where N is the number of assistant messages
  already present in the request's ``messages``, is answered with step N. Steps
  are :class:`Text`, :class:`ToolCalls`, :class:`Hang` and :class:`HttpError`.
* A request with no marker whose ``x-opencode-session-id`` was bound with
  :meth:`ScriptedModelServer.bind_session` follows that session's script (after an
  automatic compaction the first user message is OpenCode's own, so the marker is gone).
* Requests past the end of their script, or without a (known) marker, get the
  server's default text (``"done"``).
* Requests without ``tools`` are title requests: they get a short title text and
  are recorded with ``is_title=True``; they do not consume script steps.

The server runs its own event loop in a background thread, so it can be used from
synchronous tests and from async tests on any event loop. Every request is
recorded as a :class:`ModelRequest`; see :attr:`ScriptedModelServer.requests`,
:meth:`ScriptedModelServer.wait_for` and :meth:`ScriptedModelServer.wait_for_async`.

HTTP parsing is done by :mod:`h11`. Every response carries ``Connection: close``,
so each connection serves exactly one request; once the request has been read, end
of file on the socket means the client went away, which is how a disconnect during
a :class:`Hang` (or a slow :class:`Text`) is detected and recorded.

Note: OpenCode retries 429 and 5xx answers with backoff. Because step selection
depends only on the request's history, a retried request gets the same step again,
so an ``HttpError(500)`` step keeps the session in its retry state until aborted.
Use a 4xx status (other than 429) for an error that ends the turn.

How the package is built: ``steps`` (the script steps, :func:`script_marker`,
:func:`task_call`), ``recording`` (:class:`ModelRequest`), ``wire`` (request
parsing, SSE framing, the response writer) and ``server`` (the server, its thread
and its recording). The public names are exported by :mod:`adapter.testing.model`.
"""
