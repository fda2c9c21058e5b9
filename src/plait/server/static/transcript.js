// The plait web page's transcript: each record drawn as an item (text as text, never as
// markup), long tool output folded, cut-off replies and what a compaction folded said.
// Loaded before app.js, whose helpers ($, text, button, state, forkAt) it calls.
"use strict";

const FOLD_CHARS = 600;   // longer tool arguments and outputs are folded ...
const FOLD_LINES = 12;    // ... and so are those with more lines
const WHOLE = new Set(["user", "assistant"]);  // never folded: the conversation itself
// A reply's finish_reason worth saying in its heading: a cut-off one is not sent again.
const FINISHES = {
  interrupted: "cut off (stopped or interrupted): not sent to the model again",
  error: "cut off by an error: not sent to the model again",
  length: "stopped at the token limit",
};

// A long text as a folded block: its first line and its size, the whole on a click.
function folded(value, cls) {
  const lines = value.split("\n");
  if (value.length <= FOLD_CHARS && lines.length <= FOLD_LINES) return text("div", value, cls);
  const box = document.createElement("details");
  box.className = (cls || "") + " folded";
  const first = lines[0].length > 120 ? lines[0].slice(0, 120) + "…" : lines[0];
  box.append(
    text("summary", first + "  (" + lines.length.toLocaleString() + " lines, " +
      value.length.toLocaleString() + " characters)"),
    text("pre", value),
  );
  return box;
}

function recordBody(record) {
  const p = record.payload || {};
  const out = document.createElement("div");
  out.className = "body";
  if (record.kind === "event") {
    const raw = p.name + " " + JSON.stringify(p.data || {});
    const said = eventWords(p.name, p.data || {});
    out.append(text("span", said || raw));
    if (said) out.title = raw;  // the event as stored, on hover
    return out;
  }
  if (record.kind === "opaque") {  // a provider item plait keeps verbatim: no text of its own
    const item = p.item || {};
    const kind = typeof item.type === "string" ? " " + item.type : "";
    out.append(text("span", (p.format || "?") + kind, "opaque-name"));
    out.append(folded(JSON.stringify(item, null, 2), "item"));
    return out;
  }
  if (p.content) {
    // What the user and the model said is shown whole; long tool output, arguments, system
    // prompts and summaries are folded to a line.
    const cls = record.kind === "tool" ? "output" : "content";
    out.append(WHOLE.has(record.kind) ? text("div", p.content, cls) : folded(p.content, cls));
  }
  for (const call of p.tool_calls || []) {
    const line = document.createElement("div");
    line.className = "call";
    line.append(text("span", "→ " + call.name, "call-name"));
    line.append(folded(JSON.stringify(call.arguments, null, 2), "arguments"));
    out.append(line);
  }
  return out;
}

// The transcript events people meet most, in words (others are shown as stored).
function eventWords(name, d) {
  if (name === "live_session_client") {
    const who = d.client_id || "a client";
    if (d.action === "attach") return who + " attached as " + d.mode;
    if (d.action === "takeover") return who + " took control" + (d.demoted_id ? " from " + d.demoted_id : "");
    if (d.action === "detach") {
      return who + " detached" + (d.released_control ? ", giving up control" : "") +
        (d.reason ? " (" + d.reason + ")" : "");
    }
    return "";
  }
  if (name === "live_session_permission_route") {
    const tool = (d.request || {}).tool || d.request_id || "";
    return "tool call " + tool + " waits for " + (d.client_id || "the controller") + "'s approval";
  }
  if (name === "live_session_permission_decision") {
    const verdict = d.approve ? "approved" : "denied";
    const by = d.reason === "controller" ? " by " + (d.client_id || "the controller") : " (" + d.reason + ")";
    return "tool call " + (d.tool || d.call_id || "") + " " + verdict + by;
  }
  if (name === "compaction_undone") {
    const summary = $("transcript").querySelector('li[data-seq="' + d.summary_seq + '"]');
    const n = summary && summary.dataset.n !== undefined ? " #" + summary.dataset.n : "";
    return "Uncompact undid summary" + n + ": what it folded is back in the model's view";
  }
  return "";
}

function addRecord(record) {
  const list = $("transcript");
  // Records come in order: only one at or before the newest shown can be a repeat (a
  // replay after reconnecting), so only then is the list searched (a search per record
  // made a long transcript take seconds to draw).
  const newest = list.lastElementChild;
  if (newest && Number(newest.dataset.seq) >= record.seq &&
      list.querySelector('li[data-seq="' + record.seq + '"]')) return;
  const item = document.createElement("li");
  item.className = record.kind;
  item.dataset.seq = record.seq;
  const head = document.createElement("div");
  head.className = "head";
  if (record.kind === "event") {
    head.append(text("span", "event", "kind"));
  } else {
    const n = state.messages;
    state.messages += 1;
    item.dataset.n = n;
    const label = "#" + n + " " + (record.kind === "opaque" ? "provider item" : record.kind);
    head.append(text("span", label, "kind"));
    if (record.kind === "tool") {  // a tool's name as it is spelled, not upper-cased
      head.append(text("span", record.payload.tool_name || "", "tool-label"));
      if (record.payload.ok === false) head.append(text("span", "failed", "failed"));
    }
    const finish = FINISHES[(record.meta || {}).finish_reason];
    if (record.kind === "assistant" && finish) {
      item.dataset.finish = record.meta.finish_reason;
      head.append(text("span", finish, "finish"));
    }
    head.append(button("Fork here", "fork-here", () => forkAt(n + 1)));
  }
  const p = record.payload || {};
  if (record.kind === "summary" && Array.isArray(p.folds)) item.dataset.foldsTo = p.folds[1];
  if (record.kind === "event" && p.name === "compaction_undone") {
    item.dataset.undoes = (p.data || {}).summary_seq;
  }
  item.append(head, recordBody(record));
  list.append(item);
  if (item.dataset.foldsTo !== undefined || item.dataset.undoes !== undefined) markView();
}

// Which messages the model no longer sees: those the newest summary that no uncompact
// undid folds (as the server's history view decides), and every other summary. They stay
// listed (compaction is a view: nothing is deleted), dimmed, each saying why.
function markView() {
  const items = Array.from($("transcript").children);
  const undone = new Set(items.map((li) => li.dataset.undoes).filter((v) => v !== undefined));
  let newest = null;
  for (const li of items) {
    if (li.dataset.foldsTo !== undefined && !undone.has(li.dataset.seq)) newest = li;
  }
  for (const li of items) {
    let why = "";
    if (li.dataset.foldsTo !== undefined) {
      if (undone.has(li.dataset.seq)) why = "undone by Uncompact: out of the model's view";
      else if (li !== newest) why = "an older summary: out of the model's view";
    } else if (newest && li.dataset.n !== undefined && !li.classList.contains("system") &&
               Number(li.dataset.seq) < Number(newest.dataset.foldsTo)) {
      why = "folded into summary #" + newest.dataset.n;
    }
    let label = li.querySelector(".head .out");
    if (!why) {
      delete li.dataset.out;
      if (label) label.remove();
      continue;
    }
    li.dataset.out = "yes";
    if (!label) {
      label = text("span", "", "out");
      li.querySelector(".head").insertBefore(label, li.querySelector(".head .fork-here"));
    }
    label.textContent = why;
  }
}
