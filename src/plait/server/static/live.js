// The plait web page as a session's live controller: attach, take over, release, and
// answer a run's tool-call approvals. Loaded before app.js, whose helpers it calls.
"use strict";

// -- control: attach as the live controller, answer tool-call approvals ----------------

// `other`: the client that controls the session when this page does not (or none).
function setControlling(id, controlling, other) {
  state.controlled = controlling ? id : null;
  const holder = controlling ? "" : other || "";
  const box = $("control");
  box.dataset.mode = controlling ? "controller" : "observer";
  box.dataset.clientId = state.client;
  box.dataset.controller = holder;
  $("control-state").textContent = controlling
    ? "controlling as " + state.client
    : holder ? "controlled by " + holder + ": only it may start or stop runs"
    : "not controlling";
  $("take-control").hidden = controlling || !!holder;
  $("release-control").hidden = !controlling;
  $("take-over").hidden = controlling || !holder;
  if (!controlling) $("approvals").replaceChildren();
}

async function takeControl(takeover) {
  const id = currentId();
  showError("");
  try {
    await post(sessionPath(id) + "/clients",
      { client_id: state.client, mode: "controller", takeover: takeover });
  } catch (e) {
    showError(explain(e));  // another controller holds it: explain offers Take over
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
  const buttons = document.createElement("div");
  buttons.className = "answer";
  buttons.append(
    button("Approve", "approve", () => answerApproval(id, item, true)),
    button("Deny", "deny", () => answerApproval(id, item, false)),
  );
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
    await post(sessionPath(id) + "/approvals/" + encodeURIComponent(item.dataset.callId),
      { client_id: state.client, approve: approve });
  } catch (e) {
    showError(explain(e));
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
  foldApproval(item);
}

// An answered card folds to one line: its tool, the answer and the arguments cut to fit,
// the whole arguments a click away. Only the one waiting stays open (a run of 20 tool
// calls left 20 full cards, a page of thousands of pixels, the one that mattered last).
function foldApproval(item) {
  const args = item.querySelector("pre.arguments");
  if (!args || item.querySelector("details")) return;
  let oneLine = args.textContent;
  try { oneLine = JSON.stringify(JSON.parse(oneLine)); } catch (e) { /* shown as it is */ }
  const line = document.createElement("summary");
  line.append(
    text("span", "tool call", "label"),
    item.querySelector(".tool-name"),
    item.querySelector(".outcome"),
    text("span", oneLine, "args-line"),
  );
  const box = document.createElement("details");
  box.append(line, args);
  item.replaceChildren(box);
}

function resolveApproval(data) {
  const item = findApproval(data.run_id, data.call_id);
  if (!item) return;
  let why = data.approve ? "approved" : "denied";
  if (data.reason !== "controller") why += " (" + data.reason + ")";
  else if (data.client_id && data.client_id !== state.client) why += " by " + data.client_id;
  markResolved(item, data.approve, why);
}

// Who controls the session changed: another client attached, took over (from this page
// too) or let go; this page's own attach has already said so itself.
function watchControl(id, record) {
  const p = record.payload || {};
  if (record.kind !== "event" || p.name !== "live_session_client" || currentId() !== id) return;
  const d = p.data || {};
  if (!("controller_id" in d) || d.controller_id === state.client) return;
  setControlling(id, false, d.controller_id);
}
