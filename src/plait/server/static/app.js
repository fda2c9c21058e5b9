// The plait web page: sign-in, the session list, a session (actions, context, lineage,
// transcript, live view). Every text from the server goes into the page with textContent,
// never as markup; the lineage SVG is parsed as SVG and stripped of anything active.
// transcript.js (the records drawn) and live.js (the live controller) are loaded first.
"use strict";

const SVG_NS = "http://www.w3.org/2000/svg";
const LIST_LIMIT = 1000;  // sessions listed (and searched), the most recently active first
const state = {
  key: localStorage.getItem("plait.key") || "",
  follow: null,
  client: sessionStorage.getItem("plait.client") || newClientId(),
  controlled: null,  // the session this page controls, or null
  sessions: [],      // the list view's rows, for the search box
  searched: 0,       // counts the searches sent: one answered late draws nothing
  searchTimer: 0,    // the search due once typing pauses (a timer)
  messages: 0,       // messages in view so far in the open transcript (fork here counts them)
  factsTimer: 0,     // the facts line and lineage, due to be read again (a timer)
  opened: 0,         // counts the views opened: one whose answers come late draws nothing
  ended: null,       // the open session's run's `ended` event, until its run_end
};
sessionStorage.setItem("plait.client", state.client);

// A live client id for this tab: random, kept in sessionStorage (crypto.randomUUID needs a
// secure context; getRandomValues does not).
function newClientId() {
  const bytes = crypto.getRandomValues(new Uint8Array(8));
  return "web-" + Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

function $(id) { return document.getElementById(id); }

// The header's word on the server: "connected", or "reconnecting…" (data-state="down")
// while the open session's event stream is lost.
function setStatus(text, down) {
  $("status").textContent = text;
  $("status").dataset.state = down ? "down" : "up";
}

// `offline`: the error is that the server did not answer, and goes once it answers again.
function showError(text, offline) {
  const el = $("error");
  el.textContent = text;
  el.hidden = !text;
  el.dataset.offline = offline ? "yes" : "no";
}

function notice(text) {
  const el = $("notice");
  el.textContent = text;
  el.hidden = !text;
}

async function api(path, options = {}) {
  const response = await request(path, options);
  return response.json();
}

async function request(path, options = {}) {
  if (!state.key) {  // signed out while a view was still loading: ask nothing more
    const error = new Error("signed out");
    error.status = 401;
    throw error;
  }
  const headers = Object.assign({ "Authorization": "Bearer " + state.key }, options.headers || {});
  if (options.body !== undefined) headers["Content-Type"] = "application/json";
  let response;
  try {
    response = await fetch(path, Object.assign({}, options, { headers }));
  } catch (e) {  // no answer at all: say so, not the browser's "Failed to fetch"
    const error = new Error("The server at " + location.host + " does not answer: is " +
      "plait serve still running? (" + e.message + ")");
    error.status = 0;
    throw error;
  }
  if (!response.ok) {
    let message = response.status + "";
    let code = "";
    try {
      const body = await response.json();
      code = body.error.code;
      message = body.error.code + ": " + body.error.message;
    } catch (e) { /* not JSON */ }
    const error = new Error(message);
    error.status = response.status;
    error.code = code;
    if (response.status === 401) signedOut("That key was not accepted: sign in again.");
    throw error;
  }
  return response;
}

function post(path, body) {
  return api(path, { method: "POST", body: JSON.stringify(body === undefined ? {} : body) });
}

function text(tag, value, cls) {
  const el = document.createElement(tag);
  el.textContent = value == null ? "" : String(value);
  if (cls) el.className = cls;
  return el;
}

function button(label, cls, onClick) {
  const el = text("button", label, cls);
  el.type = "button";
  el.addEventListener("click", onClick);
  return el;
}

function sessionPath(id) { return "/sessions/" + encodeURIComponent(id); }

function go(id) { location.hash = "#/s/" + encodeURIComponent(id); }

// How long ago an ISO time was: "just now", "5m ago", "3h ago", "2d ago", else the date.
function age(iso) {
  const then = new Date(iso);
  const seconds = (Date.now() - then.getTime()) / 1000;
  if (seconds < 60) return "just now";
  if (seconds < 3600) return Math.floor(seconds / 60) + "m ago";
  if (seconds < 86400) return Math.floor(seconds / 3600) + "h ago";
  if (seconds < 86400 * 31) return Math.floor(seconds / 86400) + "d ago";
  return then.toISOString().slice(0, 10);
}

// -- signing in -------------------------------------------------------------------------

// A sign-in address (#key=...) brings the key once: kept, then taken out of the address
// bar and the history, so it is neither shown nor sent anywhere.
function takeKeyFromAddress() {
  const found = /^#key=([^&]+)/.exec(location.hash);
  if (!found) return;
  state.key = decodeURIComponent(found[1]);
  localStorage.setItem("plait.key", state.key);
  history.replaceState(null, "", location.pathname + location.search + "#/");
}

function signedOut(why) {
  state.key = "";
  localStorage.removeItem("plait.key");
  stopFollowing();
  for (const id of ["list-view", "session-view"]) $(id).hidden = true;
  $("sign-in").hidden = false;
  $("sign-out").hidden = true;
  $("who").textContent = "";
  setStatus("");
  if (why) showError(why);
}

async function whoAmI() {
  const me = await api("/auth/whoami");
  $("who").textContent = "signed in as " + me.principal;
  $("sign-out").hidden = false;
  $("sign-in").hidden = true;
}

// -- the list ---------------------------------------------------------------------------

async function showList() {
  const mine = ++state.opened;
  stopFollowing();
  releaseControl();
  $("session-view").hidden = true;
  $("session-view").dataset.id = "";  // no session is shown: late answers for one draw nothing
  const data = await api("/sessions?limit=" + LIST_LIMIT);
  if (mine !== state.opened) return;
  state.sessions = data.sessions;
  drawList();
  $("list-view").hidden = false;
  if ($("search").value.trim()) act(searchMessages);  // back from a hit: its search again
}

function matches(s, words) {
  const hay = [s.title, s.first_prompt, s.source, s.id].join(" ").toLowerCase();
  return words.every((w) => hay.includes(w));
}

function drawList() {
  const words = $("search").value.toLowerCase().split(/\s+/).filter(Boolean);
  const body = $("sessions").querySelector("tbody");
  body.replaceChildren();
  let shown = 0;
  for (const s of state.sessions) {
    if (!matches(s, words)) continue;
    shown += 1;
    const row = document.createElement("tr");
    const count = text("td", s.length.toLocaleString(), "num");
    count.append(text("span", s.length === 1 ? " message" : " messages", "unit"));  // a phone's
    const cell = document.createElement("td");
    const link = text("a", s.title || s.first_prompt || "(empty)");
    if (!s.title) link.classList.add("untitled");
    link.href = "#/s/" + encodeURIComponent(s.id);
    link.classList.add("session-link");
    link.title = s.id;
    cell.append(link);
    if (s.running) cell.append(text("span", "running", "badge"));
    row.append(
      cell,
      text("td", s.source || "", "source"),
      count,
      text("td", age(s.updated_at), "age"),
      // A cut id is marked; any id plait did not make is shown whole by the server.
      text("td", s.short_id && s.short_id !== s.id ? s.short_id + "…" : s.id, "id"),
    );
    body.append(row);
  }
  $("empty").hidden = state.sessions.length > 0;
  $("no-match").hidden = shown > 0 || state.sessions.length === 0;
  $("capped").hidden = state.sessions.length < LIST_LIMIT;
}

// The search box asks the server for every session's messages (GET /sessions?q=) once
// typing pauses; the listed sessions are still narrowed by title, prompt, source and id.
function searchTyped() {
  drawList();
  clearTimeout(state.searchTimer);
  state.searchTimer = setTimeout(() => act(searchMessages), 250);
}

async function searchMessages() {
  const q = $("search").value.trim();
  const mine = ++state.searched;
  if (!q) {
    $("hits").replaceChildren();
    $("hits-view").hidden = true;
    return;
  }
  $("hits-state").textContent = "searching…";
  $("hits-view").hidden = false;
  let data;
  try {
    data = await api("/sessions?limit=50&q=" + encodeURIComponent(q));
  } catch (e) {
    if (mine !== state.searched) return;
    $("hits").replaceChildren();
    $("hits-state").textContent = e.status === 422 ? "The search cannot read that query: " +
      e.message : "The search failed.";
    if (e.status !== 422) throw e;
    return;
  }
  if (mine !== state.searched) return;
  drawHits(data.hits || [], data.sessions || []);
}

// A snippet marks each matched term between « and »: drawn as <mark> around text nodes.
function snippet(value) {
  const p = document.createElement("p");
  p.className = "snippet";
  let rest = value;
  while (rest) {
    const open = rest.indexOf("\u00ab");
    const close = open < 0 ? -1 : rest.indexOf("\u00bb", open + 1);
    if (open < 0 || close < 0) { p.append(document.createTextNode(rest)); break; }
    p.append(document.createTextNode(rest.slice(0, open)));
    p.append(text("mark", rest.slice(open + 1, close)));
    rest = rest.slice(close + 1);
  }
  return p;
}

function drawHits(hits, sessions) {
  const byId = new Map(sessions.map((s) => [s.id, s]));
  const list = $("hits");
  list.replaceChildren();
  for (const h of hits) {
    const s = byId.get(h.session_id);
    const item = document.createElement("li");
    const link = text("a", h.title || (s && s.first_prompt) || "(empty)", "hit-link");
    if (!h.title) link.classList.add("untitled");
    link.href = "#/s/" + encodeURIComponent(h.session_id);
    link.title = h.session_id;
    item.dataset.session = h.session_id;
    item.append(link, text("span", h.role + ", message " + h.message + ", " + age(h.created_at),
      "hit-where"), snippet(h.snippet));
    list.append(item);
  }
  $("hits-state").textContent = hits.length ? "" : "No message matches.";
}

async function newSession() {
  const made = await post("/sessions", {});
  go(made.id);
}

// -- one session ------------------------------------------------------------------------
async function showLineage(id) {
  const data = await api(sessionPath(id) + "/lineage");
  if (currentId() !== id) return;  // the page moved on meanwhile
  const holder = $("lineage");
  holder.replaceChildren();
  if (!data.svg) return;
  let svg = new DOMParser().parseFromString(data.svg, "image/svg+xml").documentElement;
  if (svg.namespaceURI !== SVG_NS) {  // an SVG without its namespace: let HTML place it
    svg = new DOMParser().parseFromString(data.svg, "text/html").querySelector("svg");
  }
  if (!svg || svg.namespaceURI !== SVG_NS) return;
  for (const bad of svg.querySelectorAll("script, foreignObject, a")) bad.remove();
  for (const el of svg.querySelectorAll("*")) {
    for (const attr of Array.from(el.attributes)) {
      if (attr.name.startsWith("on") || attr.name.includes("href")) el.removeAttribute(attr.name);
    }
  }
  const drawn = document.importNode(svg, true);
  // Each box opens its session (its id is the box's second line).
  for (const box of drawn.querySelectorAll("g")) {
    const sid = box.querySelector("text.sid");
    if (!sid || box.classList.contains("deleted")) continue;
    box.classList.add("link");
    box.addEventListener("click", () => go(sid.textContent));
  }
  // Scaled down to fit, but never below 80% of its size: past that its labels cannot be
  // read, and the box scrolls sideways instead (a phone, a wide lineage).
  const width = parseFloat(drawn.getAttribute("width"));
  if (width > 0) drawn.style.minWidth = Math.round(0.8 * width) + "px";
  holder.append(drawn);
  const mark = drawn.querySelector("g.mark rect");  // this session's box, in sight
  if (mark && holder.scrollWidth > holder.clientWidth) {
    const left = mark.getBoundingClientRect().left - holder.getBoundingClientRect().left;
    holder.scrollLeft = Math.max(0, left - 16);
  }
}

async function showContext(id) {
  const data = await api(sessionPath(id) + "/context");
  if (currentId() !== id) return;  // the page moved on meanwhile
  const bar = $("context-bar");
  const legend = $("context-legend");
  bar.replaceChildren();
  legend.replaceChildren();
  const r = data.report;
  $("context").dataset.empty = r ? "no" : "yes";
  if (!r) {
    $("context-total").textContent = "No reply yet: nothing to measure.";
    return;
  }
  // Drawn against the window: the filled part is used / window of the bar, split among
  // the shares by their tokens; the rest is the window still free. (Shares that filled the
  // whole bar however little was used left how full it is to a thin line beside it.)
  const filled = 100 * Math.min(Math.max(r.used / r.window, 0), 1) || 0;
  const whole = r.shares.reduce((sum, s) => sum + s.tokens, 0) || 1;
  r.shares.forEach((share) => {
    const colour = "share share-" + (SHARE_COLOURS[share.name] || "6");
    const part = text("span", "", colour);
    part.style.width = (filled * share.tokens / whole) + "%";  // CSSOM: allowed by the CSP
    part.title = share.name + ": " + share.tokens.toLocaleString() + " tokens";
    bar.append(part);
    const item = text("li", "");
    item.append(
      text("span", "", colour.replace("share ", "swatch ")),
      text("span", share.name + " " + share.tokens.toLocaleString(), "share-label"),
    );
    legend.append(item);
  });
  const free = text("span", "", "free");
  free.title = "free: " + r.free.toLocaleString() + " of " + r.window.toLocaleString() + " tokens";
  bar.append(free);
  bar.dataset.over = r.used > r.window ? "yes" : "no";
  const source = r.from_provider ? "the provider's count" : r.measured_by;
  $("context-total").textContent = r.used.toLocaleString() + " / " + r.window.toLocaleString() +
    " tokens (" + Math.round(100 * r.fraction) + "%), " + r.free.toLocaleString() + " free · " +
    source + (r.partial ? " · partial" : "") + (r.window_source === "guess"
      ? " · window: a guess, plait does not know this model's window"
      : " · window from " + (WINDOW_SOURCES[r.window_source] || r.window_source));
  bar.setAttribute("aria-label", "context by source: " + Math.round(100 * r.fraction) +
    "% of the window used");
}

// One colour per source, whichever sources a session has (by place in the list, the same
// colour meant user messages in one session and assistant messages in the next).
const SHARE_COLOURS = {
  "System prompt": "0", "User messages": "1", "Assistant messages": "2", "Tool output": "3",
  "Provider items": "4", "Environment notes": "5", "Tool schemas": "6",
  "Compaction summary": "7", "Unattributed": "rest",
};

const WINDOW_SOURCES = {
  table: "the model family's table",
  server: "the model's server",
  environment: "PLAIT_CONTEXT_WINDOW",
  settings: "the session's model_info setting",
};

async function showSession(id) {
  const mine = ++state.opened;  // a later view (another session, the list) wins over this one
  stopFollowing();
  if (state.controlled !== id) releaseControl();
  $("list-view").hidden = true;
  $("compact-preview").hidden = true;
  notice("");
  // The address may hold a prefix a person typed: asked for here, and only here.
  const detail = await api(sessionPath(id) + "?prefix=true");
  if (mine !== state.opened) return;
  id = detail.id;  // a prefix or "latest" in the address names this session
  showFacts(detail);
  // Nothing of the session shown before stays while this one loads (a long one takes a while).
  for (const part of ["transcript", "lineage", "context-bar", "context-legend"]) {
    $(part).replaceChildren();
  }
  $("context-total").textContent = "";
  $("live").dataset.connected = "no";
  if (state.controlled !== id) setControlling(id, false);
  state.messages = 0;
  state.ended = null;
  clearTimeout(state.factsTimer);  // one due for the session before is not this one's
  state.factsTimer = 0;
  $("live-text").textContent = "";
  setRunning(detail.running);
  $("session-view").hidden = false;
  $("session-view").dataset.id = id;
  let after = -1, head = null;
  for (;;) {
    const page = await api(sessionPath(id) + "/records?after=" + after + "&limit=1000");
    if (currentId() !== id) return;  // another session was opened meanwhile
    if (head !== null && page.head !== head) {  // rewound between two pages: start again
      $("transcript").replaceChildren();
      state.messages = 0;
      after = -1;
      head = null;
      continue;
    }
    head = page.head;
    for (const r of page.records) { addRecord(r); after = r.seq; }
    if (page.records.length === 0 || after >= page.end_seq - 1) break;
  }
  await showLineage(id);
  await showContext(id).catch((e) => showError(e.message));
  const clients = await api(sessionPath(id) + "/clients");
  if (currentId() !== id) return;
  setControlling(id, clients.controller_id === state.client, clients.controller_id);
  if (state.controlled === id) await loadApprovals(id);
  follow(id, after + "~" + head);
}

// The facts line read again; drawn only if the page still shows that session (an answer
// that comes after the page moved on to another would put its title on the other).
function refreshFacts(id) {
  api(sessionPath(id)).then((detail) => {
    if (currentId() === id) showFacts(detail);
  }).catch(() => {});
}

function showFacts(detail) {
  $("session-title").textContent = detail.title || detail.first_prompt || "(empty)";
  // No title: its first prompt stands in, set as the list sets it (italic), and smaller.
  $("session-title").classList.toggle("untitled", !detail.title);
  $("session-facts").textContent = [
    detail.length.toLocaleString() + (detail.length === 1 ? " message" : " messages"),
    detail.source || "plait",
    detail.status,
    (detail.lineage_operator || "root").replace("Session.", ""), "active " + age(detail.updated_at),
    detail.id,
  ].join(" · ");
}

function currentId() { return $("session-view").dataset.id; }

function setRunning(running) {
  $("live-state").textContent = running ? "running" : "idle";
  $("stop").disabled = !running;
}

// -- the buttons ------------------------------------------------------------------------

async function act(work) {
  showError("");
  notice("");  // the last action's word is stale once another starts
  try { await work(); } catch (e) { showError(explain(e), e.status === 0); }
}

// An error as a person reads it on this page: the server's words, or for the live
// controller's refusals what to do here (the server's own say what to call in the API).
function explain(e) {
  const holder = /the controller is '([^']+)'|already has controller '([^']+)'/.exec(e.message);
  const who = holder ? " (" + (holder[1] || holder[2]) + ")" : "";
  if (e.code === "controller_conflict" || e.code === "not_controller") {
    $("take-over").hidden = state.controlled === currentId();
    return "Another client" + who + " controls this session: only it can run and answer " +
      "tool calls. Take over to do so from this page.";
  }
  if (e.code === "session_busy") return "A run is already in progress: Stop it, or wait for it to end.";
  return e.message;
}

function fork() {
  return act(async () => go((await post(sessionPath(currentId()) + "/fork", {})).id));
}

function forkAt(keepFirst) {
  return act(async () => {
    const made = await post(sessionPath(currentId()) + "/fork_at", { keep_first: keepFirst });
    go(made.id);
  });
}

function previewCompact() {
  return act(async () => {
    let plan;
    try {
      plan = await post(sessionPath(currentId()) + "/compact", { dry_run: true });
    } catch (e) {
      if (e.code !== "nothing_to_do") throw e;
      notice("Nothing worth folding yet.");
      return;
    }
    const [from, to] = plan.folds;
    $("compact-plan").textContent = "Fold " + plan.compressed + " messages (from position " +
      from + " to " + (to - 1) + ") into a summary, and keep the last " + plan.kept +
      " as they are? Nothing is deleted: Uncompact shows them again.";
    $("compact-preview").hidden = false;
  });
}

// What the controller's runs see changes: a page that controls the session says so.
function asController() {
  return state.controlled === currentId() ? { client_id: state.client } : {};
}

function compact() {
  return act(async () => {
    const done = await post(sessionPath(currentId()) + "/compact", asController());
    $("compact-preview").hidden = true;
    await showSession(currentId());
    notice("Folded " + done.compressed + " messages into a summary; kept " + done.kept + ".");
  });
}

function uncompact() {
  return act(async () => {
    try {
      await post(sessionPath(currentId()) + "/uncompact", asController());
    } catch (e) {
      if (e.code !== "nothing_to_do") throw e;
      notice("Nothing to undo: no compaction in view.");
      return;
    }
    await showSession(currentId());
    notice("The newest compaction is undone.");
  });
}

function exportPage() {
  return act(async () => {
    const response = await request(sessionPath(currentId()) + "/export");
    const found = /filename="([^"]+)"/.exec(response.headers.get("Content-Disposition") || "");
    const url = URL.createObjectURL(await response.blob());
    const link = document.createElement("a");
    link.href = url;
    link.download = found ? found[1] : "plait-" + currentId() + ".html";
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10_000);
    notice("Downloaded " + link.download + ".");
  });
}

