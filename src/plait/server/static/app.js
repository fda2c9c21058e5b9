// The plait web page: a session list, a transcript, the lineage picture, a live view.
// Every text from the server goes into the page with textContent, never as markup.
"use strict";

const state = { key: sessionStorage.getItem("plait.key") || "", follow: null };

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
    throw new Error(message);
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
  follow(id, after);
}

function stopFollowing() {
  if (state.follow) state.follow.abort();
  state.follow = null;
}

function handleEvent(id, name, data) {
  if (name === "record") {
    addRecord(data.record);
    if (data.record.kind === "assistant") $("live-text").textContent = "";
  } else if (name === "text_delta") {
    $("live-text").textContent += data.text;
  } else if (name === "run_start") {
    $("live-state").textContent = "running";
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
    try {
      await api("/sessions/" + encodeURIComponent(id) + "/runs", {
        method: "POST", body: JSON.stringify({ text: prompt }),
      });
      $("prompt").value = "";
    } catch (e) { showError(e.message); }
  });
  window.addEventListener("hashchange", route);
  route();
}

document.addEventListener("DOMContentLoaded", init);
