// The harness-edge console: every action is a call to the daemon's HTTP API, sent with the
// session cookie and, when it changes anything, the session's CSRF token.
"use strict";

// refresh redraws what the current view shows after an action.
// renders counts the harness body's redraws: one that comes back after a later one has been
// drawn is stale, and is dropped.
// showAll holds the statuses whose whole group the harness list shows; reasons what was typed
// as the reason of each gate ("harness/gate") not yet rejected.
const state = { csrf: "", stream: null, refreshTimer: 0, refresh: () => route(), renders: 0, drawn: 0, showAll: {}, reasons: {} };

// groupShown is how many harnesses of a status the harness list shows before "Show all".
const groupShown = 25;

// shown is text as the page shows it: the Unicode bidi controls that reorder what a line
// shows (U+202E makes "exe.txt" of "\u202etxt.exe"), which a step's description, a reason or
// an error may carry, as \u202e, as the command line shows them. Right-to-left text itself
// needs none of them.
function shown(s) {
  return s.replace(/[\u202a-\u202e\u2066-\u2069]/g, (c) => "\\u" + c.charCodeAt(0).toString(16));
}

// el builds an element: el("div", {class: "card"}, child, "text", ...). Text is always text,
// and shown.
function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : v);
  }
  for (const k of kids.flat()) {
    if (k === undefined || k === null || k === false) continue;
    e.append(k instanceof Node ? k : document.createTextNode(shown(String(k))));
  }
  return e;
}

function flash(msg, bad) {
  const f = document.getElementById("flash");
  f.textContent = shown(msg);
  f.className = bad ? "flash bad" : "flash";
  f.hidden = !msg;
}

class APIError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

async function api(method, path, body) {
  const opts = { method, headers: {}, credentials: "same-origin" };
  if (method !== "GET") {
    opts.headers["X-CSRF-Token"] = state.csrf;
    opts.headers["Content-Type"] = "application/json";
    opts.body = JSON.stringify(body || {});
  }
  const r = await fetch(path, opts);
  const text = await r.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch (_) { data = text; }
  if (r.status === 401) { showSignIn(); throw new APIError(401, "signed out"); }
  if (!r.ok) throw new APIError(r.status, (data && data.error) || r.statusText);
  return data;
}

function age(t) {
  if (!t || t.startsWith("0001")) return "";
  const s = Math.max(0, (Date.now() - new Date(t).getTime()) / 1000);
  if (s < 90) return Math.round(s) + "s";
  if (s < 5400) return Math.round(s / 60) + "m";
  if (s < 129600) return Math.round(s / 3600) + "h";
  return Math.round(s / 86400) + "d";
}

function bytes(n) {
  if (n < 1024) return n + " B";
  if (n < 1048576) return (n / 1024).toFixed(1) + " KiB";
  return (n / 1048576).toFixed(1) + " MiB";
}

// clip is a reason as a list shows it, as the command line's show and report do: cut to its
// first 300 bytes (at a character's start), saying how long it is when cut. A failed step's
// error may be kilobytes of lines; the harness's own page has it whole.
function clip(s) {
  const b = new TextEncoder().encode(s);
  if (b.length <= 300) return s;
  let cut = 300;
  while (cut > 0 && (b[cut] & 0xc0) === 0x80) cut--;
  return new TextDecoder().decode(b.subarray(0, cut)) + "... (" + b.length + " bytes in all)";
}

function badge(s) { return el("span", { class: "badge " + s, "data-status": s }, s); }

// budgetText is a harness's budget use: st is its state, or anything with the state's
// totalToolCalls and budget (a report entry's toolCalls and budget).
function budgetText(st) {
  const b = st.budget || {};
  const parts = [];
  parts.push("tool calls " + (st.totalToolCalls || 0) + (b.toolCalls ? "/" + b.toolCalls : ""));
  if (b.tokens || b.tokensUsed) parts.push("tokens " + (b.tokensUsed || 0) + (b.tokens ? "/" + b.tokens : ""));
  if (b.wallClockMs || b.wallClockUsedMs) parts.push("time " + Math.round((b.wallClockUsedMs || 0) / 1000) + "s" + (b.wallClockMs ? "/" + Math.round(b.wallClockMs / 1000) + "s" : ""));
  return parts.join(" · ");
}

