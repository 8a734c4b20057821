// Reference tokenizer for Seam's GGUF tests: llama.cpp through node-llama-cpp,
// loading only the vocabulary of a GGUF file.
//
// stdin: {"model": "<file.gguf>", "texts": [...], "special": true,
//         "texts_plain": [...] (tokenized with special tokens not parsed),
//         "detokenize": [[ids], ...],
//         "bench": {"text": "...", "rounds": N}}
// stdout: {"ids": [[...]], "ids_plain": [[...]], "text": ["..."], "bench": {"bytes": B, "seconds": [...]}}
import { readFileSync } from "node:fs";
import { getLlama } from "node-llama-cpp";

// Read standard input as a stream: readFileSync(0) fails with EAGAIN when
// the pipe is non-blocking.
const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const req = JSON.parse(Buffer.concat(chunks).toString("utf8"));
const llama = await getLlama({ gpu: false, build: "never", logLevel: "error" });
const model = await llama.loadModel({ modelPath: req.model, vocabOnly: true });
const out = {};
if (req.texts) {
  out.ids = req.texts.map((t) => Array.from(model.tokenize(t, req.special ?? true)));
}
if (req.texts_plain) {
  out.ids_plain = req.texts_plain.map((t) => Array.from(model.tokenize(t, false)));
}
if (req.detokenize) {
  out.text = req.detokenize.map((ids) => model.detokenize(ids, false));
}
if (req.bench) {
  const text = req.bench.text;
  const seconds = [];
  model.tokenize(text, false); // warm-up, discarded
  for (let i = 0; i < req.bench.rounds; i++) {
    const t0 = process.hrtime.bigint();
    model.tokenize(text, false);
    seconds.push(Number(process.hrtime.bigint() - t0) / 1e9);
  }
  out.bench = { bytes: Buffer.byteLength(text, "utf8"), seconds };
}
await model.dispose();
await llama.dispose();
process.stdout.write(JSON.stringify(out));
