// The playground: chat with a served model over the appliance's own OpenAI API (same origin, so
// the server's Origin check passes; an API key, when the server wants one, is kept in this tab's
// sessionStorage and sent as a Bearer header). Answers stream over fetch + ReadableStream from
// /v1/chat/completions; Stop aborts the fetch and the server cancels the request on disconnect.

import { renderMarkdown } from "./markdown.js";

const KEY_STORAGE = "appliance.playground.apiKey";
const MODEL_STORAGE = "appliance.playground.model";
const $ = (id) => document.getElementById(id);

const ui = {
  model: $("model"),
  status: $("status"),
  keyForm: $("key-form"),
  key: $("api-key"),
  system: $("system"),
  temperature: $("temperature"),
  maxTokens: $("max-tokens"),
  topP: $("top-p"),
  topK: $("top-k"),
  seed: $("seed"),
  presencePenalty: $("presence-penalty"),
  frequencyPenalty: $("frequency-penalty"),
  stop: $("stop"),
  extra: $("extra"),
  transcript: $("transcript"),
  composer: $("composer"),
  attachments: $("attachments"),
  prompt: $("prompt"),
  file: $("file"),
  attach: $("attach"),
  clear: $("clear"),
  stopButton: $("stop-button"),
  send: $("send"),
};

const state = {
  history: [], // OpenAI messages of earlier turns (without the system prompt)
  images: [], // data URLs attached to the next message
  visionModels: new Set(),
  controller: null,
};

function apiKey() {
  return sessionStorage.getItem(KEY_STORAGE) || "";
}

function headers(json) {
  const result = json ? { "Content-Type": "application/json" } : {};
  const key = apiKey();
  if (key) result.Authorization = `Bearer ${key}`;
  return result;
}

function setStatus(text, isError = false) {
  ui.status.textContent = text;
  ui.status.classList.toggle("error", isError);
}

function askForKey(message) {
  ui.keyForm.hidden = false;
  setStatus(message, true);
  ui.key.focus();
}

async function errorMessage(response) {
  try {
    const body = await response.json();
    if (body && body.error && body.error.message) return `${response.status}: ${body.error.message}`;
  } catch {
    // not JSON: fall through to the status line
  }
  return `${response.status} ${response.statusText}`;
}

async function loadModels() {
  setStatus("Loading models…");
  let response;
  try {
    response = await fetch("/v1/models", { headers: headers(false), cache: "no-store" });
  } catch (error) {
    setStatus(`Cannot reach the server: ${error.message}`, true);
    return;
  }
  if (response.status === 401) {
    askForKey(apiKey() ? "That API key was refused." : "This server needs an API key.");
    return;
  }
  if (!response.ok) {
    setStatus(await errorMessage(response), true);
    return;
  }
  const models = (await response.json()).data.map((model) => model.id);
  await loadPipelines();
  const previous = sessionStorage.getItem(MODEL_STORAGE);
  ui.model.replaceChildren(
    ...models.map((id) => {
      const option = document.createElement("option");
      option.value = id;
      option.textContent = state.visionModels.has(id) ? `${id} (vision)` : id;
      return option;
    }),
  );
  if (previous && models.includes(previous)) ui.model.value = previous;
  ui.keyForm.hidden = !apiKey();
  setStatus(models.length ? `${models.length} model${models.length > 1 ? "s" : ""}` : "No models served");
  modelChanged();
}

// /health names each model's pipeline; VLM_CB and VLM graphs take images.
async function loadPipelines() {
  try {
    const response = await fetch("/health", { cache: "no-store" });
    const body = await response.json();
    state.visionModels = new Set(
      Object.entries(body.models || {})
        .filter(([, status]) => String(status.pipeline || "").startsWith("VLM"))
        .map(([name]) => name),
    );
  } catch {
    state.visionModels = new Set();
  }
}

function takesImages() {
  return state.visionModels.has(ui.model.value);
}

function modelChanged() {
  sessionStorage.setItem(MODEL_STORAGE, ui.model.value);
  ui.attach.hidden = !takesImages();
  if (!takesImages()) setImages([]);
}

function setImages(images) {
  state.images = images;
  ui.attachments.replaceChildren(
    ...images.map((url, index) => {
      const chip = document.createElement("span");
      chip.className = "attachment";
      const image = document.createElement("img");
      image.src = url;
      image.alt = `attached image ${index + 1}`;
      const remove = document.createElement("button");
      remove.type = "button";
      remove.textContent = "×";
      remove.title = "Remove";
      remove.addEventListener("click", () => setImages(state.images.filter((_, i) => i !== index)));
      chip.append(image, remove);
      return chip;
    }),
  );
}

