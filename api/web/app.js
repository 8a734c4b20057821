// Seam's status and chat page. Plain JavaScript, no dependencies: it talks to
// the same OpenAI-style API every client uses, and polls /status.
"use strict";

const $ = (id) => document.getElementById(id);
const history = [];
let model = "";
let busy = false;

function fmtBytes(n) {
  if (!isFinite(n) || n <= 0) return "0 B";
  const units = ["B", "KB", "MB", "GB", "TB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i === 0 ? n.toFixed(0) : n.toFixed(1)) + " " + units[i];
}

function cell(tr, text, cls) {
  const td = document.createElement("td");
  td.textContent = text;
  if (cls) td.className = cls;
  tr.appendChild(td);
  return td;
}

function renderStages(stages) {
  const body = $("stages").tBodies[0];
  body.replaceChildren();
  for (const s of stages) {
    const tr = document.createElement("tr");
    tr.dataset.stage = s.stage;
    cell(tr, s.stage);
    cell(tr, s.addr);
    cell(tr, s.name);
    cell(tr, `[${s.first_layer}, ${s.last_layer})`);
    const st = cell(tr, "", "state");
    const badge = document.createElement("span");
    badge.className = s.up ? "up" : "down";
    badge.textContent = s.up ? "up" : "down";
    if (s.error) badge.title = s.error;
    st.appendChild(badge);
    cell(tr, s.compute_ms_per_token ? s.compute_ms_per_token.toFixed(2) : "–");
    cell(tr, s.rtt_ms ? s.rtt_ms.toFixed(2) : "–");
    cell(tr, s.sessions);
    cell(tr, fmtBytes(s.kv_bytes));
    body.appendChild(tr);
  }
}

function renderWire(boundaries) {
  const body = $("wire").tBodies[0];
  body.replaceChildren();
  for (const b of boundaries) {
    const tr = document.createElement("tr");
    cell(tr, `${b.from} → ${b.to}`);
    cell(tr, b.encoding);
    cell(tr, b.bytes_per_token ? b.bytes_per_token.toFixed(0) : "–");
    cell(tr, fmtBytes(b.bytes_per_second) + "/s");
    cell(tr, fmtBytes(b.bytes));
    body.appendChild(tr);
  }
}

let last = null;
async function poll() {
  try {
    const r = await fetch("status", { cache: "no-store" });
    const s = await r.json();
    model = s.model;
    $("model").textContent = [s.model, s.info || `context ${s.context_length}`].filter(Boolean).join(" · ");
    const h = $("health");
    h.textContent = s.ready ? "ready" : "unavailable";
    h.className = "badge " + (s.ready ? "ok" : "bad");
    $("active").textContent = s.active_requests;
    $("queued").textContent = s.queued_requests;
    const now = performance.now();
    if (last) {
      const dt = (now - last.t) / 1000;
      const rate = dt > 0 ? (s.tokens_sampled_total - last.n) / dt : 0;
      $("toks").textContent = Math.max(rate, 0).toFixed(1);
    }
    last = { t: now, n: s.tokens_sampled_total };
    renderStages(s.stages);
    renderWire(s.boundaries);
    const down = $("down");
    down.hidden = !s.error;
    down.textContent = s.error || "";
  } catch (e) {
    $("health").textContent = "no answer";
    $("health").className = "badge bad";
  }
}

function addMessage(role, text) {
  const div = document.createElement("div");
  div.className = "msg " + role;
  div.textContent = text;
  $("messages").appendChild(div);
  $("messages").scrollTop = $("messages").scrollHeight;
  return div;
}

// send streams one reply: server-sent events, "data: {json}" per event,
// "data: [DONE]" at the end, or an event {"error": ...} if it failed.
async function send(text) {
  busy = true;
  $("send").disabled = true;
  history.push({ role: "user", content: text });
  addMessage("user", text);
  const out = addMessage("assistant", "");
  let reply = "", first = 0, tokens = 0, done = false;
  try {
    const r = await fetch("v1/chat/completions", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({
        model, messages: history, stream: true, stream_options: { include_usage: true },
        max_tokens: Number($("max").value) || 128, temperature: Number($("temp").value),
      }),
    });
    if (!r.ok) {
      const e = await r.json().catch(() => ({}));
      throw new Error((e.error && e.error.message) || `HTTP ${r.status}`);
    }
    const reader = r.body.getReader();
    const dec = new TextDecoder();
    let buf = "";
    for (;;) {
      const { value, done: eof } = await reader.read();
      if (eof) break;
      buf += dec.decode(value, { stream: true });
      let i;
      while ((i = buf.indexOf("\n\n")) >= 0) {
        const ev = buf.slice(0, i);
        buf = buf.slice(i + 2);
        if (!ev.startsWith("data: ")) continue;
        const data = ev.slice(6);
        if (data === "[DONE]") { done = true; continue; }
        const j = JSON.parse(data);
        if (j.error) throw new Error(j.error.message);
        if (j.usage) tokens = j.usage.completion_tokens;
        const c = j.choices && j.choices[0];
        if (c && c.delta && c.delta.content) {
          if (!first) first = performance.now();
          reply += c.delta.content;
          out.textContent = reply;
          $("messages").scrollTop = $("messages").scrollHeight;
        }
      }
    }
    if (!done) throw new Error("the stream ended before [DONE]: the reply is incomplete");
    history.push({ role: "assistant", content: reply });
    const secs = first ? (performance.now() - first) / 1000 : 0;
    $("rate").textContent = tokens > 1 && secs > 0 ? `${tokens} tokens, ${((tokens - 1) / secs).toFixed(1)} tok/s` : `${tokens} tokens`;
    out.dataset.done = "1";
  } catch (e) {
    addMessage("error", String(e.message || e));
    out.dataset.done = "error";
    history.pop();
  } finally {
    busy = false;
    $("send").disabled = false;
  }
}

$("form").addEventListener("submit", (e) => {
  e.preventDefault();
  const text = $("prompt").value.trim();
  if (!text || busy) return;
  $("prompt").value = "";
  send(text);
});
$("prompt").addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); $("form").requestSubmit(); }
});
$("clear").addEventListener("click", () => { history.length = 0; $("messages").replaceChildren(); $("rate").textContent = ""; });

poll();
setInterval(poll, 1000);
