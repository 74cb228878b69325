"""The fake OpenCode server: an in-process emulation of the OpenCode 1.18.x HTTP API.

:class:`FakeOpenCodeServer` answers a faithful subset of the OpenCode server API
(sessions, children, status, messages, prompts, abort, revert and unrevert,
summarize, session update and delete, permission and question replies, the
``/event`` SSE stream, basic auth) through an
:class:`httpx.AsyncBaseTransport`, so a client talks to it with no network::

    fake = FakeOpenCodeServer()
    fake.script("work", [Text("thinking..."), Tool("bash", {"command": "ls"}, output="a\\n")])
    async with httpx.AsyncClient(transport=fake.transport, base_url=fake.base_url) as client:
        session = (await client.post("/session", json={})).json()
        await client.post(
            f"/session/{session['id']}/prompt_async",
            json={"parts": [{"type": "text", "text": "go [[script:work]]"}]},
        )
        await fake.wait_for_event("session.idle")
    await fake.aclose()

A prompt runs a *script*: the steps registered with :meth:`FakeOpenCodeServer.script`
under the name given by a ``[[script:NAME]]`` marker in the prompt text (without
a marker, the ``"default"`` script streams ``ok``). Steps are :class:`Text`,
:class:`Tool`, :class:`Task`, :class:`Hang`, :class:`Fail` (optionally after
OpenCode's retries), :class:`Permission`, :class:`Question` and :class:`Compact` (an
automatic compaction mid-run); they produce the same events and stored message parts
as a real server driven by a model that does the same things.

Quirks of the real server that are reproduced on purpose:

* ``POST /session/{id}/abort`` answers ``true`` even for unknown ids, and returns
  only after the session's cleanup events were emitted.
* Aborting a session cancels the child sessions of its running ``task`` tools
  (recursively through tasks), but not children created through the API.
* An abort emits ``session.error`` (MessageAbortedError), ``session.status`` idle
  and ``session.idle``, then the final part and message updates, then
  ``session.status`` idle and ``session.idle`` *again*.
* A running ``bash`` tool ends ``completed`` with ``User aborted the command``;
  any other running tool ends ``error`` ``"Tool execution aborted"`` with
  ``metadata.interrupted``.
* ``GET /session/status`` lists only non-idle sessions.
* ``GET /session/{id}/children`` lists direct children only, in creation order.
* An id without the ``ses`` prefix in ``/session/{id}/...`` answers 500 ``UnknownError``.
* Pending permission and question requests outlive an abort of their session:
  still listed by ``GET /permission`` / ``GET /question`` while their tool part
  has ended ``error`` (interrupted); a reply answers ``true`` and emits
  ``replied`` but runs nothing.
* ``POST /session/{id}/revert`` only sets ``session.revert``; the next prompt
  removes the reverted messages (``message.removed``, ``message.part.removed``)
  and their tokens from the session's totals. ``unrevert`` clears the mark.
* ``DELETE /session/{id}`` deletes the subtree children first (``session.deleted``
  each) and answers ``true``; a busy deleted session keeps running (abortable).
* ``PATCH /session/{id}`` emits ``session.updated`` but leaves ``time.updated``.
* ``POST /session/{id}/summarize`` answers ``true`` after a compaction turn (its
  text is :attr:`FakeOpenCodeServer.summary_text`); while busy it waits its turn
  (the running run ends once its current tool step finished: the agent does not go
  on), and an abort drops it (still ``true``).
* A session's ``tokens`` and ``cost`` are the sums of its steps'; ``summary``,
  ``agent`` and ``model`` appear with its first prompt.
* Event order of a run: ``session.status`` busy is announced at the start of
  each model step and again before its parts stream; ``session.updated`` +
  ``session.diff`` (``[]``) follow each step's new assistant message and the
  final idle; a finished assistant message is announced twice; a completed run
  says busy once more right before idle. ``POST /session`` emits
  ``session.created`` only.
* ``permission.asked`` / ``question.asked`` come between the tool part's
  ``pending`` and ``running`` updates. ``always`` holds for every session.
* A failed model call: ``session.error`` (``APIError`` with ``statusCode``,
  ``isRetryable``, ``responseHeaders``, ``responseBody``, ``metadata``), an idle
  pair, the assistant message with ``error``, an idle pair again.
* A prompt that arrives once a run's last step finished, before its idle, is
  echoed after the idle and starts a second run (:meth:`FakeOpenCodeServer.hold_run_end`
  holds that window open); one that arrives while a step still runs joins the next step.
* A retried model call announces ``session.status`` ``retry`` per attempt
  (``Fail(retries=...)``); an abort between retries says no ``session.error``.
* A restarted server (:meth:`FakeOpenCodeServer.restart`) forgets its runs silently:
  idle, the interrupted message left incomplete, no error.
* ``task`` output is ``<task id="ses_..." state="completed">`` around a
  ``<task_result>``; ``bash`` streams ``metadata.output`` while running.
* Background subagents (``FakeOpenCodeServer(background_subagents=True)``, the real
  server's ``OPENCODE_EXPERIMENTAL_BACKGROUND_SUBAGENTS=true``): a ``background`` ``task``
  part completes at once, the parent goes on and may idle; the child's own end writes a
  synthetic user message into the parent and runs it again; a child aborted alone, or
  the parent's abort (which stops its background children first), runs nothing again.
  Without the flag the call ends ``error`` (see :mod:`.background`).
* A prompt's file parts are stored and converted as the real server does (a
  ``text/plain`` file adds two synthetic text parts; an undecodable image makes the prompt
  vanish; see ``model_input``); :attr:`FakeOpenCodeServer.model_inputs`
  records what would reach the model (``system``, ``tools``, ``variant`` included).
* A session's ``permission`` rules are enforced: they come after the config's (a plain
  :class:`Tool` is one the config allows, a :class:`Permission` one it asks about) and the
  last matching rule wins; ``PATCH`` appends rules; ``task`` children get none of them.
* Invalid requests get the real bodies: ``400 BadRequest`` with the validation
  message (e.g. ``Missing key``, then a line ``at ["parts"]``) and ``kind``;
  malformed JSON is a ``500 UnknownError``; ``POST /session`` answers a bare
  ``{"_tag": "BadRequest"}`` and accepts an unknown ``parentID``.

Directories, as measured on 1.18.34 (the adapter opens one client and one event
stream per directory):

* A request's directory is ``?directory=`` (it wins), else the ``x-opencode-directory``
  header (percent-decoded), else the server's own (:attr:`FakeOpenCodeServer.directory`);
  relative paths resolve against the latter, ``.``, ``..`` and a trailing ``/`` are
  dropped, and a directory that does not exist is accepted.
* ``POST /session`` gives the session the request's directory (a child created with
  ``parentID`` too); a ``task`` child gets its parent's. ``path`` is the directory
  without its leading ``/``; ``projectID`` is ``global`` (no git repository).
* ``GET /event`` streams only the events of its directory's sessions, wherever the
  request that caused them came from (a prompt or abort sent in another directory).
  The fake sends an event about a session it does not know to every stream.
* ``GET /session/status``, ``GET /permission`` and ``GET /question`` list only the
  request directory's sessions; a reply sent in another directory answers 404
  (``PermissionNotFoundError`` / ``QuestionNotFoundError``) and the request stays.
* ``GET /session`` lists every directory's sessions; only ``?directory=`` filters (the
  header does not). Routes naming a session answer it in any directory.

Everything runs in the event loop of the caller: no threads, no sockets. Every
request is O(1) in the number of sessions (except ``GET /session``, which lists
them all).

How the package is built (one concern per module; :class:`~.server.FakeOpenCodeServer`
composes them):

* ``server`` -- the public face: settings, request accounting, fault injection, waits;
* ``steps`` -- the script steps (:class:`Text`, :class:`Tool`, ...);
* ``session_data`` -- sessions, messages, runs, recorded and pending requests;
* ``state`` -- what the fake knows, changed with the events the real server emits;
* ``runner`` -- prompt queues and runs (abort, compaction, restart);
* ``writer`` -- the messages and parts a model step writes;
* ``tools`` -- tool, ``bash``, ``task``, permission and question steps;
* ``background`` -- background ``task`` children, their end told to the parent;
* ``model_input`` -- what of a prompt is stored, and what the scripted model sees of it;
* ``files`` -- the project's files and each prompt's diff summary;
* ``http`` -- the transport, the route table and the routing rules;
* ``session_routes``, ``server_routes``, ``command_routes``,
  ``inventory_routes`` -- the routes' handlers;
* ``event_bus`` -- the event bus and the ``GET /event`` streams;
* ``hooks`` -- hooks and holds in front of the routes;
* ``views`` -- waits and views in domain terms (a tool's status, a hanging run,
  a tree, the open requests);
* ``failure_report`` -- what a failed wait or request assertion says (what it wanted,
  and the fake's sessions, open requests and last requests);
* ``id_minting`` -- ids and slugs minted from one seeded generator;
* ``wire`` -- JSON bodies, error bodies and clocks.

The public names are exported by :mod:`adapter.testing.fake`.
"""
