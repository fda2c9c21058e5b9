// The plait web page: a session list, a transcript, the lineage picture, a live view.
// Every text from the server goes into the page with textContent, never as markup.
"use strict";

const state = {
  key: sessionStorage.getItem("plait.key") || "",
  follow: null,
  client: sessionStorage.getItem("plait.client") || newClientId(),
  controlled: null,  // the session this page controls, or null
};
sessionStorage.setItem("plait.client", state.client);

// A live client id for this tab: random, kept in sessionStorage (crypto.randomUUID needs a
// secure context; getRandomValues does not).
function newClientId() {
  const bytes = crypto.getRandomValues(new Uint8Array(8));
  return "web-" + Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

function $(id) { return document.getElementById(id); }

function setStatus(text) { $("status").textContent = text; }

function showError(text) {
  const el = $("error");
  el.textContent = text;
  el.hidden = !text;
}

async function api(path, options = {}) {
  const headers = Object.assign({ "Authorization": "Bearer " + state.key }, options.headers || {});
  if (options.body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, Object.assign({}, options, { headers }));
  if (!response.ok) {
    let message = response.status + "";
    try {
      const body = await response.json();
      message = body.error.code + ": " + body.error.message;
    } catch (e) { /* not JSON */ }
    const error = new Error(message);
    error.status = response.status;
    throw error;
  }
  return response.json();
}

function text(tag, value, cls) {
  const el = document.createElement(tag);
  el.textContent = value == null ? "" : String(value);
  if (cls) el.className = cls;
  return el;
}

async function showList() {
  stopFollowing();
  releaseControl();
  $("session-view").hidden = true;
  const data = await api("/sessions?limit=100");
  const body = $("sessions").querySelector("tbody");
  body.replaceChildren();
  for (const s of data.sessions) {
    const row = document.createElement("tr");
    const cell = document.createElement("td");
    const link = text("a", s.title || "(untitled)");
    link.href = "#/s/" + encodeURIComponent(s.id);
    link.className = "session-link";
    cell.append(link);
    row.append(cell, text("td", s.length), text("td", s.updated_at), text("td", s.id, "id"));
    body.append(row);
  }
  $("empty").hidden = data.sessions.length > 0;
  $("list-view").hidden = false;
}

function recordText(record) {
  const p = record.payload || {};
  if (record.kind === "event") return p.name + " " + JSON.stringify(p.data || {});
  let out = p.content || "";
  for (const call of p.tool_calls || []) out += "\n→ " + call.name + " " + JSON.stringify(call.arguments);
  return out;
}

function addRecord(record) {
  const list = $("transcript");
  if (list.querySelector('li[data-seq="' + record.seq + '"]')) return;
  const item = document.createElement("li");
  item.className = record.kind;
  item.dataset.seq = record.seq;
  item.append(text("span", record.kind + " #" + record.seq, "kind"), text("span", recordText(record), "body"));
  list.append(item);
}

async function showLineage(id) {
  const data = await api("/sessions/" + encodeURIComponent(id) + "/lineage");
  const holder = $("lineage");
  holder.replaceChildren();
  if (!data.svg) return;
  const doc = new DOMParser().parseFromString(data.svg, "image/svg+xml");
  const svg = doc.documentElement;
  if (svg.nodeName.toLowerCase() !== "svg") return;
  for (const bad of svg.querySelectorAll("script, foreignObject")) bad.remove();
  holder.append(document.importNode(svg, true));
}

async function showSession(id) {
  stopFollowing();
  if (state.controlled !== id) releaseControl();
  $("list-view").hidden = true;
  const detail = await api("/sessions/" + encodeURIComponent(id));
  $("session-title").textContent = detail.title || "(untitled)";
  $("session-facts").textContent = detail.length + " messages · " + detail.status + " · " + detail.id;
  $("transcript").replaceChildren();
  $("live-text").textContent = "";
  $("live-state").textContent = detail.running ? "running" : "idle";
  $("session-view").hidden = false;
  $("session-view").dataset.id = id;
  let after = -1;
  for (;;) {
    const page = await api("/sessions/" + encodeURIComponent(id) + "/records?after=" + after + "&limit=1000");
    for (const r of page.records) { addRecord(r); after = r.seq; }
    if (page.records.length === 0 || after >= page.end_seq - 1) break;
  }
  await showLineage(id);
  const clients = await api("/sessions/" + encodeURIComponent(id) + "/clients");
  setControlling(id, clients.controller_id === state.client);
  if (state.controlled === id) await loadApprovals(id);
  follow(id, after);
}

// -- control: attach as the live controller, answer tool-call approvals ----------------

function sessionPath(id) { return "/sessions/" + encodeURIComponent(id); }

function setControlling(id, controlling) {
  state.controlled = controlling ? id : null;
  const box = $("control");
  box.dataset.mode = controlling ? "controller" : "observer";
  box.dataset.clientId = state.client;
  $("control-state").textContent = controlling
    ? "controlling as " + state.client
    : "not controlling";
  $("take-control").hidden = controlling;
  $("release-control").hidden = !controlling;
  $("take-over").hidden = true;
  if (!controlling) $("approvals").replaceChildren();
}

async function takeControl(takeover) {
  const id = $("session-view").dataset.id;
  showError("");
  try {
    await api(sessionPath(id) + "/clients", {
      method: "POST",
      body: JSON.stringify({ client_id: state.client, mode: "controller", takeover: takeover }),
    });
  } catch (e) {
    if (e.status === 409) $("take-over").hidden = false;  // another controller holds it
    showError(e.message);
    return;
  }
  setControlling(id, true);
  await loadApprovals(id).catch((e) => showError(e.message));
}

// Let go of control (leaving the session, or the Release button); best effort.
function releaseControl(keepalive) {
  const id = state.controlled;
  if (id === null) return;
  setControlling(id, false);
  fetch(sessionPath(id) + "/clients/" + encodeURIComponent(state.client) + "/release", {
    method: "POST",
    headers: { "Authorization": "Bearer " + state.key, "Content-Type": "application/json" },
    body: JSON.stringify({ reason: "web_page_release" }),
    keepalive: !!keepalive,
  }).catch(() => {});
}

// What waits already (an approval_requested sent before we attached, or while disconnected).
async function loadApprovals(id) {
  const data = await api(sessionPath(id) + "/approvals");
  for (const a of data.approvals) showApproval(id, a);
}

function findApproval(runId, callId) {
  for (const item of $("approvals").children) {
    if (item.dataset.runId === runId && item.dataset.callId === callId) return item;
  }
  return null;
}

function showApproval(id, request) {
  if (state.controlled !== id) return;
  if (findApproval(request.run_id, request.call_id)) return;
  const item = document.createElement("li");
  item.dataset.runId = request.run_id;
  item.dataset.callId = request.call_id;
  const approve = text("button", "Approve", "approve");
  const deny = text("button", "Deny", "deny");
  const buttons = document.createElement("div");
  buttons.className = "answer";
  for (const [button, yes] of [[approve, true], [deny, false]]) {
    button.type = "button";
    button.addEventListener("click", () => answerApproval(id, item, yes));
    buttons.append(button);
  }
  item.append(
    text("span", "tool call wants approval: ", "label"),
    text("span", request.tool, "tool-name"),
    text("pre", JSON.stringify(request.arguments, null, 2), "arguments"),
    buttons,
    text("span", "", "outcome"),
  );
  $("approvals").append(item);
}

async function answerApproval(id, item, approve) {
  for (const b of item.querySelectorAll("button")) b.disabled = true;
  try {
    await api(sessionPath(id) + "/approvals/" + encodeURIComponent(item.dataset.callId), {
      method: "POST", body: JSON.stringify({ client_id: state.client, approve: approve }),
    });
  } catch (e) {
    showError(e.message);
    if (e.status === 404) markResolved(item, null, "no longer waiting");
    else for (const b of item.querySelectorAll("button")) b.disabled = false;
  }
}

function markResolved(item, approve, why) {
  if (approve !== null) item.dataset.outcome = approve ? "approved" : "denied";
  else item.dataset.outcome = "gone";
  const answer = item.querySelector(".answer");
  if (answer) answer.remove();
  item.querySelector(".outcome").textContent = why;
}

function resolveApproval(data) {
  const item = findApproval(data.run_id, data.call_id);
  if (!item) return;
  let why = data.approve ? "approved" : "denied";
  if (data.reason !== "controller") why += " (" + data.reason + ")";
  else if (data.client_id && data.client_id !== state.client) why += " by " + data.client_id;
  markResolved(item, data.approve, why);
}

// Lost control: another client took over, or this one was released elsewhere.
function watchControl(id, record) {
  const p = record.payload || {};
  if (record.kind !== "event" || p.name !== "live_session_client" || state.controlled !== id) return;
  const d = p.data || {};
  const released = d.action === "detach" && d.client_id === state.client;
  if (released || d.demoted_id === state.client) setControlling(id, false);
}

function stopFollowing() {
  if (state.follow) state.follow.abort();
  state.follow = null;
}

function handleEvent(id, name, data) {
  if (name === "record") {
    addRecord(data.record);
    watchControl(id, data.record);
    if (data.record.kind === "assistant") $("live-text").textContent = "";
  } else if (name === "text_delta") {
    $("live-text").textContent += data.text;
  } else if (name === "run_start") {
    $("live-state").textContent = "running";
  } else if (name === "approval_requested") {
    showApproval(id, data);
  } else if (name === "approval_resolved") {
    resolveApproval(data);
  } else if (name === "run_end") {
    $("live-state").textContent = data.ok ? "done" : "failed: " + data.error.error.code;
    showLineage(id).catch(() => {});
  }
}

async function follow(id, after) {
  const control = new AbortController();
  state.follow = control;
  let lastId = String(after);
  while (!control.signal.aborted) {
    try {
      const response = await fetch("/sessions/" + encodeURIComponent(id) + "/events", {
        headers: { "Authorization": "Bearer " + state.key, "Last-Event-ID": lastId },
        signal: control.signal,
      });
      if (!response.ok) throw new Error("events: " + response.status);
      $("live").dataset.connected = "yes";
      if (state.controlled === id) loadApprovals(id).catch(() => {});
      const reader = response.body.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        let cut;
        while ((cut = buffer.indexOf("\n\n")) >= 0) {
          const block = buffer.slice(0, cut);
          buffer = buffer.slice(cut + 2);
          let name = "message", data = "", eventId = null;
          for (const line of block.split("\n")) {
            if (line.startsWith("id: ")) eventId = line.slice(4);
            else if (line.startsWith("event: ")) name = line.slice(7);
            else if (line.startsWith("data: ")) data += line.slice(6);
          }
          if (eventId !== null) lastId = eventId;
          if (data) handleEvent(id, name, JSON.parse(data));
        }
      }
    } catch (e) {
      if (control.signal.aborted) return;
    }
    $("live").dataset.connected = "no";
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}

async function route() {
  showError("");
  if (!state.key) { setStatus("enter an API key"); return; }
  const hash = location.hash || "#/";
  try {
    if (hash.startsWith("#/s/")) await showSession(decodeURIComponent(hash.slice(4)));
    else await showList();
    setStatus("connected");
  } catch (e) {
    showError(e.message);
  }
}

function init() {
  $("api-key").value = state.key;
  $("key-form").addEventListener("submit", (event) => {
    event.preventDefault();
    state.key = $("api-key").value.trim();
    sessionStorage.setItem("plait.key", state.key);
    route();
  });
  $("prompt-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const id = $("session-view").dataset.id;
    const prompt = $("prompt").value;
    const body = { text: prompt };
    if (state.controlled === id) body.client_id = state.client;  // the controller drives
    try {
      await api("/sessions/" + encodeURIComponent(id) + "/runs", {
        method: "POST", body: JSON.stringify(body),
      });
      $("prompt").value = "";
    } catch (e) { showError(e.message); }
  });
  $("take-control").addEventListener("click", () => takeControl(false));
  $("take-over").addEventListener("click", () => takeControl(true));
  $("release-control").addEventListener("click", () => releaseControl());
  window.addEventListener("pagehide", () => releaseControl(true));
  window.addEventListener("hashchange", route);
  route();
}

document.addEventListener("DOMContentLoaded", init);