// act runs an action and says how it went (what fn returns, when it is a message); then the
// view refreshes.
async function act(what, fn) {
  try {
    const msg = await fn();
    flash(typeof msg === "string" ? msg : what + ": done");
  } catch (e) {
    if (e.status !== 401) flash(what + ": " + e.message, true);
  }
  state.refresh();
}

function gateCard(g) {
  // What is typed as the reason outlives the page's redraws until the gate is rejected: a
  // refused rejection (a reason over its limit) leaves it in its box to be mended.
  const key = g.harnessId + "/" + g.gate;
  const reason = el("input", { placeholder: "reason (required to reject)", "aria-label": "reason", class: "reason",
    oninput: () => { state.reasons[key] = reason.value; } });
  reason.value = state.reasons[key] || "";
  const path = "/v1/harnesses/" + encodeURIComponent(g.harnessId);
  return el("div", { class: "card gate", "data-gate": g.harnessId + "/" + g.gate },
    el("div", { class: "row" }, el("strong", {}, "Gate " + g.gate), badge("waiting_for_human"), el("span", { class: "muted waits-on" }, g.waitsOn + " · waiting " + age(g.since))),
    el("div", {}, el("a", { href: "#/h/" + encodeURIComponent(g.harnessId) }, g.harnessId)),
    g.why ? el("div", { class: "muted" }, g.why) : null,
    reason,
    el("div", { class: "row" },
      el("button", { class: "primary approve", type: "button", onclick: () => act("approve " + g.gate + " of " + g.harnessId, () => api("POST", path + "/approve", { gate: g.gate })) }, "Approve"),
      el("button", { class: "danger reject", type: "button", onclick: () => {
        if (!reason.value.trim()) { flash("A rejection needs a reason.", true); reason.focus(); return; }
        act("reject " + g.gate + " of " + g.harnessId, async () => {
          const r = await api("POST", path + "/reject", { gate: g.gate, reason: reason.value });
          delete state.reasons[key];
          return r;
        });
      } }, "Reject")));
}

async function viewHome(v) {
  const [health, report, list] = await Promise.all([api("GET", "/v1/health"), api("GET", "/v1/report?since=0s"), api("GET", "/v1/harnesses")]);
  const children = {};
  for (const e of list) if (e.parentHarnessId) (children[e.parentHarnessId] = children[e.parentHarnessId] || []).push(e);

  v.append(el("h1", {}, "Waiting for you (" + report.waiting.length + ")"));
  if (!report.waiting.length) v.append(el("p", { class: "muted" }, "No gate waits for a human."));
  report.waiting.forEach((g) => v.append(gateCard(g)));

  v.append(el("h2", {}, "Daemon"), healthCard(health));

  const order = ["running", "paused", "pending", "failed", "completed"];
  const byStatus = {};
  for (const h of report.harnesses) (byStatus[h.status] = byStatus[h.status] || []).push(h);
  const statuses = Object.keys(byStatus).sort((a, b) => (order.indexOf(a) + 99 * (order.indexOf(a) < 0)) - (order.indexOf(b) + 99 * (order.indexOf(b) < 0)));
  if (!statuses.length) v.append(el("p", { class: "muted" }, "No harnesses yet: submit a task."));
  for (const s of statuses) {
    v.append(el("h2", {}, s + " (" + byStatus[s].length + ")"));
    // A group lists its newest first, groupShown of them until asked for all: thousands of
    // cards take seconds to draw, and every action draws the page again.
    const listed = state.showAll[s] ? byStatus[s] : byStatus[s].slice(0, groupShown);
    for (const h of listed) {
      v.append(el("div", { class: "card harness", "data-id": h.id },
        el("div", { class: "row" }, el("a", { href: "#/h/" + encodeURIComponent(h.id) }, h.id), badge(h.status), h.phase ? el("span", { class: "badge" }, "phase " + h.phase) : null),
        el("div", { class: "muted" }, h.task + " · agent " + h.agent + " · age " + age(h.createdAt) + " · updated " + age(h.updatedAt) + " ago"),
        el("progress", { max: h.steps || 1, value: h.stepsDone }),
        el("div", { class: "muted" }, h.stepsDone + "/" + h.steps + " steps · " + budgetText({ totalToolCalls: h.toolCalls, budget: h.budget }) + (h.reason ? " · " + clip(h.reason) : "")),
        (children[h.id] || []).length ? el("div", { class: "muted" }, "sub-agents: ", (children[h.id]).map((c) => [el("a", { href: "#/h/" + encodeURIComponent(c.id) }, c.id), " ", badge(c.status), " "])) : null));
    }
    if (listed.length < byStatus[s].length) {
      v.append(el("button", { type: "button", class: "show-all", "data-status": s, onclick: () => { state.showAll[s] = true; route(); } },
        "Show all " + byStatus[s].length + " " + s + " (" + (byStatus[s].length - listed.length) + " more)"));
    }
  }
}

