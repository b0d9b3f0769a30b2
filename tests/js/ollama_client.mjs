// The `ollama` JavaScript library against the appliance (tests/e2e/test_ollama.py): chat whole and
// streamed, a schema format, a tool call, an image, generate, embed, list, show and ps.
// Usage: node ollama_client.mjs HOST CHAT_MODEL CALLS_MODEL VISION_MODEL EMBED_MODEL IMAGE_BASE64 [API_KEY];
// prints one JSON line.
import { Ollama } from "ollama";

const [host, chatModel, callsModel, visionModel, embedModel, image, apiKey] = process.argv.slice(2);
const ollama = new Ollama({ host, headers: apiKey ? { Authorization: `Bearer ${apiKey}` } : {} });
const greedy = { temperature: 0, num_predict: 24 };
const ask = [{ role: "user", content: "Count from 1 to 5." }];

const whole = await ollama.chat({ model: chatModel, messages: ask, options: greedy });
let streamed = "";
let last = null;
for await (const part of await ollama.chat({ model: chatModel, messages: ask, options: greedy, stream: true })) {
  streamed += part.message.content;
  last = part;
}
const weather = {
  type: "object",
  properties: { city: { type: "string", maxLength: 20 }, temperature_c: { type: "integer" } },
  required: ["city", "temperature_c"],
  additionalProperties: false,
};
const formatted = await ollama.chat({
  model: chatModel,
  messages: [{ role: "user", content: "Paris is at 21 degrees C. Extract the city and temperature." }],
  format: weather,
  options: { temperature: 0, num_predict: 60 },
});
const call = {
  type: "object",
  properties: {
    name: { const: "get_weather" },
    parameters: {
      type: "object",
      properties: { city: { type: "string", maxLength: 20 } },
      required: ["city"],
      additionalProperties: false,
    },
  },
  required: ["name", "parameters"],
  additionalProperties: false,
};
const tools = [
  {
    type: "function",
    function: {
      name: "get_weather",
      description: "Get the current weather in a city.",
      parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
    },
  },
];
const called = await ollama.chat({
  model: callsModel,
  messages: [{ role: "user", content: "What is the weather in Paris?" }],
  tools,
  format: call,
  options: { temperature: 0, num_predict: 60 },
});
const seen = await ollama.chat({
  model: visionModel,
  messages: [{ role: "user", content: "What is in this picture?", images: [image] }],
  options: { temperature: 0, num_predict: 8 },
});
const generated = await ollama.generate({ model: chatModel, prompt: "Count from 1 to 5.", options: greedy });
const embedded = await ollama.embed({ model: embedModel, input: ["The sky is blue.", "Grass is green."] });
const listed = await ollama.list();
const shown = await ollama.show({ model: chatModel });
const running = await ollama.ps();

console.log(
  JSON.stringify({
    whole: whole.message.content,
    streamed,
    streamedDone: last.done,
    evalCount: whole.eval_count,
    formatted: JSON.parse(formatted.message.content),
    toolCalls: called.message.tool_calls,
    vision: { text: seen.message.content, promptTokens: seen.prompt_eval_count },
    generated: generated.response,
    embeddings: embedded.embeddings,
    listed: listed.models.map((model) => model.name),
    capabilities: shown.capabilities,
    contextLength: shown.model_info[`${shown.details.family}.context_length`],
    running: running.models.map((model) => model.name),
  }),
);