function readAsDataUrl(file) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(reader.result);
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(file);
  });
}

async function addFiles(files) {
  const images = [...files].filter((file) => file.type.startsWith("image/"));
  if (!images.length) return false;
  if (!takesImages()) {
    setStatus(`${ui.model.value} does not take images; pick a vision model.`, true);
    return true;
  }
  setImages([...state.images, ...(await Promise.all(images.map(readAsDataUrl)))]);
  return true;
}

function copyText(text, button) {
  const done = () => {
    const label = button.textContent;
    button.textContent = "Copied";
    setTimeout(() => (button.textContent = label), 1200);
  };
  // navigator.clipboard exists only in secure contexts (https, localhost): a box on the LAN
  // served over http falls back to a selected textarea.
  if (navigator.clipboard && window.isSecureContext) {
    navigator.clipboard.writeText(text).then(done, () => setStatus("Copy failed", true));
    return;
  }
  const area = document.createElement("textarea");
  area.value = text;
  area.setAttribute("readonly", "");
  area.className = "offscreen";
  document.body.append(area);
  area.select();
  const copied = document.execCommand("copy");
  area.remove();
  copied ? done() : setStatus("Copy failed", true);
}

function numberField(input) {
  const value = input.value.trim();
  return value === "" ? undefined : Number(value);
}

function requestBody(messages) {
  let extra = {};
  const extraText = ui.extra.value.trim();
  if (extraText) {
    extra = JSON.parse(extraText);
    if (typeof extra !== "object" || extra === null || Array.isArray(extra)) {
      throw new Error("Extra request fields must be a JSON object.");
    }
  }
  const stops = ui.stop.value.split("\n").filter((line) => line !== "");
  const body = {
    model: ui.model.value,
    messages,
    stream: true,
    stream_options: { include_usage: true },
    temperature: numberField(ui.temperature),
    max_tokens: numberField(ui.maxTokens),
    top_p: numberField(ui.topP),
    top_k: numberField(ui.topK),
    seed: numberField(ui.seed),
    presence_penalty: numberField(ui.presencePenalty),
    frequency_penalty: numberField(ui.frequencyPenalty),
    stop: stops.length ? stops : undefined,
    ...extra,
  };
  return JSON.stringify(body); // undefined fields are left out
}

function turnElement(role) {
  const turn = document.createElement("article");
  turn.className = `turn ${role}`;
  const label = document.createElement("div");
  label.className = "role";
  label.textContent = role === "user" ? "You" : ui.model.value;
  const content = document.createElement("div");
  content.className = "content";
  turn.append(label, content);
  ui.transcript.append(turn);
  return { turn, label, content };
}

function showUserTurn(text, images) {
  const { content } = turnElement("user");
  for (const url of images) {
    const image = document.createElement("img");
    image.src = url;
    image.alt = "attached image";
    image.className = "sent-image";
    content.append(image);
  }
  const paragraph = document.createElement("p");
  paragraph.textContent = text;
  content.append(paragraph);
}

function assistantTurn() {
  const { turn, label, content } = turnElement("assistant");
  const stats = document.createElement("div");
  stats.className = "stats";
  const copy = document.createElement("button");
  copy.type = "button";
  copy.className = "copy-answer";
  copy.textContent = "Copy";
  copy.hidden = true;
  label.append(copy);
  turn.append(stats);
  let text = "";
  let scheduled = false;
  const paint = () => {
    scheduled = false;
    content.replaceChildren(renderMarkdown(text, copyText));
    ui.transcript.scrollTop = ui.transcript.scrollHeight;
  };
  copy.addEventListener("click", () => copyText(text, copy));
  return {
    append(delta) {
      text += delta;
      if (!scheduled) {
        scheduled = true;
        requestAnimationFrame(paint);
      }
    },
    text: () => text,
    finish(summary, isError = false) {
      paint();
      turn.classList.add("done");
      copy.hidden = !text;
      stats.textContent = summary;
      stats.classList.toggle("error", isError);
    },
  };
}

// Server-sent events from a fetch body: yields each event's data.
async function* sseData(body) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value.replace(/\r\n?/g, "\n");
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const data = event
        .split("\n")
        .filter((line) => line.startsWith("data:"))
        .map((line) => line.slice(5).replace(/^ /, ""))
        .join("\n");
      if (data) yield data;
    }
  }
}

