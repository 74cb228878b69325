// The host features of the stop-button page: a Stop on each running
// subagent's row, the context meter and the turn's tree-wide cost, the plan beside the
// transcript, the model and agent pickers fed by GET /inventory, and slash commands.
//
// A file of its own so app.js (the transcript, the stream and the turn's Stop) stays
// readable; app.js calls window.opencodeTreeHost({...}) once with its helpers and
// routes the events below to it. As in app.js, server data is only ever written with
// textContent (a todo or a description such as "<img onerror=...>" stays text).
"use strict";

window.opencodeTreeHost = function ({ $, el, api, state }) {
  const rows = new Map(); // subagent session_id -> its row in #subagents
  let inventory = null; // GET /inventory's answer, once read

  function threadPath(suffix) {
    return `threads/${encodeURIComponent(state.threadId)}${suffix}`;
  }

  // ---------------------------------------------------------------- subagents

  function sessionBadge(sessionId, status) {
    const block = state.sessions.get(sessionId);
    const badge = block && block.node.querySelector(":scope > .session-head > .session-state");
    if (!badge) return;
    badge.textContent = status;
    badge.dataset.task = status;
  }

  function setRow(sessionId, rowState, text) {
    const row = rows.get(sessionId);
    if (!row) return;
    row.dataset.state = rowState;
    row.querySelector(".subagent-state").textContent = text || rowState;
    row.querySelector("button").disabled = rowState !== "running";
  }

  // task.started: a row with its Stop. A background subagent's task.completed comes at
  // its own end, not at its call's, so it shows running until it has really ended.
  function taskStarted(event) {
    if (rows.has(event.session_id)) return;
    const stop = el("button", {
      type: "button",
      class: "subagent-stop",
      "data-testid": "subagent-stop",
      text: "Stop",
    });
    stop.addEventListener("click", () => stopOne(event.session_id));
    const row = el(
      "li",
      {
        class: "subagent",
        "data-testid": "subagent",
        "data-session-id": event.session_id,
        "data-parent-id": event.parent_session_id,
        "data-description": event.description || "",
        "data-state": "running",
      },
      stop,
      el("span", { class: "subagent-name", text: event.description || "subagent" }),
      el("span", { class: "subagent-agent", text: event.agent ? event.agent : "" }),
      el("code", { class: "session-id", text: event.session_id }),
      el("span", { class: "subagent-state", "data-testid": "subagent-state", text: "running" }),
    );
    rows.set(event.session_id, row);
    $("subagents").append(row);
    $("subagents").hidden = false;
  }

  function taskCompleted(event) {
    const text = event.error ? `${event.status}: ${event.error}` : event.status;
    setRow(event.session_id, event.status, text);
    sessionBadge(event.session_id, event.status);
  }

  async function stopOne(sessionId) {
    if (!state.threadId) return;
    setRow(sessionId, "stopping", "stopping…");
    try {
      const path = threadPath(`/subagents/${encodeURIComponent(sessionId)}/stop`);
      const report = await api("POST", path);
      // The stream's task.completed may have said it first.
      if (rows.get(sessionId)?.dataset.state === "stopping") {
        setRow(sessionId, "stopped", `stopped (${report.sessions.length} sessions)`);
        sessionBadge(sessionId, "stopped");
      }
    } catch (err) {
      if (rows.get(sessionId)?.dataset.state === "stopping") {
        setRow(sessionId, "running", `Stop failed: ${err.message}`);
      }
    }
  }

  // ---------------------------------------------------------------- usage and plan

  const count = new Intl.NumberFormat("en-US");

  // turn.usage (and a turn's end): the root's context against its model's limit, and
  // the cost of the turn's whole tree, subagents included.
  function usage(figures) {
    if (!figures) return;
    const meter = $("context-meter");
    if (figures.context_tokens !== null && figures.context_tokens !== undefined) {
      const used = figures.context_tokens;
      const limit = figures.context_limit;
      meter.dataset.tokens = String(used);
      meter.dataset.limit = limit ? String(limit) : "";
      meter.textContent = limit
        ? `context ${count.format(used)} / ${count.format(limit)} (${Math.round((used / limit) * 100)}%)`
        : `context ${count.format(used)}`;
      $("context-bar").max = limit || used || 1;
      $("context-bar").value = used;
      $("context-bar").hidden = !limit;
    }
    const cost = $("turn-cost");
    cost.dataset.cost = String(figures.cost || 0);
    cost.textContent = `$${(figures.cost || 0).toFixed(4)}`;
    cost.title = `${figures.subagents || 0} subagents included`;
  }

  function turnStarted() {
    const cost = $("turn-cost");
    cost.dataset.cost = "0";
    cost.textContent = "$0.0000";
  }

  const MARKS = { completed: "✓", in_progress: "▶", pending: "○", cancelled: "✗" };

  // turn.plan.updated: the root's whole todo list each time (empty: cleared).
  function plan(event) {
    const todos = event.todos || [];
    const list = $("plan-items");
    list.replaceChildren();
    for (const todo of todos) {
      list.append(
        el(
          "li",
          { class: "plan-item", "data-status": todo.status, "data-priority": todo.priority },
          el("span", { class: "plan-mark", text: MARKS[todo.status] || "·" }),
          el("span", { class: "plan-content", text: todo.content }),
        ),
      );
    }
    $("plan").hidden = todos.length === 0;
  }

  function reset() {
    rows.clear();
    $("subagents").replaceChildren();
    $("subagents").hidden = true;
    plan({ todos: [] });
    for (const id of ["context-meter", "turn-cost"]) {
      $(id).textContent = "";
      for (const key of Object.keys($(id).dataset)) delete $(id).dataset[key];
    }
    $("context-bar").hidden = true;
  }

  // ---------------------------------------------------------------- inventory

  function fill(select, none, choices) {
    const kept = select.value;
    select.replaceChildren(el("option", { value: "", text: none }));
    for (const [value, label] of choices) select.append(el("option", { value, text: label }));
    if (choices.some(([value]) => value === kept)) select.value = kept;
  }

  async function loadInventory() {
    try {
      inventory = await api("GET", "inventory");
    } catch (err) {
      inventory = null; // the pickers keep the server's defaults
      return;
    }
    fill(
      $("model-select"),
      "default model",
      inventory.models.map((m) => [m.id, m.name && m.name !== m.id ? `${m.name} (${m.id})` : m.id]),
    );
    fill(
      $("agent-select"),
      "default agent",
      inventory.agents.filter((a) => a.mode !== "subagent").map((a) => [a.name, a.name]),
    );
    $("commands-hint").dataset.count = String(inventory.commands.length);
  }

  // What the pickers chose, for POST /threads, turns and commands.
  function choices() {
    const chosen = {};
    if ($("model-select").value) chosen.model = $("model-select").value;
    if ($("agent-select").value) chosen.agent = $("agent-select").value;
    return chosen;
  }

  // "/name args" of a command the server has: {name, arguments}; anything else is a
  // prompt (a path such as "/etc/hosts is wrong" is not a command).
  function command(text) {
    const match = /^\/([^\s/]+)(?:\s+([\s\S]*))?$/.exec(text);
    if (!match || !inventory) return null;
    if (!inventory.commands.some((c) => c.name === match[1])) return null;
    return { name: match[1], arguments: (match[2] || "").trim() };
  }

  // Under the prompt box while it starts with "/": the commands that match.
  function hint() {
    const text = $("prompt").value;
    const box = $("commands-hint");
    box.replaceChildren();
    if (!inventory || !text.startsWith("/") || /\s/.test(text)) return;
    const typed = text.slice(1);
    for (const c of inventory.commands.filter((c) => c.name.startsWith(typed)).slice(0, 12)) {
      const item = el(
        "button",
        { type: "button", class: "command", "data-command": c.name },
        el("code", { text: `/${c.name}` }),
        c.description ? ` ${c.description}` : "",
      );
      item.addEventListener("click", () => {
        $("prompt").value = `/${c.name} `;
        $("prompt").focus();
        hint();
      });
      box.append(item);
    }
  }

  // POST /threads/<id>/fork: a new thread on OpenCode's fork of this one; its id.
  async function fork() {
    if (!state.threadId) throw new Error("open a thread to fork it");
    const info = await api("POST", threadPath("/fork"), {});
    return info.thread_id;
  }

  $("prompt").addEventListener("input", hint);

  return {
    taskStarted,
    taskCompleted,
    usage,
    turnStarted,
    plan,
    reset,
    loadInventory,
    choices,
    command,
    threadPath,
    fork,
  };
};
