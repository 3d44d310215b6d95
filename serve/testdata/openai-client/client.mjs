// Drives `cde-run serve` with the openai npm package, as an ordinary
// OpenAI client would: a text completion, a token-id completion, a chat
// completion, and a request the server must refuse. Prints one JSON object
// on stdout for TestOpenAIClient (cmd/cde-run/serve_openai_test.go).
//
//   node client.mjs http://127.0.0.1:PORT MODEL
import OpenAI from "openai";

const [baseURL, model] = process.argv.slice(2);
const client = new OpenAI({ baseURL: baseURL + "/v1", apiKey: "unused", maxRetries: 0 });
const sampling = { model, max_tokens: 6, temperature: 0.9, seed: 11, logprobs: 1 };

const text = await client.completions.create({ ...sampling, prompt: "end.\n\nNext" });
const ids = await client.completions.create({ ...sampling, prompt: [408, 382, 5847] });
const chat = await client.chat.completions.create({
  model, max_tokens: 6, temperature: 0.9, seed: 11, logprobs: true,
  messages: [{ role: "user", content: "What is 2+2?" }],
});
let refused = null;
try {
  await client.chat.completions.create({
    model, messages: [{ role: "user", content: "hi" }],
    tools: [{ type: "function", function: { name: "f", parameters: { type: "object" } } }],
  });
} catch (e) {
  refused = { status: e.status, message: e.message };
}
const models = await client.models.list();
console.log(JSON.stringify({ text, ids, chat, refused, models: models.data.map((m) => m.id) }));