function healthCard(h) {
  return el("div", { class: "card" },
    el("dl", { class: "kv" },
      el("dt", {}, "owner"), el("dd", {}, h.owner + " (pid " + h.pid + ", " + h.version + ")"),
      el("dt", {}, "engine"), el("dd", {}, String(h.engine)),
      el("dt", {}, "frozen"), el("dd", { id: "frozen" }, h.frozen ? "yes" : "no"),
      el("dt", {}, "running"), el("dd", {}, (h.running || []).join(", ") || "none"),
      el("dt", {}, "queued"), el("dd", {}, (h.queued || []).join(", ") || "none"),
      (h.waitingForRoom || []).length ? [el("dt", {}, "waiting for disk"), el("dd", {}, h.waitingForRoom.join(", "))] : null,
      el("dt", {}, "up since"), el("dd", {}, age(h.started))),
    el("div", { class: "row" },
      h.frozen
        ? el("button", { type: "button", id: "unfreeze", onclick: () => act("unfreeze", () => api("POST", "/v1/unfreeze")) }, "Unfreeze")
        : [el("button", { type: "button", id: "freeze", onclick: () => act("freeze", () => api("POST", "/v1/freeze")) }, "Freeze"),
           el("button", { type: "button", id: "freeze-pause", onclick: () => act("freeze and pause", () => api("POST", "/v1/freeze", { running: "pause" })) }, "Freeze and pause running")]));
}

// viewHarness shows one harness: its body (refreshed in place as its events come) and its
// events, live, from one stream for as long as the page shows it.
async function viewHarness(v, id) {
  const path = "/v1/harnesses/" + encodeURIComponent(id);
  const body = el("div", { id: "harness-body" });
  state.drawn = ++state.renders;
  const st = await renderHarness(body, id);
  const list = el("ul", { class: "events", id: "events" });
  const live = el("span", { class: "muted", id: "live" }, "(connecting)");
  // The course card is outside the body: a refresh does not wipe what is typed in it.
  v.append(body, st.parentHarnessId ? el("p", { class: "muted" }, "A sub-agent's course is changed through its parent's.") : await courseCard(id),
    el("h2", {}, "Events ", live), list);
  // The API's server-sent events: the logged ones first, then each new one as it happens.
  // Each is listed once; the body refreshes (at most once a second) so statuses follow. A
  // stream ends with its harness (completed or failed); an action on the page (a retry, a
  // rollback) may start it again, so after one the stream is opened again from the last
  // event listed.
  let lastN = 0;
  let ended = false;
  const onEvent = (m) => {
    let e = {};
    try { e = JSON.parse(m.data); } catch (_) { return; }
    if (e.n <= lastN) return;
    lastN = e.n;
    const bits = [e.n, e.type, e.stepId, e.action || e.outcome || (e.to ? (e.from ? e.from + " -> " : "") + e.to : ""), e.tool, e.gateId, e.message || e.reason].filter((x) => x !== undefined && x !== "");
    list.prepend(el("li", { "data-type": e.type }, bits.join(" · ")));
    if (!state.refreshTimer) state.refreshTimer = setTimeout(() => { state.refreshTimer = 0; refreshHarness(id); }, 1000);
  };
  const connect = () => {
    ended = false;
    const es = new EventSource(path + "/events?follow=1" + (lastN ? "&after=" + lastN : ""));
    state.stream = es;
    es.onopen = () => { live.textContent = "(live)"; };
    ["state_transition", "step_started", "step_completed", "step_retry", "step_failed", "plan_completed", "tool_call", "checkpoint", "warning",
      "gate", "sub_agent", "side_effect", "iteration", "compaction", "phase", "governor", "course"].forEach((t) => es.addEventListener(t, onEvent));
    es.onmessage = onEvent;
    es.addEventListener("end", () => { live.textContent = "(ended)"; ended = true; es.close(); refreshHarness(id); });
    es.onerror = () => { if (es.readyState === EventSource.CLOSED) live.textContent = "(closed)"; };
  };
  state.refresh = () => {
    refreshHarness(id);
    if (ended && state.stream && location.hash === "#/h/" + encodeURIComponent(id)) connect();
  };
  connect();
}

