// Reference tokenizer for Seam's tests: Hugging Face tokenizers as
// transformers.js implements them (@lenml/tokenizers).
//
// stdin: {"dir": "<folder with tokenizer.json>", "texts": [...],
//         "add_special_tokens": false, "decode": [[ids], ...],
//         "texts_special": [...] (encoded with add_special_tokens: true),
//         "bench": {"text": "...", "rounds": N}}
// stdout: {"ids": [[...]], "ids_special": [[...]], "decoded": ["..."], "bench": {"bytes": B, "seconds": [...]}}
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { TokenizerLoader } from "@lenml/tokenizers";

// Read standard input as a stream: readFileSync(0) fails with EAGAIN when
// the pipe is non-blocking.
const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const req = JSON.parse(Buffer.concat(chunks).toString("utf8"));
const tokenizerJSON = JSON.parse(readFileSync(join(req.dir, "tokenizer.json"), "utf8"));
let tokenizerConfig = {};
try {
  tokenizerConfig = JSON.parse(readFileSync(join(req.dir, "tokenizer_config.json"), "utf8"));
} catch (e) {
  if (e.code !== "ENOENT") throw e;
}
const tok = TokenizerLoader.fromPreTrained({ tokenizerJSON, tokenizerConfig });
const out = {};
if (req.texts) {
  const add = req.add_special_tokens ?? false;
  out.ids = req.texts.map((t) => Array.from(tok.encode(t, { add_special_tokens: add })));
}
if (req.texts_special) {
  out.ids_special = req.texts_special.map((t) => Array.from(tok.encode(t, { add_special_tokens: true })));
}
if (req.decode) {
  out.decoded = req.decode.map((ids) =>
    tok.decode(ids, { skip_special_tokens: true, clean_up_tokenization_spaces: false }),
  );
}
if (req.bench) {
  const text = req.bench.text;
  const seconds = [];
  tok.encode(text, { add_special_tokens: false }); // warm-up, discarded
  for (let i = 0; i < req.bench.rounds; i++) {
    const t0 = process.hrtime.bigint();
    tok.encode(text, { add_special_tokens: false });
    seconds.push(Number(process.hrtime.bigint() - t0) / 1e9);
  }
  out.bench = { bytes: Buffer.byteLength(text, "utf8"), seconds };
}
process.stdout.write(JSON.stringify(out));