function stopRun() {
  return act(async () => {
    const id = currentId();
    // With a live controller attached only it may stop the run: this page, when it is.
    const as = state.controlled === id ? "?client_id=" + encodeURIComponent(state.client) : "";
    await api(sessionPath(id) + "/runs/current" + as, { method: "DELETE" });
  });
}

// -- following a session live -----------------------------------------------------------

function stopFollowing() {
  if (state.follow) state.follow.abort();
  state.follow = null;
}

// The session's head moved (a rewind, its undo): records from `keep` on are replaced by
// the record events that follow.
function headMoved(id, keep) {
  for (const item of Array.from($("transcript").children)) {
    if (Number(item.dataset.seq) >= keep) item.remove();
  }
  state.messages = $("transcript").querySelectorAll("li[data-n]").length;
  markView();
  showLineage(id).catch(() => {});
  showContext(id).catch(() => {});
  refreshFacts(id);
}

// Back after the stream was lost (the server restarted, the network dropped): a run that
// was going may have ended unseen, and the facts, context and lineage may have moved.
function caughtUp(id, running) {
  const was = $("live-state").textContent === "running";
  setRunning(running);
  if (was && !running) {
    $("live-state").textContent = "ended while this page was not connected";
    $("live-text").textContent = "";
  }
  showLineage(id).catch(() => {});
  showContext(id).catch(() => {});
  refreshFacts(id);
}

