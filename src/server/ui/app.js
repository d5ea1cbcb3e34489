// The chat page: conversations kept in this browser (localStorage), replies
// streamed from /v1/chat/completions, rendered by markdown.js (DOM nodes
// only, never innerHTML), and a status panel fed by /v1/models, /v1/plan
// and /metrics. Works with --api-key: the key is asked for and sent as
// "Authorization: Bearer KEY".
"use strict";

(function () {
  const $ = (id) => document.getElementById(id);
  const STORE = { conversations: "pagellm.conversations", settings: "pagellm.settings", key: "pagellm.apiKey" };
  const MAX_CONVERSATIONS = 50;

  const state = {
    conversations: load(STORE.conversations, []),
    current: null,       // the conversation shown
    controller: null,    // AbortController of the reply being streamed
    lastTokens: null,    // [time, generation_tokens_total] of the previous /metrics poll
  };

  function load(key, fallback) {
    try {
      const v = JSON.parse(localStorage.getItem(key));
      return v === null || v === undefined ? fallback : v;
    } catch (e) {
      return fallback;
    }
  }
  function save() {
    state.conversations = state.conversations.slice(0, MAX_CONVERSATIONS);
    localStorage.setItem(STORE.conversations, JSON.stringify(state.conversations));
  }

  function headers() {
    const h = { "Content-Type": "application/json" };
    const key = $("api-key").value.trim();
    if (key) h["Authorization"] = "Bearer " + key;
    return h;
  }

  function showError(text) {
    const e = $("error");
    e.textContent = text || "";
    e.hidden = !text;
  }

  // --- settings -----------------------------------------------------------

  function loadSettings() {
    const s = load(STORE.settings, {});
    if (typeof s.system === "string") $("system-prompt").value = s.system;
    if (s.temperature !== undefined) $("temperature").value = s.temperature;
    if (s.topP !== undefined) $("top-p").value = s.topP;
    if (s.maxTokens !== undefined) $("max-tokens").value = s.maxTokens;
    $("api-key").value = localStorage.getItem(STORE.key) || "";
  }
  function saveSettings() {
    localStorage.setItem(STORE.settings, JSON.stringify({
      system: $("system-prompt").value, temperature: $("temperature").value,
      topP: $("top-p").value, maxTokens: $("max-tokens").value,
    }));
    localStorage.setItem(STORE.key, $("api-key").value.trim());
  }
  function askForKey(message) {
    $("settings").open = true;
    $("api-key").classList.add("needed");
    $("api-key").focus();
    showError(message);
  }

  // --- conversations ------------------------------------------------------

  function newConversation() {
    const c = { id: Date.now().toString(36) + Math.random().toString(36).slice(2, 6), title: "New chat", messages: [] };
    state.conversations.unshift(c);
    state.current = c;
    save();
    renderAll();
  }

  function renderConversationList() {
    const list = $("conversations");
    list.replaceChildren();
    for (const c of state.conversations) {
      const li = document.createElement("li");
      if (c === state.current) li.className = "current";
      const open = document.createElement("button");
      open.type = "button";
      open.className = "open";
      open.textContent = c.title;
      open.addEventListener("click", () => { if (!state.controller) { state.current = c; renderAll(); } });
      const del = document.createElement("button");
      del.type = "button";
      del.className = "delete";
      del.textContent = "×";
      del.title = "Delete";
      del.addEventListener("click", () => {
        if (state.controller) return;
        state.conversations = state.conversations.filter((x) => x !== c);
        if (state.current === c) state.current = state.conversations[0] || null;
        save();
        if (!state.current) newConversation(); else renderAll();
      });
      li.append(open, del);
      list.appendChild(li);
    }
  }

  function messageElement(m) {
    const div = document.createElement("div");
    div.className = "msg " + m.role;
    const role = document.createElement("div");
    role.className = "role";
    role.textContent = m.role === "user" ? "You" : "Assistant";
    const content = document.createElement("div");
    content.className = "content";
    fillContent(content, m);
    div.append(role, content);
    return div;
  }

  function fillContent(content, m) {
    if (m.role === "assistant") content.replaceChildren(window.PagellmMarkdown.renderMarkdown(m.content));
    else content.textContent = m.content;
    if (m.note) {
      const note = document.createElement("div");
      note.className = "note";
      note.textContent = m.note;
      content.appendChild(note);
    }
  }

  function renderMessages() {
    const box = $("messages");
    box.replaceChildren();
    if (!state.current) return;
    for (const m of state.current.messages) box.appendChild(messageElement(m));
    box.scrollTop = box.scrollHeight;
  }

  function renderAll() {
    renderConversationList();
    renderMessages();
    updateButtons();
  }

  function updateButtons() {
    const busy = !!state.controller;
    $("send").disabled = busy;
    $("stop").disabled = !busy;
    const msgs = state.current ? state.current.messages : [];
    $("regenerate").disabled = busy || !msgs.some((m) => m.role === "user");
  }

  // --- streaming ----------------------------------------------------------

  function requestBody(messages) {
    const all = [];
    const system = $("system-prompt").value.trim();
    if (system) all.push({ role: "system", content: system });
    for (const m of messages) all.push({ role: m.role, content: m.content });
    const body = { messages: all, stream: true, stream_options: { include_usage: true } };
    const t = parseFloat($("temperature").value);
    const p = parseFloat($("top-p").value);
    const n = parseInt($("max-tokens").value, 10);
    if (Number.isFinite(t)) body.temperature = t;
    if (Number.isFinite(p)) body.top_p = p;
    if (Number.isFinite(n) && n > 0) body.max_tokens = n;
    return body;
  }

  // Streams a reply to the current conversation's messages.
  async function generate() {
    const conv = state.current;
    const reply = { role: "assistant", content: "" };
    conv.messages.push(reply);
    const el = messageElement(reply);
    el.classList.add("streaming");
    $("messages").appendChild(el);
    const content = el.querySelector(".content");
    const controller = new AbortController();
    state.controller = controller;
    updateButtons();
    showError("");
    const started = performance.now();
    let usage = null;
    try {
      const res = await fetch("/v1/chat/completions", {
        method: "POST", headers: headers(), signal: controller.signal,
        body: JSON.stringify(requestBody(conv.messages.slice(0, -1))),
      });
      if (!res.ok) {
        let message = "HTTP " + res.status;
        try { message = (await res.json()).error.message; } catch (e) { /* keep the status */ }
        if (res.status === 401) askForKey("This server needs an API key: " + message);
        else showError(message);
        conv.messages.pop();
        el.remove();
        return;
      }
      $("api-key").classList.remove("needed");
      const reader = res.body.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        let cut;
        while ((cut = buffer.indexOf("\n\n")) >= 0) {
          const event = buffer.slice(0, cut);
          buffer = buffer.slice(cut + 2);
          for (const line of event.split("\n")) {
            if (!line.startsWith("data: ")) continue;
            const data = line.slice(6);
            if (data === "[DONE]") continue;
            const chunk = JSON.parse(data);
            if (chunk.error) throw new Error(chunk.error.message);
            if (chunk.usage) usage = chunk.usage;
            for (const c of chunk.choices || []) {
              if (c.delta && c.delta.content) reply.content += c.delta.content;
              if (c.finish_reason === "length") reply.note = "(stopped: max tokens)";
            }
          }
          fillContent(content, reply);
          $("messages").scrollTop = $("messages").scrollHeight;
        }
      }
      if (usage) {
        const secs = (performance.now() - started) / 1000;
        const tps = usage.completion_tokens / Math.max(secs, 1e-3);
        reply.note = (reply.note ? reply.note + " · " : "") +
          usage.completion_tokens + " tokens, " + tps.toFixed(1) + " tokens/s";
      }
    } catch (e) {
      if (e.name === "AbortError") reply.note = "(stopped)";
      else showError(String(e.message || e));
    } finally {
      state.controller = null;
      el.classList.remove("streaming");
      fillContent(content, reply);
      if (conv.title === "New chat") {
        const first = conv.messages.find((m) => m.role === "user");
        if (first) conv.title = first.content.slice(0, 40);
      }
      save();
      renderConversationList();
      updateButtons();
    }
  }

  function send(event) {
    if (event) event.preventDefault();
    if (state.controller) return;
    const text = $("prompt").value;
    if (!text.trim()) return;
    if (!state.current) newConversation();
    const m = { role: "user", content: text };
    state.current.messages.push(m);
    $("messages").appendChild(messageElement(m));
    $("prompt").value = "";
    generate();
  }

  function regenerate() {
    if (state.controller || !state.current) return;
    const msgs = state.current.messages;
    while (msgs.length && msgs[msgs.length - 1].role === "assistant") msgs.pop();
    if (!msgs.length) return;
    renderMessages();
    generate();
  }

  // --- status panel -------------------------------------------------------

  function parseMetrics(text) {
    const out = {};
    for (const line of text.split("\n")) {
      if (!line || line.startsWith("#")) continue;
      const at = line.lastIndexOf(" ");
      out[line.slice(0, at)] = parseFloat(line.slice(at + 1));
    }
    return out;
  }

  async function pollStatus() {
    try {
      const models = await fetch("/v1/models", { headers: headers() });
      if (models.status === 401) {
        $("status-model").textContent = "(API key needed)";
      } else if (models.ok) {
        const m = (await models.json()).data[0];
        $("status-model").textContent = m.id;
        $("status-context").textContent = m.max_model_len + " tokens";
        const plan = await fetch("/v1/plan", { headers: headers() });
        if (plan.ok) {
          const p = await plan.json();
          if (p.model && p.model.arch) $("status-model").textContent = m.id + " (" + p.model.arch + ")";
        }
      }
      const metrics = await fetch("/metrics");
      if (metrics.ok) {
        const s = parseMetrics(await metrics.text());
        const used = s["pagellm_kv_blocks_used"], total = s["pagellm_kv_blocks_total"];
        if (total !== undefined)
          $("status-kv").textContent = used + " / " + total + " blocks (" +
            (100 * (s["pagellm_kv_cache_usage_ratio"] || 0)).toFixed(0) + "%)";
        const generated = s["pagellm_generation_tokens_total"];
        const now = performance.now();
        if (generated !== undefined) {
          if (state.lastTokens) {
            const dt = (now - state.lastTokens[0]) / 1000;
            $("status-tps").textContent = ((generated - state.lastTokens[1]) / dt).toFixed(1);
          }
          state.lastTokens = [now, generated];
        }
        $("status-requests").textContent = (s["pagellm_requests_running"] || 0) + " running, " +
          (s["pagellm_requests_waiting"] || 0) + " waiting";
      }
      $("status-error").hidden = true;
    } catch (e) {
      $("status-error").textContent = "server unreachable";
      $("status-error").hidden = false;
    }
  }

  // --- wiring ---------------------------------------------------------------

  function init() {
    loadSettings();
    for (const id of ["system-prompt", "temperature", "top-p", "max-tokens", "api-key"])
      $(id).addEventListener("change", saveSettings);
    $("composer").addEventListener("submit", send);
    $("prompt").addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey) send(e);
    });
    $("stop").addEventListener("click", () => state.controller && state.controller.abort());
    $("regenerate").addEventListener("click", regenerate);
    $("new-chat").addEventListener("click", () => { if (!state.controller) newConversation(); });
    if (state.conversations.length) {
      state.current = state.conversations[0];
      renderAll();
    } else {
      newConversation();
    }
    pollStatus();
    setInterval(pollStatus, 3000);
  }

  window.PagellmUI = { state, renderMarkdown: (t) => window.PagellmMarkdown.renderMarkdown(t) };
  document.addEventListener("DOMContentLoaded", init);
})();
