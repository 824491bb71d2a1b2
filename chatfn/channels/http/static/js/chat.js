// chatfn web chat: the page's code (index.html loads it after the vendored marked and
// DOMPurify). A file, not an inline script, so the page's Content-Security-Policy can say
// `script-src 'self'`: no script but this origin's files runs, whatever a reply contains.
"use strict";
const $ = (id) => document.getElementById(id);
const log = $("log");

// -- labels: the catalogue's "web.*" keys, rendered in by the server ------------------------
// (into <script type="application/json" id="labels">: data, which the policy lets be)
const LABELS = JSON.parse($("labels").textContent);
function t(key, vars) {
  const text = LABELS[key] ?? key;
  return text.replace(/\{(\w+)\}/g, (m, name) => (vars && name in vars ? vars[name] : m));
}
for (const el of document.querySelectorAll("[data-t]")) el.textContent = t(el.dataset.t);
for (const el of document.querySelectorAll("[data-t-placeholder]")) el.placeholder = t(el.dataset.tPlaceholder);
for (const el of document.querySelectorAll("[data-t-title]")) el.title = t(el.dataset.tTitle);
for (const el of document.querySelectorAll("[data-t-label]")) el.setAttribute("aria-label", t(el.dataset.tLabel));
const state = {
  busy: false,
  events: null,
  // Texts this page already showed as replies to its own POSTs, so the same message arriving
  // again on /v1/events (which carries every message the bot sends) is not shown twice.
  recent: [],
  buffered: [],
};

// -- settings, remembered per browser -------------------------------------------------------
const saved = JSON.parse(localStorage.getItem("chatfn") || "{}");
for (const id of ["speaker", "group", "token"]) if (saved[id] !== undefined) $(id).value = saved[id];
if (saved.mode === "group") $("mode-group").checked = true;
if (saved.atbot !== undefined) $("atbot").checked = saved.atbot;

function settings() {
  const group = $("mode-group").checked;
  const speaker = $("speaker").value.trim() || "web-user";
  const groupName = $("group").value.trim() || "team1";
  return {
    speaker, group, groupName, atBot: $("atbot").checked, token: $("token").value.trim(),
    chatId: group ? `group:${groupName}` : `private:${speaker}`,
  };
}

function settingsChanged() {
  const s = settings();
  localStorage.setItem("chatfn", JSON.stringify({
    speaker: $("speaker").value, group: $("group").value, token: $("token").value,
    mode: s.group ? "group" : "private", atbot: s.atBot,
  }));
  $("group-box").hidden = $("at-box").hidden = !s.group;
  if (state.chatOnScreen !== s.chatId) {  // another chat: its own messages
    state.chatOnScreen = s.chatId;
    state.historyOf = null;
    log.replaceChildren();
  }
  loadHistory(s);
  $("where").textContent = s.group
    ? t("web.where_group", { group: s.groupName, speaker: s.speaker }) + t(s.atBot ? "web.where_at" : "web.where_no_at")
    : t("web.where_private", { speaker: s.speaker });
  connectEvents();
}
for (const id of ["speaker", "group", "token"]) $(id).addEventListener("change", settingsChanged);
for (const id of ["mode-private", "mode-group", "atbot"]) $(id).addEventListener("change", settingsChanged);

// -- rendering ------------------------------------------------------------------------------
function scroll() { log.scrollTop = log.scrollHeight; }