// refreshHarness redraws a harness's body in place while the page still shows it. Redraws
// overlap (an action's, the events' timer, the stream's end) and their requests may come back
// in any order: one older than the last drawn is dropped, or it would put back a status the
// harness has left (a harness completed on the server, shown running for good).
async function refreshHarness(id) {
  if (location.hash !== "#/h/" + encodeURIComponent(id)) return;
  const n = ++state.renders;
  const fresh = el("div", {});
  try { await renderHarness(fresh, id); } catch (e) { if (e.status !== 401) flash(e.message, true); return; }
  if (n < state.drawn) return;
  const body = document.getElementById("harness-body");
  if (body) { state.drawn = n; body.replaceChildren(...fresh.childNodes); }
}

async function renderHarness(v, id) {
  const path = "/v1/harnesses/" + encodeURIComponent(id);
  const [st, report] = await Promise.all([api("GET", path), api("GET", "/v1/report?since=0s")]);
  const entry = report.harnesses.find((h) => h.id === id);
  v.append(el("h1", {}, id), el("div", { class: "row", id: "status" }, badge(st.status), st.phase ? el("span", { class: "badge" }, "phase " + st.phase) : null,
    st.statusReason ? el("span", { class: "muted text" }, st.statusReason) : null));
  if (st.parentHarnessId) v.append(el("p", {}, "sub-agent of ", el("a", { href: "#/h/" + encodeURIComponent(st.parentHarnessId) }, st.parentHarnessId)));

  for (const g of report.waiting.filter((g) => g.harnessId === id || (st.subAgentIds || []).includes(g.harnessId))) v.append(gateCard(g));

  // A completed harness has nothing left to pause, resume or stop (the API refuses them).
  if (st.status !== "completed") v.append(el("div", { class: "row" },
    el("button", { type: "button", id: "pause", onclick: () => act("pause", () => api("POST", path + "/pause")) }, "Pause"),
    el("button", { type: "button", id: "resume", onclick: () => act("resume", () => api("POST", path + "/resume")) }, "Resume"),
    el("button", { type: "button", id: "stop", class: "danger", onclick: () => { if (confirm("Stop " + id + "? It cannot go on after.")) act("stop", () => api("POST", path + "/stop")); } }, "Stop")));

  v.append(el("dl", { class: "kv" },
    el("dt", {}, "task"), el("dd", {}, st.taskId + " · agent " + st.agentName),
    el("dt", {}, "budget"), el("dd", {}, budgetText(st)),
    el("dt", {}, "checkpoints"), el("dd", { id: "checkpoints" }, String(st.checkpointCount) + (entry ? " · " + bytes(entry.storedBytes) + " stored" : "")),
    el("dt", {}, "age"), el("dd", {}, age(st.createdAt) + " (updated " + age(st.updatedAt) + " ago)")));

  const steps = (st.plan && st.plan.steps) || [];
  v.append(el("h2", {}, "Plan (" + steps.filter((s) => s.status === "completed").length + "/" + steps.length + ")"),
    el("ol", { class: "steps" }, steps.map((s) => el("li", { "data-step": s.id }, badge(s.status), " ", el("strong", {}, s.id), " ", s.description,
      s.childHarnessId ? [" → ", el("a", { href: "#/h/" + encodeURIComponent(s.childHarnessId) }, s.childHarnessId)] : null,
      s.error ? el("div", { class: "error" }, s.error) : null))));

  if ((st.subAgentIds || []).length) {
    v.append(el("h2", {}, "Sub-agents"), el("ul", {}, st.subAgentIds.map((c) => {
      const r = (st.subAgentResults || {})[c];
      return el("li", {}, el("a", { href: "#/h/" + encodeURIComponent(c) }, c), r ? [" ", badge(r.status), " step " + r.stepId] : null);
    })));
  }

  const calls = st.toolCallHistory || [];
  v.append(el("h2", {}, "Tool calls (" + (st.totalToolCalls || 0) + ")"),
    el("table", {}, el("tr", {}, el("th", {}, "tool"), el("th", {}, "outcome"), el("th", {}, "ms"), el("th", {}, "when")),
      calls.slice(-50).reverse().map((c) => el("tr", {}, el("td", {}, c.callName), el("td", {}, c.result.success ? "ok" : (c.result.errorKind || "error") + ": " + (c.result.error || "")),
        el("td", {}, String(Math.round(c.duration || 0))), el("td", {}, age(c.timestamp) + " ago")))));
  return st;
}