// The facts line (the count of messages, when last active) and the lineage (each box's
// count of messages) follow the records during a run, not only at its end: read again at
// most every 300 ms however many records arrive, and once after the last. (Put off until
// records paused, they were never read while a busy run kept writing.)
function countsSoon(id) {
  if (state.factsTimer) return;  // already due: it reads what arrives meanwhile too
  state.factsTimer = setTimeout(() => {
    state.factsTimer = 0;
    refreshFacts(id);
    showLineage(id).catch(() => {});
  }, 300);
}

function handleEvent(id, name, data) {
  if (name === "head") {
    headMoved(id, data.keep);
  } else if (name === "record") {
    addRecord(data.record);
    countsSoon(id);  // the counts of messages follow, during a run too
    watchControl(id, data.record);
    if (data.record.kind === "assistant") $("live-text").textContent = "";
  } else if (name === "text_delta") {
    $("live-text").textContent += data.text;
  } else if (name === "run_start") {
    state.ended = null;
    setRunning(true);
  } else if (name === "run_takeover") {
    // The server that ran it stopped or died: another one goes on with it, asking the
    // model again; what the old one streamed is its record now (stopped) or gone (killed).
    setRunning(true);
    $("live-text").textContent = "";
    $("live-state").textContent = "running (server " + data.to_replica + " took it over from "
      + data.from_replica + ")";
  } else if (name === "approval_requested") {
    showApproval(id, data);
  } else if (name === "approval_resolved") {
    resolveApproval(data);
  } else if (name === "ended") {
    state.ended = data;  // how the run ended, in the run's own words; run_end follows
  } else if (name === "run_end") {
    setRunning(false);
    $("live-state").textContent = runOutcome(data, state.ended);
    state.ended = null;
    showLineage(id).catch(() => {});
    showContext(id).catch(() => {});
    refreshFacts(id);
  }
}