// Markdown for the bot's replies: marked turns it into HTML, in which raw HTML (a model can be
// made to write anything) is escaped to text, and DOMPurify removes whatever could still run.
const MARKDOWN = Boolean(window.marked && window.DOMPurify);
const ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };
const escapeHtml = (s) => String(s).replace(/[&<>"']/g, (c) => ESCAPES[c]);
if (MARKDOWN) {
  marked.use({ gfm: true, breaks: true,
               renderer: { html(token) { return escapeHtml(typeof token === "string" ? token : token.text); } } });
  DOMPurify.addHook("afterSanitizeAttributes", (node) => {
    if (node.tagName === "A") { node.setAttribute("target", "_blank"); node.setAttribute("rel", "noopener noreferrer"); }
  });
}

function appendText(body, text, markdown) {
  if (!markdown || !MARKDOWN) { body.append(document.createTextNode(text)); return; }
  const md = document.createElement("div");
  md.className = "md";
  md.innerHTML = DOMPurify.sanitize(marked.parse(text), { USE_PROFILES: { html: true } });
  body.append(md);
}

function addMessage(kind, who, text, at, images, before, audio) {
  const div = document.createElement("div");
  div.className = `msg ${kind}`;
  const name = document.createElement("div");
  name.className = "who";
  name.textContent = who;
  const body = document.createElement("div");
  body.className = "body";
  appendText(body, text, kind.startsWith("bot") && !kind.includes("streaming"));
  if (at) {  // at the start of the first paragraph, not on a line of its own
    const mention = document.createElement("span");
    mention.className = "at";
    mention.textContent = `@${at} `;
    const md = body.querySelector(".md");
    const first = md && md.firstElementChild;
    (first && first.tagName === "P" ? first : md || body).prepend(mention);
  }
  div.append(name, body);
  if (images && images.length) {
    const row = document.createElement("div");
    row.className = "imgs";
    for (const src of images) {
      const img = document.createElement("img");
      img.src = src;
      img.alt = "";
      row.append(img);
    }
    div.append(row);
  }
  for (const src of audio || []) {  // a voice message sent, or the reply spoken (voice.tts)
    const player = document.createElement("audio");
    player.className = "voice";
    player.controls = true;
    player.src = src;
    div.append(player);
  }
  if (before) log.insertBefore(div, before); else log.append(div);
  scroll();
  return div;
}

function addNote(text, error, before) {
  const div = document.createElement("div");
  div.className = "note" + (error ? " error" : "");
  div.textContent = text;
  if (before) log.insertBefore(div, before); else log.append(div);
  scroll();
}

// -- GET /v1/history: the chat's stored messages, above anything said since the page opened --
async function loadHistory(s) {
  const key = `${s.chatId}\n${s.token}`;
  if (state.historyOf === key) return;
  state.historyOf = key;
  const headers = s.token ? { Authorization: `Bearer ${s.token}` } : {};
  const first = document.createElement("span");  // the history goes above this mark
  log.prepend(first);
  try {
    const response = await fetch(`/v1/history?chat_id=${encodeURIComponent(s.chatId)}&limit=50`, { headers });
    if (!response.ok) {
      let message = `HTTP ${response.status}`;
      try { message = (await response.json()).error || message; } catch {}
      state.historyOf = null;  // try again once the token is right
      addNote(message, true, first);
      return;
    }
    const { messages } = await response.json();
    if (settings().chatId !== s.chatId) return;  // the chat changed meanwhile
    for (const m of messages) {
      const when = new Date(m.time).toLocaleString();
      let div;
      if (m.role === "user") {
        const mine = m.sender_id === s.speaker;
        const who = m.sender_name || m.sender_id;
        const label = s.group ? t("web.in_group", { speaker: who, group: s.groupName }) : who;
        div = addMessage(mine ? "me" : "other", label, m.text, null, null, first);
      } else {
        div = addMessage("bot", "bot", m.text, null, null, first);
        if (m.role === "assistant") rememberReply(s.chatId, m.text);
      }
      div.title = when;
      div.dataset.id = m.id;
    }
  } catch (err) {
    state.historyOf = null;
    addNote(t("web.connection_problem", { error: err.message }), true, first);
  } finally {
    first.remove();
    scroll();
  }
}

function addTool(call) {
  const div = document.createElement("div");
  div.className = "tool running";
  div.dataset.id = call.id;
  const head = document.createElement("div");
  head.className = "state";
  head.dataset.running = t("web.running");
  head.textContent = call.name;
  const args = document.createElement("div");
  args.className = "args";
  div.append(head, args);
  log.append(div);
  scroll();
  return div;
}

function formatArgs(raw) {
  if (!raw) return "";
  try {
    const obj = JSON.parse(raw);
    return Object.entries(obj).map(([k, v]) => `${k}=${JSON.stringify(v)}`).join(", ");
  } catch { return raw; }
}

// -- /v1/events: unsolicited messages to the chat on screen ---------------------------------
function rememberReply(chatId, text) {
  const now = Date.now();
  state.recent = state.recent.filter((r) => now - r.at < 15000);
  state.recent.push({ chatId, text, at: now });
}

function seenAlready(ev) {
  const i = state.recent.findIndex((r) => r.chatId === ev.chat_id && r.text === ev.text);
  if (i < 0) return false;
  state.recent.splice(i, 1);
  return true;
}

function showEvent(ev) {
  if (ev.chat_id !== settings().chatId || seenAlready(ev)) return;
  addMessage("bot event", `bot · ${t("web.on_its_own")}`, ev.text, ev.at, null, null, ev.audio);
}

function connectEvents() {
  const s = settings();
  const url = "/v1/events" + (s.token ? `?token=${encodeURIComponent(s.token)}` : "");
  if (state.events && state.events.url.endsWith(url)) return;
  if (state.events) state.events.close();
  const live = $("live");
  const es = new EventSource(url);
  state.events = es;
  es.onopen = () => { live.className = "on"; live.textContent = t("web.live"); };
  es.onerror = () => { live.className = ""; live.textContent = t("web.offline"); };
  es.addEventListener("message", (e) => {
    let ev;
    try { ev = JSON.parse(e.data); } catch { return; }
    if (state.busy) state.buffered.push(ev); else showEvent(ev);
  });
}

// -- POST /v1/messages/stream ---------------------------------------------------------------
async function* sseEvents(response) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true }).replace(/\r\n/g, "\n");
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      let event = "message", data = "";
      for (const line of block.split("\n")) {
        if (line.startsWith("event:")) event = line.slice(6).trim();
        else if (line.startsWith("data:")) data += line.slice(5).replace(/^ /, "");
      }
      if (data) yield { event, data: JSON.parse(data) };
    }
  }
}