// courseCard changes a harness's course: retry it, roll it back to a named checkpoint (or name
// one), replan it with a plan change, delete it. Each is the API's own operation, and its
// refusal is shown as the API words it.
async function courseCard(id) {
  const path = "/v1/harnesses/" + encodeURIComponent(id);
  const reason = el("input", { id: "course-reason", placeholder: "reason (optional, recorded with the change)", "aria-label": "reason for the change" });
  const why = () => reason.value.trim() || undefined;
  const by = "console";
  const points = el("select", { id: "rollback-to", "aria-label": "named checkpoint" });
  const loadPoints = async () => {
    let l = { named: [] };
    try { l = await api("GET", path + "/checkpoints"); } catch (_) { /* none to list */ }
    const named = l.named || [];
    points.replaceChildren(...(named.length ? named.map((c) => el("option", { value: c.name }, c.name + " (#" + c.seq + ", " + c.status + ", " + c.stepsDone + "/" + c.steps + " steps)"))
      : [el("option", { value: "" }, "no named checkpoint")]));
  };
  await loadPoints();
  const name = el("input", { id: "checkpoint-name", placeholder: "name for the newest checkpoint", "aria-label": "checkpoint name" });
  const change = el("textarea", { id: "replan-change", placeholder: "skip: [ship]\nreplace:\n  build: {description: build with clang}", "aria-label": "plan change" });
  const changeName = el("input", { id: "replan-name", placeholder: "fix.yaml (for errors)", "aria-label": "plan change name" });
  const file = el("input", { type: "file", accept: ".yaml,.yml,.json", "aria-label": "plan change file", onchange: async () => {
    const f = file.files[0];
    if (f) { change.value = await fileText(f); if (!changeName.value) changeName.value = f.name; }
  } });
  const force = el("input", { type: "checkbox", id: "delete-force" });
  force.style.width = "auto";
  const after = (what, fn) => act(what, async () => { const msg = await fn(); await loadPoints(); return msg; });
  return el("div", { class: "card", id: "course" },
    el("h2", {}, "Change course"), reason,
    el("div", { class: "row" },
      el("button", { type: "button", id: "retry", onclick: () => after("retry", async () => {
        const r = await api("POST", path + "/retry", { by, reason: why() });
        return "retry: " + r.status + (r.steps && r.steps.length ? " (steps " + r.steps.join(", ") + ")" : "") + ": resume to run it";
      }) }, "Retry")),
    el("label", {}, "Roll back to ", points),
    el("div", { class: "row" },
      el("button", { type: "button", id: "rollback", onclick: () => {
        if (!points.value) { flash("rollback: no named checkpoint to roll back to: name one first", true); return; }
        after("rollback", async () => {
          const r = await api("POST", path + "/rollback", { to: points.value, by, reason: why() });
          return "rolled back to " + points.value + ": " + r.status + ", " + r.stepsDone + "/" + r.steps + " steps done";
        });
      } }, "Roll back")),
    el("label", {}, "Name the newest checkpoint ", name),
    el("div", { class: "row" },
      el("button", { type: "button", id: "name-checkpoint", onclick: () => after("checkpoint", async () => {
        const r = await api("POST", path + "/checkpoints", { name: name.value.trim(), by });
        name.value = "";
        return "checkpoint #" + r.seq + " named " + r.name;
      }) }, "Name checkpoint")),
    el("label", {}, "Plan change file ", file), el("label", {}, "or its text ", change), el("label", {}, "Name ", changeName),
    el("div", { class: "row" },
      el("button", { type: "button", id: "replan", onclick: () => after("replan", async () => {
        const r = await api("POST", path + "/replan", { change: change.value, name: changeName.value || undefined, by, reason: why() });
        change.value = "";
        return "replanned: " + (r.summary || "") + " (" + r.status + ")";
      }) }, "Replan")),
    el("div", { class: "row" },
      el("label", {}, force, " even waiting for a human or interrupted"),
      el("button", { type: "button", id: "delete", class: "danger", onclick: async () => {
        if (!confirm("Delete " + id + " and its sub-agents? Its checkpoints and events go with it.")) return;
        try {
          const r = await api("DELETE", path + (force.checked ? "?force=1" : ""));
          // To the list, without the hash change that would clear the message.
          history.pushState(null, "", "#/");
          await route();
          flash("deleted " + r.harnesses.map((h) => h.id).join(", ") + ": " + bytes(r.freedBytes || 0) + " given back");
        } catch (e) { if (e.status !== 401) flash("delete: " + e.message, true); }
      } }, "Delete")));
}

