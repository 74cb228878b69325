// The stop-button page of adapter.web: one thread, its live transcript, and Stop.
//
// No build step and no dependencies (the page must work offline). Server data is
// only ever written with textContent, never innerHTML, so a tool output such as
// "<img onerror=...>" stays text. Paths are relative to the page, so the app can be
// mounted under a prefix (serve the page at ".../" with the trailing slash).
"use strict";

(function () {
  const $ = (id) => document.getElementById(id);

  // ------------------------------------------------------------------ helpers

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined) continue;
      if (key === "class") node.className = value;
      else if (key === "text") node.textContent = value;
      else node.setAttribute(key, String(value));
    }
    for (const child of children) {
      if (child === null || child === undefined) continue;
      node.append(child instanceof Node ? child : String(child));
    }
    return node;
  }

  // The token comes from the URL fragment, which the browser never sends to a server
  // (nor in a Referer): `opencode-tree web` prints http://host:port/#token=...
  // It is kept in this tab's sessionStorage, so a reload still has it, and removed
  // from the address bar at once, so it stays out of the history, bookmarks and
  // screenshots. Without one the page works against a server that needs none.
  const TOKEN_KEY = "opencode-tree.token";

  function readToken() {
    const params = new URLSearchParams(location.hash.replace(/^#/, ""));
    const given = params.get("token");
    if (params.has("token")) {
      params.delete("token");
      const url = new URL(location.href);
      url.hash = params.toString();
      history.replaceState(history.state, "", url.toString().replace(/#$/, ""));
    }
    try {
      if (given) sessionStorage.setItem(TOKEN_KEY, given);
      return given || sessionStorage.getItem(TOKEN_KEY);
    } catch (_) {
      return given || null; // storage disabled: this load still works
    }
  }

  function forgetToken() {
    try {
      sessionStorage.removeItem(TOKEN_KEY);
    } catch (_) {
      // storage disabled: nothing was kept
    }
  }

  const token = readToken();

  function apiUrl(path) {
    return new URL(path, document.baseURI).toString();
  }

  class ApiError extends Error {
    constructor(status, body) {
      const err = (body && body.error) || {};
      super(err.message || `HTTP ${status}`);
      this.status = status;
      this.type = err.type || "http";
      this.body = body;
    }
  }

  async function api(method, path, body) {
    const headers = { Accept: "application/json" };
    if (token) headers.Authorization = `Bearer ${token}`;
    if (body !== undefined) headers["Content-Type"] = "application/json";
    const response = await fetch(apiUrl(path), {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    let data = null;
    try {
      data = await response.json();
    } catch (_) {
      data = null;
    }
    if (!response.ok) throw new ApiError(response.status, data);
    return data;
  }

  function showError(message) {
    $("errors").textContent = message;
  }

  function ms(seconds) {
    return seconds === null || seconds === undefined ? "–" : (seconds * 1000).toFixed(1);
  }

  // ------------------------------------------------------------------ state

  const state = {
    threadId: null,
    source: null, // the EventSource
    connected: Promise.resolve(), // settles once the EventSource is open
    seen: new Set(), // event ids already applied (a replay never doubles the transcript)
    turns: new Map(), // turn_id -> {section, root}
    prompts: new Map(), // turn_id -> the prompt this tab sent, kept across a redraw
    currentTurn: null,
    endedTurns: new Set(),
    sessions: new Map(), // session_id -> {node, items, kids, depth}
    items: new Map(), // item_id -> node
    texts: new Map(), // content item_id -> text node
    rootSessionId: null,
    rootTitle: null,
    turnActive: false,
    stopping: false,
    stopReported: false,
  };

  // Per-subagent Stop, meter and cost, plan, pickers and commands (static/host.js).
  const host = window.opencodeTreeHost({ $, el, api, state });

  function setStatus(threadStatus) {
    if (threadStatus) $("thread-status").textContent = threadStatus;
  }

  function setTurnState(text, active) {
    $("turn-state").textContent = text;
    state.turnActive = active;
    $("stop").disabled = !active && !state.stopping;
    if (!active) $("retry-status").textContent = "";
  }

  // ------------------------------------------------------------------ transcript

  function turnSection(turnId) {
    const key = turnId || state.currentTurn || "(no turn)";
    let turn = state.turns.get(key);
    if (!turn) {
      const section = el("section", { class: "turn", "data-turn-id": key });
      section.append(el("div", { class: "turn-head", text: `turn ${key}` }));
      if (state.prompts.has(key)) section.append(el("div", { class: "user", text: state.prompts.get(key) }));
      $("transcript").append(section);
      turn = { section, root: null };
      state.turns.set(key, turn);
    }
    return turn;
  }

  // A session block: its items, then its children (subagents) nested inside it.
  function sessionBlock(sessionId, parentId, title, turnId) {
    let block = state.sessions.get(sessionId);
    if (block) return block;
    const isRoot = sessionId === state.rootSessionId || !parentId;
    const parent = parentId ? state.sessions.get(parentId) : null;
    const depth = parent ? parent.depth + 1 : 0;
    const node = el("div", {
      class: isRoot ? "session root" : "session child",
      "data-session-id": sessionId,
      "data-parent-id": parentId || null,
      "data-depth": depth,
    });
    const head = el("div", { class: "session-head" });
    head.append(
      el("span", { class: "session-title", text: title || (isRoot ? "root session" : "subagent") }),
      el("code", { class: "session-id", text: sessionId }),
      el("span", { class: "session-state", "data-testid": "session-state", text: isRoot ? "" : "working" }),
    );
    const items = el("div", { class: "items" });
    const kids = el("div", { class: "kids" });
    node.append(head, items, kids);
    block = { node, items, kids, depth, title: title || "" };
    state.sessions.set(sessionId, block);
    if (parent) {
      // Under the task call that spawned it when one matches its title, else at the
      // end of the parent session.
      const spawner = findSpawner(parent, title);
      if (spawner) {
        spawner.dataset.childSession = sessionId;
        spawner.querySelector(".spawned").append(node);
      } else {
        parent.kids.append(node);
      }
    } else {
      const turn = turnSection(turnId);
      if (isRoot && !turn.root) turn.root = block;
      turn.section.append(node);
    }
    return block;
  }

  function findSpawner(parent, title) {
    if (!title) return null;
    for (const item of parent.items.querySelectorAll(':scope > .tool[data-tool="task"]')) {
      const description = item.dataset.description || "";
      if (description && title.startsWith(description) && !item.dataset.childSession) {
        return item;
      }
    }
    return null;
  }

  function rootBlock(turnId, sessionId) {
    const turn = turnSection(turnId);
    if (turn.root) return turn.root;
    // One root block per turn (the same OpenCode session, a fresh section).
    state.sessions.delete(sessionId);
    const block = sessionBlock(sessionId, null, state.rootTitle || "root session", turnId);
    turn.root = block;
    return block;
  }

  function blockFor(sessionId, turnId) {
    if (sessionId === state.rootSessionId) return rootBlock(turnId, sessionId);
    const known = state.sessions.get(sessionId);
    if (known) return known;
    // A child whose child.started this page missed (it joined mid-turn): under the root.
    rootBlock(turnId, state.rootSessionId);
    return sessionBlock(sessionId, state.rootSessionId, "subagent", turnId);
  }

  function appendText(event) {
    const block = blockFor(event.session_id, event.turn_id);
    let node = state.texts.get(event.item_id);
    if (!node) {
      node = el("div", {
        class: `text ${event.stream === "reasoning_text" ? "reasoning" : "answer"}`,
        "data-item-id": event.item_id,
      });
      block.items.append(node);
      state.texts.set(event.item_id, node);
    }
    node.textContent += event.delta;
  }

  function toolItem(event) {
    const block = blockFor(event.session_id, event.turn_id);
    let node = state.items.get(event.item_id);
    if (!node) {
      const input = event.input || {};
      node = el("div", {
        class: "tool",
        "data-item-id": event.item_id,
        "data-tool": event.tool,
        "data-session-id-of": event.session_id,
        "data-description": typeof input.description === "string" ? input.description : null,
      });
      node.append(
        el(
          "div",
          { class: "tool-head" },
          el("span", { class: "tool-name", text: event.tool }),
          el("span", { class: "tool-title" }),
          el("span", { class: "tool-status", "data-testid": "tool-status" }),
        ),
        el("pre", { class: "tool-detail", "data-testid": "tool-detail", hidden: "" }),
        el("div", { class: "spawned" }),
      );
      block.items.append(node);
      state.items.set(event.item_id, node);
    }
    updateTool(node, event.status, event.title || describeInput(event.input), event.detail);
  }

  function describeInput(input) {
    if (!input) return "";
    return input.description || input.command || input.filePath || input.url || "";
  }

  function updateTool(node, status, title, detail) {
    node.dataset.status = status;
    node.querySelector(".tool-status").textContent = status;
    if (title) node.querySelector(".tool-title").textContent = title;
    if (detail !== null && detail !== undefined && detail !== "") {
      const pre = node.querySelector(".tool-detail");
      pre.textContent = detail;
      pre.hidden = false;
    }
  }

  function childStarted(event) {
    sessionBlock(event.session_id, event.parent_id, event.title, event.turn_id);
  }

  function note(event, text, cls) {
    const block = blockFor(state.rootSessionId || event.session_id || "", event.turn_id);
    block.items.append(el("div", { class: `note ${cls || ""}`, text }));
  }

  // ------------------------------------------------------------------ requests

  function requestOpened(event) {
    if (document.querySelector(`[data-request-id="${CSS.escape(event.request_id)}"]`)) return;
    const box = el("div", { class: "request", "data-request-id": event.request_id });
    const isQuestion = event.type === "user-input.requested";
    const heading = isQuestion
      ? "Question"
      : `Permission: ${event.permission || "?"} ${(event.patterns || []).join(" ")}`;
    box.append(
      el("div", { class: "request-head", text: heading }),
      el("code", { class: "session-id", text: event.session_id }),
    );
    if (isQuestion) {
      const groups = [];
      (event.questions || []).forEach((q, index) => {
        const group = el("fieldset", { class: "question" });
        group.append(el("legend", { text: q.question || q.header || `question ${index + 1}` }));
        const type = q.multiple ? "checkbox" : "radio";
        for (const option of q.options || []) {
          const input = el("input", { type, name: `${event.request_id}-${index}`, value: option.label });
          group.append(el("label", {}, input, ` ${option.label}`));
        }
        groups.push(group);
        box.append(group);
      });
      const send = el("button", { type: "button", "data-answer": "send", text: "Answer" });
      send.addEventListener("click", () => {
        const answers = groups.map((g) =>
          Array.from(g.querySelectorAll("input:checked")).map((i) => i.value),
        );
        reply(event.request_id, { answers }, box);
      });
      const reject = el("button", { type: "button", "data-answer": "reject", text: "Reject" });
      reject.addEventListener("click", () => reply(event.request_id, { reject: true }, box));
      box.append(send, reject);
    } else {
      for (const [decision, label] of [
        ["accept", "Allow once"],
        ["accept_for_session", "Allow for this session"],
        ["decline", "Deny"],
      ]) {
        const button = el("button", { type: "button", "data-decision": decision, text: label });
        button.addEventListener("click", () => reply(event.request_id, { decision }, box));
        box.append(button);
      }
    }
    $("requests").append(box);
  }

  async function reply(requestId, body, box) {
    for (const button of box.querySelectorAll("button")) button.disabled = true;
    try {
      await api("POST", `threads/${encodeURIComponent(state.threadId)}/requests/${encodeURIComponent(requestId)}`, body);
    } catch (err) {
      showError(`Reply failed: ${err.message}`);
      for (const button of box.querySelectorAll("button")) button.disabled = false;
    }
  }

  function requestResolved(event) {
    const box = document.querySelector(`[data-request-id="${CSS.escape(event.request_id)}"]`);
    if (box) box.remove();
  }

  // ------------------------------------------------------------------ stop

  function showStopping() {
    state.stopping = true;
    state.stopReported = false; // a new stop: its outcome is still to be shown
    $("stop-status").textContent = "stopping…";
    $("stop-status").dataset.state = "stopping";
    $("stop").disabled = true;
  }

  function renderReport(report, heading) {
    const box = $("stop-report");
    box.replaceChildren();
    box.hidden = false;
    if (!report) {
      box.append(el("p", { text: heading || "Nothing was running: no session was stopped." }));
      return;
    }
    const counts = {};
    for (const s of report.sessions) counts[s.outcome] = (counts[s.outcome] || 0) + 1;
    const summary = Object.entries(counts)
      .map(([outcome, n]) => `${n} ${outcome.replace("_", " ")}`)
      .join(", ");
    box.append(
      el("p", {
        class: "report-summary",
        "data-testid": "stop-summary",
        text: `${heading || "Stopped"} in ${ms(report.elapsed)} ms: ${report.sessions.length} sessions (${summary}); ${report.requests} requests, max ${report.max_in_flight} in flight.`,
      }),
    );
    const table = el("table", { "data-testid": "stop-table" });
    table.append(
      el(
        "thead",
        {},
        el("tr", {}, ...["session", "depth", "outcome", "time (ms)", "error"].map((h) => el("th", { text: h }))),
      ),
    );
    const body = el("tbody");
    for (const s of report.sessions) {
      const block = state.sessions.get(s.session_id);
      if (block) {
        const badge = block.node.querySelector(":scope > .session-head > .session-state");
        badge.textContent = s.outcome.replace("_", " ");
        badge.dataset.outcome = s.outcome;
      }
      const title = block?.title;
      const name = el("td", { class: "report-session" });
      name.style.paddingLeft = `${0.5 + s.depth * 1.2}em`;
      name.append(el("code", { text: s.session_id }), title ? ` ${title}` : "");
      const took =
        s.started === null || s.ended === null
          ? "–"
          : `${ms(s.ended - s.started)} (${ms(s.started)} → ${ms(s.ended)})`;
      body.append(
        el(
          "tr",
          { "data-stop-session": s.session_id, "data-outcome": s.outcome, "data-depth": s.depth },
          name,
          el("td", { text: String(s.depth) }),
          el("td", { class: `outcome ${s.outcome}`, "data-testid": "outcome", text: s.outcome }),
          el("td", { text: took }),
          el("td", { text: s.error || "" }),
        ),
      );
    }
    table.append(body);
    box.append(table);
  }

  // What the interrupted turn had produced: kept on screen, and the transcript's tool
  // calls updated with how they ended.
  function renderPartial(partial) {
    if (!partial) return;
    const box = $("partial");
    box.replaceChildren();
    box.hidden = false;
    box.append(el("h2", { text: "Kept from the stopped turn" }));
    if (partial.text) box.append(el("div", { class: "text answer", text: partial.text }));
    const list = el("ul");
    for (const call of partial.tool_calls || []) {
      const row = el("li", { "data-call-id": call.call_id, "data-status": call.status });
      row.append(
        el("span", { class: "tool-status", text: call.status }),
        " ",
        el("span", { class: "tool-name", text: call.tool }),
        " ",
        el("span", { class: "tool-title", text: call.title || describeInput(call.input) }),
      );
      const output = call.output || call.error;
      if (output) row.append(el("pre", { class: "tool-detail", text: output }));
      list.append(row);
      const item = state.items.get(call.call_id);
      if (item) updateTool(item, call.status, null, item.querySelector(".tool-detail").hidden ? output : null);
    }
    box.append(list);
  }

  function stopDone(result) {
    state.stopping = false;
    state.stopReported = true;
    const report = result.stop;
    const ok = !report || report.ok;
    $("stop-status").textContent = ok ? "stopped" : "Stop failed";
    $("stop-status").dataset.state = ok ? "stopped" : "failed";
    renderReport(report, report ? "Stopped" : null);
    renderPartial(result.partial);
    $("stop").disabled = !state.turnActive;
  }

  function stopFailed(message, report) {
    state.stopping = false;
    state.stopReported = true;
    $("stop-status").textContent = `Stop failed: ${message}`;
    $("stop-status").dataset.state = "failed";
    if (report) renderReport(report, "Stop failed");
    $("stop").disabled = false;
  }

  async function stop() {
    if (!state.threadId) return;
    showStopping();
    try {
      const result = await api("POST", `threads/${encodeURIComponent(state.threadId)}/stop`);
      stopDone(result);
    } catch (err) {
      if (err.type === "stop_failed") stopFailed(err.message, err.body && err.body.stop);
      else stopFailed(err.message, null);
    }
  }

  // ------------------------------------------------------------------ the stream

  const handlers = {
    "session.started": (e) => setStatus("ready"),
    "thread.started": () => {},
    "session.exited": (e) => {
      if ((e.reason || "").startsWith("detached")) {
        // The worker let the thread go (a restart, a deploy): its tree goes on, and the
        // EventSource reconnects by itself to whichever worker serves the thread now.
        $("connection").textContent = "the worker let go of the thread; reconnecting…";
        return;
      }
      setStatus("stopped");
      setTurnState("–", false);
      if (state.source) state.source.close();
      $("connection").textContent = `thread ended${e.reason ? `: ${e.reason}` : ""}`;
    },
    "thread.metadata.updated": (e) => {
      state.rootTitle = e.title;
      const block = state.sessions.get(state.rootSessionId);
      if (block) block.node.querySelector(".session-title").textContent = e.title;
    },
    "thread.compacted": (e) => note(e, "(the history was compacted)", "compacted"),
    "turn.started": (e) => {
      state.currentTurn = e.turn_id;
      turnSection(e.turn_id);
      rootBlock(e.turn_id, state.rootSessionId);
      host.turnStarted();
      setStatus("running");
      setTurnState("running", true);
      state.stopReported = false;
      if (!state.stopping) {
        // The previous turn's "stopped" no longer describes what runs now.
        $("stop-status").textContent = "";
        delete $("stop-status").dataset.state;
      }
    },
    "turn.completed": (e) => {
      state.endedTurns.add(e.turn_id);
      setStatus("ready");
      setTurnState(e.state === "failed" ? `failed: ${e.error || ""}` : "completed", false);
      host.usage(e.usage);
    },
    "turn.aborted": (e) => {
      state.endedTurns.add(e.turn_id);
      setStatus("ready");
      setTurnState(`aborted${e.reason ? ` (${e.reason})` : ""}`, false);
      host.usage(e.usage);
      if (state.stopping && !state.stopReported) {
        // Another tab (or an earlier page) pressed Stop: the stream tells how it ended.
        state.stopping = false;
        $("stop-status").textContent = "stopped";
        $("stop-status").dataset.state = "stopped";
      }
      if (e.partial && !state.stopReported) renderPartial(e.partial);
    },
    "turn.retrying": (e) => {
      const retry = e.retry || {};
      const when = retry.next_at ? ` (next try ${new Date(retry.next_at * 1000).toLocaleTimeString()})` : "";
      $("retry-status").textContent = `retrying #${retry.attempt}: ${retry.message || ""}${when}`;
    },
    "turn.usage": (e) => host.usage(e.usage),
    "turn.plan.updated": (e) => host.plan(e),
    "task.started": (e) => host.taskStarted(e),
    "task.completed": (e) => host.taskCompleted(e),
    "turn.stopping": () => {
      setStatus("stopping");
      showStopping();
    },
    "turn.stop_failed": (e) => stopFailed(e.error, e.stop),
    "turn.stopped": (e) => {
      // Every tab learns how the stop went, not only the one that pressed Stop.
      if (state.stopReported) return;
      state.stopping = false;
      state.stopReported = true;
      $("stop-status").textContent = "stopped";
      $("stop-status").dataset.state = "stopped";
      renderReport(e.stop, e.stop ? "Stopped" : null);
      $("stop").disabled = !state.turnActive;
    },
    "content.delta": appendText,
    "item.started": toolItem,
    "item.updated": toolItem,
    "item.completed": toolItem,
    "child.started": childStarted,
    "request.opened": requestOpened,
    "request.resolved": requestResolved,
    "user-input.requested": requestOpened,
    "user-input.resolved": requestResolved,
    "runtime.warning": (e) => note(e, `warning: ${e.message}`, "warning"),
    "runtime.error": (e) => note(e, `error: ${e.message}`, "error"),
    "stream.gap": (e) => {
      // "expired": what follows is everything the server retains of the thread (after
      // an id it no longer holds, or one another worker or an earlier process issued,
      // whose ids mean nothing here): redraw from it, so nothing shows twice.
      if (e.reason === "expired") redraw(e.thread);
      $("connection").textContent = `events were missed (${e.reason}); catching up`;
    },
  };

  function redraw(thread) {
    const prompts = new Map(state.prompts);
    resetTranscript();
    state.prompts = prompts;
    if (!thread) return;
    state.rootSessionId = thread.session_id;
    setStatus(thread.status);
    const active = Boolean(thread.active_turn_id);
    state.currentTurn = thread.active_turn_id || null;
    setTurnState(active ? "running" : "idle", active);
    if (thread.status === "stopping") showStopping();
  }

  function onEvent(message) {
    // A gap frame has no id of its own (it keeps the last one's): never skipped as seen.
    if (message.type !== "stream.gap" && message.lastEventId && state.seen.has(message.lastEventId)) return;
    let event;
    try {
      event = JSON.parse(message.data);
    } catch (_) {
      return;
    }
    if (event.type !== "stream.gap" && event.event_id) {
      if (state.seen.has(event.event_id)) return;
      state.seen.add(event.event_id);
    }
    const handler = handlers[event.type];
    if (handler) handler(event);
  }

  function subscribe(threadId) {
    if (state.source) state.source.close();
    const url = new URL(apiUrl(`threads/${encodeURIComponent(threadId)}/events`));
    if (token) url.searchParams.set("token", token);
    // First the retained history (the current and previous turn), so a page opened or
    // reloaded mid-turn draws the turn so far; a reconnect sends Last-Event-ID, which
    // the server honours first, so nothing is drawn twice.
    url.searchParams.set("replay", "1");
    const source = new EventSource(url.toString());
    // A turn sent before the stream is connected would be missed: send() waits for it.
    state.connected = new Promise((resolve) => source.addEventListener("open", resolve, { once: true }));
    for (const type of Object.keys(handlers)) source.addEventListener(type, onEvent);
    source.onmessage = onEvent;
    source.onopen = () => {
      $("connection").textContent = "live";
      $("connection").dataset.state = "open";
    };
    source.onerror = () => {
      const closed = source.readyState === EventSource.CLOSED;
      $("connection").textContent = closed ? "disconnected" : "reconnecting…";
      $("connection").dataset.state = closed ? "closed" : "reconnecting";
    };
    state.source = source;
  }

  // ------------------------------------------------------------------ threads

  function resetTranscript() {
    state.seen.clear();
    state.prompts.clear();
    state.turns.clear();
    state.sessions.clear();
    state.items.clear();
    state.texts.clear();
    state.currentTurn = null;
    state.endedTurns.clear();
    state.rootTitle = null;
    state.stopping = false;
    state.stopReported = false;
    $("transcript").replaceChildren();
    $("requests").replaceChildren();
    $("stop-report").replaceChildren();
    $("stop-report").hidden = true;
    $("partial").replaceChildren();
    $("partial").hidden = true;
    $("stop-status").textContent = "";
    host.reset();
  }

  async function openThread(threadId) {
    const info = await api("GET", `threads/${encodeURIComponent(threadId)}`);
    resetTranscript();
    state.threadId = info.thread_id;
    state.rootSessionId = info.session_id;
    $("thread-id").textContent = info.thread_id;
    const url = new URL(location.href);
    url.searchParams.set("thread", info.thread_id);
    history.replaceState(null, "", url.toString());
    setStatus(info.status);
    const active = Boolean(info.active_turn_id);
    state.currentTurn = info.active_turn_id || null;
    setTurnState(active ? "running" : "idle", active);
    if (info.status === "stopping") showStopping();
    if (info.retry) handlers["turn.retrying"]({ retry: info.retry });
    if (info.last_error) showError(`last error: ${info.last_error}`);
    subscribe(info.thread_id);
    await refreshThreads();
  }

  async function refreshThreads() {
    const threads = await api("GET", "threads");
    const select = $("thread-select");
    select.replaceChildren(el("option", { value: "", text: threads.length ? "(pick a thread)" : "(no threads)" }));
    for (const t of threads) {
      select.append(el("option", { value: t.thread_id, text: `${t.thread_id} (${t.status})` }));
    }
    if (state.threadId) select.value = state.threadId;
  }

  async function newThread() {
    const info = await api("POST", "threads", host.choices());
    await openThread(info.thread_id);
  }

  async function send(eventArg) {
    eventArg.preventDefault();
    const text = $("prompt").value.trim();
    if (!text) return;
    try {
      if (!state.threadId) await newThread();
      $("send").disabled = true;
      await Promise.race([state.connected, new Promise((resolve) => setTimeout(resolve, 5000))]);
      // "/name args" of a server command runs it; anything else is a prompt.
      const command = host.command(text);
      const result = command
        ? await api("POST", host.threadPath("/commands"), { ...command, ...host.choices() })
        : await api("POST", host.threadPath("/turns"), { text, ...host.choices() });
      $("prompt").value = "";
      state.currentTurn = state.currentTurn || result.turn_id;
      state.prompts.set(result.turn_id, text);
      const turn = turnSection(result.turn_id);
      if (!turn.section.querySelector(".user")) {
        turn.section.insertBefore(el("div", { class: "user", text }), turn.section.children[1] || null);
      }
      // The stream may have told the whole turn already (a fast answer).
      if (!state.endedTurns.has(result.turn_id)) setTurnState("running", true);
      showError("");
    } catch (err) {
      showError(`Send failed: ${err.message}`);
    } finally {
      $("send").disabled = false;
    }
  }

  async function start() {
    $("stop").addEventListener("click", stop);
    $("prompt-form").addEventListener("submit", send);
    $("new-thread").addEventListener("click", () => newThread().catch((e) => showError(e.message)));
    $("fork-thread").addEventListener("click", () =>
      host.fork().then(openThread).catch((e) => showError(`Fork failed: ${e.message}`)),
    );
    $("thread-select").addEventListener("change", (e) => {
      if (e.target.value) openThread(e.target.value).catch((err) => showError(err.message));
    });
    const wanted = new URLSearchParams(location.search).get("thread");
    try {
      await host.loadInventory();
      if (wanted) await openThread(wanted);
      else await refreshThreads();
    } catch (err) {
      if (err.status === 401) {
        // A kept token the server no longer takes (it was restarted with a new one).
        forgetToken();
        showError("unauthorized: open the URL with #token=… that opencode-tree web printed");
      } else {
        showError(err.message);
      }
    }
    document.body.dataset.ready = "true";
  }

  start();
})();