// As in the console, "@bot" typed in a line mentions the bot too.
const MENTION = /(^|\s)@bot\b/gi;

// -- images: attach or paste; sent as data URIs ("images" in the body) -----------------------
const MAX_IMAGES = 4, MAX_MB = 5;
const TYPES = ["image/png", "image/jpeg", "image/gif", "image/webp"];
const pending = [];

function showPending() {
  const box = $("pending");
  box.replaceChildren();
  pending.forEach((src, i) => {
    const thumb = document.createElement("span");
    thumb.className = "thumb";
    const img = document.createElement("img");
    img.src = src;
    img.alt = "";
    const remove = document.createElement("button");
    remove.type = "button";
    remove.textContent = "×";
    remove.title = t("web.remove_image");
    remove.setAttribute("aria-label", t("web.remove_image"));
    remove.addEventListener("click", () => { pending.splice(i, 1); showPending(); });
    thumb.append(img, remove);
    box.append(thumb);
  });
}

function addImages(files) {
  for (const file of files) {
    if (!TYPES.includes(file.type)) { addNote(t("web.not_image", { name: file.name || "?" }), true); continue; }
    if (file.size > MAX_MB * 1024 * 1024) { addNote(t("web.image_too_big", { limit: MAX_MB }), true); continue; }
    if (pending.length >= MAX_IMAGES) { addNote(t("web.too_many_images", { count: MAX_IMAGES }), true); break; }
    const reader = new FileReader();
    const slot = pending.push("") - 1;
    reader.onload = () => { pending[slot] = reader.result; showPending(); };
    reader.readAsDataURL(file);
  }
}
$("attach").addEventListener("click", () => $("file").click());
$("file").addEventListener("change", (e) => { addImages([...e.target.files]); e.target.value = ""; });
$("input").addEventListener("paste", (e) => {
  const files = [...(e.clipboardData?.items || [])]
    .filter((item) => item.kind === "file" && item.type.startsWith("image/"))
    .map((item) => item.getAsFile()).filter(Boolean);
  if (files.length) { e.preventDefault(); addImages(files); }
});

// -- voice: the record button records the microphone; sent as a data URI ("audio") ----------
const recorder = { media: null, chunks: [] };