// fileText is a picked file's text as the command line reads a task file: UTF-8 (a byte-order
// mark dropped), or UTF-16 when it starts with a UTF-16 byte-order mark. Blob.text() reads UTF-8
// by the standard: some browsers look for a UTF-16 mark, others garble such a file.
async function fileText(f) {
  const b = new Uint8Array(await f.arrayBuffer());
  const enc = b[0] === 0xff && b[1] === 0xfe ? "utf-16le" : b[0] === 0xfe && b[1] === 0xff ? "utf-16be" : "utf-8";
  return new TextDecoder(enc).decode(b);
}

function viewSubmit(v) {
  const task = el("textarea", { id: "task", name: "task", placeholder: "id: fix-tests\nagent: A\n...", required: true });
  const name = el("input", { id: "task-name", placeholder: "task.yaml (for errors)" });
  const dir = el("input", { id: "task-dir", placeholder: "directory a relative workspace is resolved against (optional)" });
  const file = el("input", { type: "file", accept: ".yaml,.yml,.json", onchange: async () => {
    const f = file.files[0];
    if (f) { task.value = await fileText(f); if (!name.value) name.value = f.name; }
  } });
  v.append(el("h1", {}, "Submit a task"),
    el("label", {}, "Task file ", file), el("label", {}, "or its text ", task), el("label", {}, "Name ", name), el("label", {}, "Directory ", dir),
    el("button", { type: "button", class: "primary", id: "submit", onclick: async () => {
      try {
        const r = await api("POST", "/v1/harnesses", { task: task.value, name: name.value || undefined, dir: dir.value || undefined });
        flash("submitted: " + r.id);
        location.hash = "#/h/" + encodeURIComponent(r.id);
      } catch (e) { if (e.status !== 401) flash("submit: " + e.message, true); }
    } }, "Submit"));
}

