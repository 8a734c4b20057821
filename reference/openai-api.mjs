// Drives a running `seam api` with the official openai npm client and prints
// what it saw as one JSON object; the Go test (cmd/seam/api_test.go) checks
// it against Seam's own tokenizer and `seam run`.
//
//   node openai-api.mjs BASE_URL MODEL
import OpenAI from "openai";

const [base, model] = process.argv.slice(2);
const client = new OpenAI({ baseURL: base + "/v1", apiKey: "unused", maxRetries: 0, timeout: 60000 });
const out = {};
const prompt = "Once upon a time";
const messages = [{ role: "system", content: "You tell stories." }, { role: "user", content: "Tell me about a dog." }];

async function collect(stream, pick) {
  let text = "", finish = null, usage = null, chunks = 0;
  for await (const c of stream) {
    chunks++;
    if (c.usage) usage = c.usage;
    const ch = c.choices[0];
    if (!ch) continue;
    text += pick(ch) ?? "";
    if (ch.finish_reason) finish = ch.finish_reason;
  }
  return { text, finish, usage, chunks };
}

out.models = (await client.models.list()).data.map((m) => m.id);

// chat, whole and streamed, greedy so the two must agree
const chat = await client.chat.completions.create({ model, messages, max_tokens: 40, temperature: 0 });
out.chat = { text: chat.choices[0].message.content, role: chat.choices[0].message.role, finish: chat.choices[0].finish_reason, usage: chat.usage, object: chat.object };
out.chatStream = await collect(
  await client.chat.completions.create({ model, messages, max_tokens: 40, temperature: 0, stream: true, stream_options: { include_usage: true } }),
  (ch) => ch.delta.content);

// completions, greedy: compared with seam run
const comp = await client.completions.create({ model, prompt, max_tokens: 60, temperature: 0 });
out.completion = { text: comp.choices[0].text, finish: comp.choices[0].finish_reason, usage: comp.usage, object: comp.object };
out.completionStream = await collect(
  await client.completions.create({ model, prompt, max_tokens: 60, temperature: 0, stream: true, stream_options: { include_usage: true } }),
  (ch) => ch.text);

// stop sequences, not streamed and streamed (the stop text must never show).
// Both stops occur in the greedy texts (the Go test fails if they do not):
// "Lily" in the completion, "dog" (mid-token: " dog") and "\n" in the chat.
const stopped = await client.completions.create({ model, prompt, max_tokens: 60, temperature: 0, stop: ["Lily"] });
out.stop = { text: stopped.choices[0].text, finish: stopped.choices[0].finish_reason };
const chatStops = ["dog", "\n"];
const stoppedChat = await client.chat.completions.create({ model, messages, max_tokens: 60, temperature: 0, stop: chatStops });
out.stopChat = { text: stoppedChat.choices[0].message.content, finish: stoppedChat.choices[0].finish_reason };
const streamedStop = await client.chat.completions.create({ model, messages, max_tokens: 60, temperature: 0, stop: chatStops, stream: true });
const pieces = [];
out.stopStream = await collect(streamedStop, (ch) => { if (ch.delta.content) pieces.push(ch.delta.content); return ch.delta.content; });
out.stopStream.pieces = pieces;

// max_tokens (chat's newer name too)
const short = await client.chat.completions.create({ model, messages, max_completion_tokens: 7, temperature: 0 });
out.maxTokens = { finish: short.choices[0].finish_reason, usage: short.usage };

// seed determinism at temperature 1
const seeded = async (seed) => (await client.completions.create({ model, prompt, max_tokens: 30, temperature: 1, seed })).choices[0].text;
out.seed = { a: await seeded(42), b: await seeded(42), c: await seeded(43) };

// logprobs
const lp = await client.chat.completions.create({ model, messages, max_tokens: 12, temperature: 0, logprobs: true, top_logprobs: 3 });
out.logprobs = { text: lp.choices[0].message.content, usage: lp.usage, content: lp.choices[0].logprobs.content };
const lpc = await client.completions.create({ model, prompt, max_tokens: 12, temperature: 0, logprobs: 2 });
out.legacyLogprobs = { text: lpc.choices[0].text, logprobs: lpc.choices[0].logprobs };

// an aborted stream, then a good request
const aborted = await client.completions.create({ model, prompt, max_tokens: 400, stream: true });
let seen = 0;
for await (const c of aborted) {
  if (++seen === 3) break; // leaving the loop aborts the request
}
const after = await client.completions.create({ model, prompt, max_tokens: 5, temperature: 0 });
out.abort = { seen, after: after.choices[0].text, finish: after.choices[0].finish_reason };

// a 400 surfaces as the client's BadRequestError
try {
  await client.chat.completions.create({ model, messages, n: 2 });
  out.badRequest = { error: null };
} catch (e) {
  out.badRequest = { error: e.constructor.name, status: e.status, message: e.message, param: e.param, isBadRequest: e instanceof OpenAI.BadRequestError };
}
try {
  await client.completions.create({ model: "no-such-model", prompt });
} catch (e) {
  out.notFound = { error: e.constructor.name, status: e.status, isNotFound: e instanceof OpenAI.NotFoundError };
}

process.stdout.write(JSON.stringify(out));