async function toggleRecording() {
  const button = $("record");
  if (recorder.media) { recorder.media.stop(); return; }
  if (state.busy) return;
  let stream;
  try {
    stream = await navigator.mediaDevices.getUserMedia({ audio: true });
  } catch (err) {
    addNote(t("web.no_microphone", { error: err.message }), true);
    return;
  }
  const media = new MediaRecorder(stream);
  recorder.media = media;
  recorder.chunks = [];
  button.classList.add("on");
  button.title = t("web.recording");
  button.dataset.chunks = "0";
  media.ondataavailable = (e) => {
    if (e.data.size) recorder.chunks.push(e.data);
    button.dataset.chunks = String(recorder.chunks.length);
  };
  media.onstop = () => {
    stream.getTracks().forEach((track) => track.stop());
    recorder.media = null;
    button.classList.remove("on");
    button.title = t("web.record");
    const blob = new Blob(recorder.chunks, { type: media.mimeType || "audio/webm" });
    const reader = new FileReader();
    reader.onload = () => send("", [], [reader.result]);
    reader.readAsDataURL(blob);
  };
  media.start(250);  // a chunk every 250 ms
}
$("record").addEventListener("click", toggleRecording);

async function send(typed, images, audio) {
  const s = settings();
  const mentioned = s.group && (s.atBot || MENTION.test(typed));
  MENTION.lastIndex = 0;
  const text = typed.replace(MENTION, "$1").trim() || typed;
  addMessage("me", s.group ? t("web.in_group", { speaker: s.speaker, group: s.groupName }) : s.speaker,
             text, mentioned ? "bot" : null, images, null, audio);
  const body = { chat_id: s.chatId, sender_id: s.speaker, sender_name: s.speaker, text,
                 is_group: s.group, at_bot: mentioned };
  if (images.length) body.images = images;
  if (audio && audio.length) body.audio = audio;
  if (s.group) body.chat_name = s.groupName;
  const headers = { "Content-Type": "application/json" };
  if (s.token) headers.Authorization = `Bearer ${s.token}`;
  state.busy = true;
  $("send").disabled = true;
  let streaming = null, thinking = null, answered = false;
  const tools = new Map();
  const finishTools = () => {
    for (const el of tools.values()) el.className = "tool done";
    tools.clear();
  };
  try {
    const response = await fetch("/v1/messages/stream",
                                 { method: "POST", headers, body: JSON.stringify(body) });
    if (!response.ok) {
      let message = `HTTP ${response.status}`;
      try { message = (await response.json()).error || message; } catch {}
      if (response.status === 401) $("token").focus();
      addNote(message, true);
      return;
    }
    for await (const { event, data } of sseEvents(response)) {
      if (event === "text") {
        finishTools();
        if (!streaming) streaming = addMessage("bot streaming", "bot", "");
        streaming.querySelector(".body").append(document.createTextNode(data.text));
        scroll();
      } else if (event === "thinking") {
        if (!thinking) {
          thinking = document.createElement("div");
          thinking.className = "thinking";
          log.append(thinking);
        }
        thinking.textContent += data.text;
        scroll();
      } else if (event === "tool_call_start") {
        if (streaming) { streaming.className = "msg bot partial"; streaming = null; }
        tools.set(data.id, addTool(data));
      } else if (event === "tool_call_end") {
        const el = tools.get(data.id) || addTool(data);
        tools.set(data.id, el);
        el.querySelector(".args").textContent = formatArgs(data.arguments);
      } else if (event === "reply") {
        finishTools();
        answered = true;
        rememberReply(s.chatId, data.text);
        const streamed = streaming && streaming.querySelector(".body").textContent;
        if (streaming && streamed.trim() === data.text.trim()) {
          streaming.remove();  // re-drawn below with its mention
        } else if (streaming) {
          streaming.className = "msg bot partial";
        }
        streaming = null;
        addMessage("bot", "bot", data.text, data.at, null, null, data.audio);
      } else if (event === "done") {
        finishTools();
        if (streaming) streaming.className = "msg bot";
        if (!answered && !(data.replies || []).length) {
          addNote(t(s.group && !mentioned ? "web.silent" : "web.no_reply"));
        }
      }
    }
  } catch (err) {
    addNote(t("web.connection_problem", { error: err.message }), true);
  } finally {
    if (streaming) streaming.className = "msg bot";
    finishTools();
    state.busy = false;
    $("send").disabled = false;
    const held = state.buffered.splice(0);
    held.forEach(showEvent);
  }
}

$("composer").addEventListener("submit", (e) => {
  e.preventDefault();
  const text = $("input").value.trim();
  const images = pending.filter(Boolean);
  if ((!text && !images.length) || state.busy) return;
  $("input").value = "";
  pending.length = 0;
  showPending();
  send(text, images);
});
$("input").addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
    e.preventDefault();
    $("composer").requestSubmit();
  }
});

settingsChanged();
