// llama.cpp's side of `seam score --json --per-token`: teacher-forced
// per-position data of a GGUF model through node-llama-cpp, printed in
// Seam's JSON shape so that the two outputs compare position by position.
//
// Usage (from the repository root, after cd reference && npm ci):
//   node reference/score-llamacpp.mjs --model F.gguf (--text TEXT | --file F | --ids "1,2,3")
//        [--threads N]
//
// --text and --file are tokenized by llama.cpp with the model's vocabulary,
// special tokens parsed, BOS first when the model adds one (as `seam score`
// does); --ids takes the token ids as given (for example Seam's, to compare
// the model apart from the tokenizer). Output, one JSON object:
//   {"tokens": N, "predicted": N-1, "mean_nll": ..., "perplexity": ...,
//    "per_token": [{"id": ..., "argmax": ..., "logprob": ...}, ...]}
// where, as in Seam, id is the token at the position, argmax llama.cpp's most
// likely next token, logprob the natural log of llama.cpp's probability of
// the actual next token (null at the last position, and null where float32
// underflows to 0, below about -103).
//
// llama.cpp runs on the CPU with an F32 KV cache (so cache rounding does not
// enter) and --threads threads (default 1, deterministic). The probabilities
// are llama.cpp's softmax over the whole vocabulary (top-k 0, top-p 1,
// min-p 0, temperature 1), taken 8 positions at a time so that only 8
// vocabulary-sized maps are alive at once.
import { readFileSync } from "node:fs";
import { getLlama } from "node-llama-cpp";

function parseArgs(argv) {
  const opts = { threads: 1 };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      return argv[++i];
    };
    switch (a) {
      case "--model": opts.model = value(); break;
      case "--text": opts.text = value(); break;
      case "--file": opts.text = readFileSync(value(), "utf8"); break;
      case "--ids": opts.ids = value().split(/[\s,]+/).filter((s) => s !== "").map(Number); break;
      case "--threads": opts.threads = Number(value()); break;
      default: throw new Error(`unknown argument ${a}`);
    }
  }
  if (!opts.model) throw new Error("--model is required");
  if ((opts.text === undefined) === (opts.ids === undefined)) throw new Error("give exactly one of --text, --file or --ids");
  if (opts.ids && opts.ids.some((id) => !Number.isInteger(id) || id < 0)) throw new Error("--ids: not a list of token ids");
  return opts;
}

let opts;
try {
  opts = parseArgs(process.argv.slice(2));
} catch (e) {
  console.error(`score-llamacpp.mjs: ${e.message}`);
  process.exit(2);
}
const llama = await getLlama({ gpu: false, build: "never", logLevel: "error" });
const model = await llama.loadModel({ modelPath: opts.model });
let tokens = opts.ids;
if (!tokens) {
  tokens = Array.from(model.tokenize(opts.text, true));
  if (model.tokens.shouldPrependBosToken && model.tokens.bos != null) tokens.unshift(model.tokens.bos);
}
if (tokens.length === 0) throw new Error("no tokens to score");
const n = tokens.length;
const context = await model.createContext({
  contextSize: n + 8, batchSize: Math.min(n, 512), threads: opts.threads,
  experimentalKvCacheKeyType: "F32", experimentalKvCacheValueType: "F32",
});
const seq = context.getSequence();
const options = { temperature: 1, topK: 0, topP: 1, minP: 0, seed: 1 };
const perToken = [];
let nll = 0;
const chunk = 8;
for (let start = 0; start < n; start += chunk) {
  const part = tokens.slice(start, start + chunk);
  const evaluated = await seq.controlledEvaluate(part.map((t) =>
    [t, { generateNext: { probabilities: true, options } }]));
  evaluated.forEach((r, j) => {
    const i = start + j;
    const probs = r.next.probabilities;
    const argmax = probs.keys().next().value; // most likely first
    let logprob = null;
    if (i + 1 < n) {
      const p = probs.get(tokens[i + 1]) ?? 0;
      logprob = p > 0 ? Math.log(p) : null;
      nll -= p > 0 ? Math.log(p) : -Infinity;
    }
    perToken.push({ id: tokens[i], argmax, logprob });
  });
}
const predicted = n - 1;
const meanNLL = predicted > 0 && Number.isFinite(nll) ? nll / predicted : null;
process.stdout.write(JSON.stringify({
  tokens: n, predicted, mean_nll: meanNLL, perplexity: meanNLL === null ? null : Math.exp(meanNLL), per_token: perToken,
}) + "\n");
await context.dispose();
await model.dispose();
await llama.dispose();