async function viewReport(v) {
  const since = new URLSearchParams(location.hash.split("?")[1] || "").get("since") || "12h";
  const [r, health] = await Promise.all([api("GET", "/v1/report?since=" + encodeURIComponent(since)), api("GET", "/v1/health")]);
  const sel = el("select", { id: "since", onchange: () => { location.hash = "#/report?since=" + sel.value; } },
    ["1h", "12h", "24h", "168h", "0s"].map((s) => el("option", { value: s, selected: s === since }, s === "0s" ? "everything" : "last " + s)));
  v.append(el("h1", {}, "Morning report"), sel,
    el("p", {}, Object.entries(r.counts).map(([k, n]) => [badge(k), " " + n + "  "])),
    el("p", { class: "muted" }, r.checkpoints + " checkpoints · " + bytes(r.storedBytes) + " stored · " + r.waiting.length + " gates waiting"),
    (r.damaged || []).length ? el("div", { class: "card" }, el("strong", { class: "error" }, "Damaged"), el("ul", {}, r.damaged.map((d) => el("li", {}, d.id + ": " + d.reason)))) : null,
    el("table", {}, el("tr", {}, el("th", {}, "harness"), el("th", {}, "status"), el("th", {}, "steps"), el("th", {}, "tools"), el("th", {}, "updated")),
      r.harnesses.map((h) => el("tr", {}, el("td", {}, el("a", { href: "#/h/" + encodeURIComponent(h.id) }, h.id)), el("td", {}, badge(h.status)),
        el("td", {}, h.stepsDone + "/" + h.steps), el("td", {}, String(h.toolCalls)), el("td", {}, age(h.updatedAt) + " ago")))),
    r.harnesses.some((h) => (h.failures || []).length) ? el("h2", {}, "Failures") : null,
    r.harnesses.filter((h) => (h.failures || []).length).map((h) => el("div", { class: "card" }, el("strong", {}, h.id), el("ul", {}, h.failures.map((f) => el("li", {}, clip(f)))))),
    el("h2", {}, "Health"), healthCard(health));
}

function showSignIn() {
  document.getElementById("signin").hidden = false;
  document.getElementById("nav").hidden = true;
  document.getElementById("view").replaceChildren();
  if (new URLSearchParams(location.search).get("signin") === "wrong") document.getElementById("signin-error").hidden = false;
}

async function route() {
  if (state.stream) { state.stream.close(); state.stream = null; }
  state.refresh = () => route();
  const v = document.getElementById("view");
  const fresh = el("section", {});
  const h = location.hash || "#/";
  try {
    if (h.startsWith("#/h/")) await viewHarness(fresh, decodeURIComponent(h.slice(4)));
    else if (h === "#/submit") viewSubmit(fresh);
    else if (h.startsWith("#/report")) await viewReport(fresh);
    else await viewHome(fresh);
  } catch (e) {
    if (e.status === 401) return;
    fresh.append(el("p", { class: "error" }, e.message));
  }
  v.replaceChildren(...fresh.childNodes);
}

async function start() {
  document.getElementById("signout").addEventListener("click", async () => {
    await fetch("/console/logout", { method: "POST", headers: { "X-CSRF-Token": state.csrf }, credentials: "same-origin" });
    state.csrf = "";
    showSignIn();
  });
  const r = await fetch("/console/session", { credentials: "same-origin" });
  if (!r.ok) { showSignIn(); return; }
  state.csrf = (await r.json()).csrf;
  document.getElementById("signin").hidden = true;
  document.getElementById("nav").hidden = false;
  if (location.search) history.replaceState(null, "", "/" + location.hash);
  // Another view opens at its top, not where the list it was picked from had been scrolled to.
  window.addEventListener("hashchange", () => { flash(""); route().then(() => window.scrollTo(0, 0)); });
  route();
}

start();
