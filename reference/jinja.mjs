// Renders chat templates with @huggingface/jinja, the reference for Seam's
// chat package, and optionally tokenizes the result with @lenml/tokenizers.
//
// Usage: node jinja.mjs [TOKENIZER_DIR] < request.json
//
// request.json: {"template": "...", "cases": [{"messages": [...],
//   "add_generation_prompt": bool, "bos_token": "...", "eos_token": "..."}]}
// Output (one JSON document): {"results": [{"text": "..."} | {"error": "..."}]},
// each result with "ids" too when TOKENIZER_DIR (holding tokenizer.json and
// tokenizer_config.json) is given: encode(text, {add_special_tokens: false}).
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Template } from "@huggingface/jinja";

// Read standard input as a stream: readFileSync(0) fails with EAGAIN when
// the pipe is non-blocking.
const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const input = JSON.parse(Buffer.concat(chunks).toString("utf8"));
let tokenizer = null;
if (process.argv[2]) {
	const { TokenizerLoader } = await import("@lenml/tokenizers");
	const dir = process.argv[2];
	tokenizer = TokenizerLoader.fromPreTrained({
		tokenizerJSON: JSON.parse(readFileSync(join(dir, "tokenizer.json"), "utf8")),
		tokenizerConfig: JSON.parse(readFileSync(join(dir, "tokenizer_config.json"), "utf8")),
	});
}

const template = new Template(input.template);
const results = input.cases.map((c) => {
	try {
		const text = template.render(c);
		const r = { text };
		if (tokenizer) {
			r.ids = tokenizer.encode(text, { add_special_tokens: false });
		}
		return r;
	} catch (e) {
		return { error: String(e && e.message ? e.message : e) };
	}
});
process.stdout.write(JSON.stringify({ results }));