// How a run ended, in words: the run's own (its `ended` event: done, a limit, the tool
// calls denied, stopped, a timeout, a failure), else what run_end alone tells.
function runOutcome(data, ended) {
  if (ended && typeof ended.words === "string" && ended.words) return ended.words;
  if (data.ok && data.finish_reason === "max_steps") {
    return "ended at the step limit (" + data.steps + " steps) before the model finished";
  }
  if (data.ok && data.finish_reason === "length") return "stopped: the reply hit the output limit";
  if (data.ok && data.finish_reason === "content_filter") {
    return "stopped: the provider's content filter cut the reply off";
  }
  if (data.ok) return "done";
  const error = (data.error || {}).error || {};
  if (error.code === "run_interrupted") return "stopped";
  return "failed: " + (error.message || error.code || "unknown error");
}

// `mark` is the last event id seen: "<seq>~<head>", the head the seq counts on.
async function follow(id, mark) {
  $("live").dataset.connected = "no";
  const control = new AbortController();
  state.follow = control;
  let lastId = mark;
  let lost = false;  // the stream was lost: what it missed is read again on reconnecting
  while (!control.signal.aborted && state.key) {
    try {
      // Named by the tab's client id: once the page is gone (closed, killed, off the
      // network) and does not come back, the server lets go of its control.
      const present = "?client_id=" + encodeURIComponent(state.client);
      const response = await fetch(sessionPath(id) + "/events" + present, {
        headers: { "Authorization": "Bearer " + state.key, "Last-Event-ID": lastId },
        signal: control.signal,
      });
      if (!response.ok) throw new Error("events: " + response.status);
      // What happened while not connected: a run may have started (or ended) meanwhile.
      const run = await api(sessionPath(id) + "/runs/current");
      if (lost) caughtUp(id, run.running);
      else if (run.running) setRunning(true);
      lost = false;
      $("live").dataset.sessionId = id;
      $("live").dataset.connected = "yes";
      setStatus("connected");
      if ($("error").dataset.offline === "yes") showError("");
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
    if (control.signal.aborted) return;
    lost = true;
    $("live").dataset.connected = "no";
    setStatus("reconnecting…", true);
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}

// -- routing ----------------------------------------------------------------------------

async function route() {
  showError("");
  takeKeyFromAddress();
  if (!state.key) { signedOut(); return; }
  const hash = location.hash || "#/";
  try {
    await whoAmI();
    if (hash.startsWith("#/s/")) await showSession(decodeURIComponent(hash.slice(4)));
    else await showList();
    setStatus("connected");
  } catch (e) {
    if (e.status !== 401) showError(e.message);
  }
}

function init() {
  $("key-form").addEventListener("submit", (event) => {
    event.preventDefault();
    state.key = $("api-key").value.trim();
    $("api-key").value = "";
    localStorage.setItem("plait.key", state.key);
    route();
  });
  $("sign-out").addEventListener("click", () => { releaseControl(true); signedOut(); });
  $("search").addEventListener("input", searchTyped);
  $("new-session").addEventListener("click", () => act(newSession));
  $("fork").addEventListener("click", fork);
  $("compact").addEventListener("click", previewCompact);
  $("compact-confirm").addEventListener("click", compact);
  $("compact-cancel").addEventListener("click", () => { $("compact-preview").hidden = true; });
  $("uncompact").addEventListener("click", uncompact);
  $("export").addEventListener("click", exportPage);
  $("stop").addEventListener("click", stopRun);
  $("prompt-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const id = currentId();
    const body = { text: $("prompt").value };
    if (state.controlled === id) body.client_id = state.client;  // the controller drives
    await act(async () => {
      await post(sessionPath(id) + "/runs", body);
      $("prompt").value = "";
    });
  });
  $("take-control").addEventListener("click", () => takeControl(false));
  $("take-over").addEventListener("click", () => takeControl(true));
  $("release-control").addEventListener("click", () => releaseControl());
  window.addEventListener("pagehide", () => releaseControl(true));
  window.addEventListener("hashchange", route);
  route();
}

document.addEventListener("DOMContentLoaded", init);
