// The openai JavaScript SDK's Realtime client (`OpenAIRealtimeWebSocket`) against the appliance
// (tests/e2e/test_realtime.py): a transcription session on its server VAD, fed a recording at
// real-time pace in 100 ms chunks with no commit, until the turn's final transcript.
// Usage: node realtime_transcribe.mjs BASE_URL MODEL API_KEY PCM16_24KHZ_FILE; prints one JSON line:
// the server events' types in order, the transcript, the deltas joined, and the errors.
import { readFileSync } from "node:fs";
import OpenAI from "openai";
import { OpenAIRealtimeWebSocket } from "openai/realtime/websocket";
import { WebSocket as NodeWebSocket } from "ws";

const [baseURL, model, apiKey, audioPath] = process.argv.slice(2);

// Node 20 has no global WebSocket (22 has): the SDK dials `globalThis.WebSocket`, so it is `ws`'s.
// The SDK always dials wss:// (realtime/internal-base buildRealtimeURL); the test server speaks
// plain HTTP on the loopback.
globalThis.WebSocket = class extends NodeWebSocket {
  constructor(url, protocols) {
    super(url.replace(/^wss:/, "ws:"), protocols);
  }
};

const client = new OpenAI({ apiKey, baseURL });
const rt = await OpenAIRealtimeWebSocket.create(client, { model });
const types = [];
const errors = [];
let deltas = "";

const finished = new Promise((resolve, reject) => {
  const timer = setTimeout(() => reject(new Error("no final transcript within 60 s")), 60_000);
  rt.on("event", (event) => types.push(event.type));
  rt.on("error", (error) => errors.push(error.error?.error ?? { message: String(error.message) }));
  rt.on("conversation.item.input_audio_transcription.delta", (event) => {
    deltas += event.delta;
  });
  rt.on("conversation.item.input_audio_transcription.completed", (event) => {
    clearTimeout(timer);
    resolve(event);
  });
});

await new Promise((resolve, reject) => {
  rt.socket.addEventListener("open", resolve);
  rt.socket.addEventListener("error", (event) => reject(new Error(`could not connect: ${event.message}`)));
});
const audio = readFileSync(audioPath);
const chunk = 24_000 * 2 / 10;
const started = Date.now();
for (let index = 0; index * chunk < audio.length; index++) {
  const piece = audio.subarray(index * chunk, (index + 1) * chunk);
  rt.send({ type: "input_audio_buffer.append", audio: piece.toString("base64") });
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, started + (index + 1) * 100 - Date.now())));
}
let completed = null;
try {
  completed = await finished;
} finally {
  rt.close();
  console.log(
    JSON.stringify({
      types,
      transcript: completed?.transcript ?? null,
      usage: completed?.usage ?? null,
      deltas,
      errors,
    }),
  );
}
