// Vercel's AI SDK against the appliance (tests/e2e/test_agents.py): a tool loop with generateText,
// then an object with generateObject. Usage: node agent_loop.mjs BASE_URL MODEL; prints one JSON line.
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { generateObject, generateText, stepCountIs, tool } from "ai";
import { z } from "zod";

const [baseURL, model] = process.argv.slice(2);
const provider = createOpenAICompatible({ name: "appliance", baseURL, apiKey: "unused", supportsStructuredOutputs: true });

const calls = [];
const weather = tool({
  description: "Get the current weather in a city.",
  inputSchema: z.object({ city: z.string() }),
  execute: async ({ city }) => {
    calls.push(city);
    return `It is sunny and 21 degrees C in ${city}.`;
  },
});

const loop = await generateText({
  model: provider(model),
  tools: { get_weather: weather },
  // The first step must call the tool; the last answers in text (a 135M model would not choose to).
  prepareStep: ({ stepNumber }) => ({ toolChoice: stepNumber === 0 ? "required" : "none" }),
  stopWhen: stepCountIs(3),
  temperature: 0,
  maxOutputTokens: 400,
  prompt: "What is the weather in Paris?",
});

const extracted = await generateObject({
  model: provider(model),
  schema: z.object({ city: z.string(), temperature_c: z.number().int() }),
  temperature: 0,
  maxOutputTokens: 100,
  prompt: "Paris is at 21 degrees C. Extract the city and temperature.",
});

console.log(
  JSON.stringify({
    calls,
    steps: loop.steps.length,
    finishReasons: loop.steps.map((step) => step.finishReason),
    text: loop.text,
    object: extracted.object,
  }),
);