function summary({ usage, ttft, started, firstAt, endedAt, chunks, finish }) {
  const parts = [];
  if (ttft !== null) parts.push(`TTFT ${Math.round(ttft)} ms`);
  const tokens = usage ? usage.completion_tokens : chunks;
  if (firstAt !== null && tokens > 1 && endedAt > firstAt) {
    parts.push(`${((tokens - 1) / ((endedAt - firstAt) / 1000)).toFixed(1)} tokens/s`);
  }
  if (usage) {
    parts.push(`${usage.prompt_tokens} prompt + ${usage.completion_tokens} completion tokens`);
  } else {
    parts.push(`${chunks} chunks received`);
  }
  parts.push(finish);
  parts.push(`${((endedAt - started) / 1000).toFixed(2)} s`);
  return parts.join(" · ");
}

async function send(event) {
  event.preventDefault();
  if (state.controller || !ui.model.value) return;
  const text = ui.prompt.value.trim();
  if (!text && !state.images.length) return;
  const images = state.images;
  const content = images.length
    ? [{ type: "text", text }, ...images.map((url) => ({ type: "image_url", image_url: { url } }))]
    : text;
  const userMessage = { role: "user", content };
  const system = ui.system.value.trim();
  const messages = [...(system ? [{ role: "system", content: system }] : []), ...state.history, userMessage];
  let body;
  try {
    body = requestBody(messages);
  } catch (error) {
    setStatus(error.message, true);
    return;
  }
  ui.prompt.value = "";
  setImages([]);
  showUserTurn(text, images);
  const answer = assistantTurn();
  const controller = new AbortController();
  state.controller = controller;
  ui.send.disabled = true;
  ui.stopButton.disabled = false;
  const run = { usage: null, ttft: null, started: performance.now(), firstAt: null, endedAt: 0, chunks: 0, finish: "" };
  let failure = null;
  try {
    const response = await fetch("/v1/chat/completions", {
      method: "POST",
      headers: headers(true),
      body,
      signal: controller.signal,
    });
    if (response.status === 401) askForKey("This server needs an API key.");
    if (!response.ok) throw new Error(await errorMessage(response));
    for await (const data of sseData(response.body)) {
      if (data === "[DONE]") break;
      const chunk = JSON.parse(data);
      if (chunk.error) throw new Error(chunk.error.message || "error");
      if (chunk.usage) run.usage = chunk.usage;
      for (const choice of chunk.choices || []) {
        const delta = choice.delta && choice.delta.content;
        if (delta) {
          if (run.firstAt === null) {
            run.firstAt = performance.now();
            run.ttft = run.firstAt - run.started;
          }
          run.chunks += 1;
          answer.append(delta);
        }
        if (choice.finish_reason) run.finish = `finish: ${choice.finish_reason}`;
      }
    }
  } catch (error) {
    failure = error.name === "AbortError" ? null : error;
    if (error.name === "AbortError") run.finish = "stopped";
  } finally {
    run.endedAt = performance.now();
    state.controller = null;
    ui.send.disabled = false;
    ui.stopButton.disabled = true;
  }
  if (failure) {
    answer.finish(failure.message, true);
  } else {
    answer.finish(summary(run));
  }
  if (!failure || answer.text()) {
    state.history.push(userMessage, { role: "assistant", content: answer.text() });
  }
  ui.prompt.focus();
}

function clearChat() {
  if (state.controller) state.controller.abort();
  state.history = [];
  setImages([]);
  ui.transcript.replaceChildren();
  ui.prompt.focus();
}

ui.model.addEventListener("change", modelChanged);
ui.composer.addEventListener("submit", send);
ui.stopButton.addEventListener("click", () => state.controller && state.controller.abort());
ui.clear.addEventListener("click", clearChat);
ui.attach.addEventListener("click", () => ui.file.click());
ui.file.addEventListener("change", async () => {
  await addFiles(ui.file.files);
  ui.file.value = "";
});
ui.prompt.addEventListener("paste", async (event) => {
  const files = event.clipboardData ? event.clipboardData.files : [];
  if (files.length && [...files].some((file) => file.type.startsWith("image/"))) {
    event.preventDefault();
    await addFiles(files);
  }
});
ui.prompt.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    ui.composer.requestSubmit();
  }
});
ui.keyForm.addEventListener("submit", (event) => {
  event.preventDefault();
  const key = ui.key.value.trim();
  if (key) sessionStorage.setItem(KEY_STORAGE, key);
  else sessionStorage.removeItem(KEY_STORAGE);
  ui.key.value = "";
  loadModels();
});

loadModels();
