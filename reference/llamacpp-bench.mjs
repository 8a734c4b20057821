// llama.cpp (through node-llama-cpp 3.21.1) as the reference for Seam's
// decode and prefill speed. The workloads mirror `seam bench decode` and
// `seam bench prefill` (bench/decode.go, bench/prefill.go):
//
//   decode:  token 1, then greedy (temperature 0) decoding; the first
//            --warmup generated tokens are not timed, then --steps are.
//   prefill: token 1 then the same pseudo-random ids as Seam's
//            bench.PromptTokens (a 32-bit LCG), --tokens long, evaluated as
//            one batch into an empty sequence (no logits generated);
//            --warmup untimed runs, then --reps timed ones.
//
// usage: node llamacpp-bench.mjs --model M.gguf --mode decode|prefill
//            [--threads N] [--steps N] [--warmup N] [--tokens T] [--reps R]
// prints one JSON object: {"engine": "llama.cpp", "mode", "threads",
// "tokens", "seconds", "tok_s", "ms_per_token"}.
//
// Timing includes node-llama-cpp's own per-token cost (its JavaScript
// generator, the native call, and ggml's thread-pool wake-ups), which is
// large next to a small model's arithmetic at 2 threads. docs/performance.md
// says how it is accounted for: the same script on a tiny model measures it.
import {getLlama} from "node-llama-cpp";

function args() {
    const a = {mode: "decode", threads: 0, steps: 128, warmup: 8, tokens: 128, reps: 5};
    const argv = process.argv.slice(2);
    for (let i = 0; i < argv.length; i += 2) {
        const k = argv[i].replace(/^--/, ""), v = argv[i + 1];
        if (v === undefined || !(k in a || k === "model"))
            throw new Error(`unknown or incomplete flag ${argv[i]}`);
        a[k] = k === "model" || k === "mode" ? v : Number(v);
    }
    if (!a.model)
        throw new Error("--model is required");
    if (a.mode !== "decode" && a.mode !== "prefill")
        throw new Error(`--mode ${a.mode}: want decode or prefill`);
    return a;
}

// promptTokens is bench.PromptTokens: 1, then (LCG state >> 8) mod vocab.
function promptTokens(n, vocab) {
    const t = [];
    let state = 12345;
    for (let i = 0; i < n; i++) {
        if (i === 0) {
            t.push(1 % vocab);
            continue;
        }
        state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
        t.push((state >>> 8) % vocab);
    }
    return t;
}

const a = args();
const llama = await getLlama({gpu: false, build: "never", logLevel: "error", maxThreads: 0});
const threads = a.threads > 0 ? a.threads : llama.cpuMathCores;
const model = await llama.loadModel({modelPath: a.model, gpuLayers: 0});
let result;
if (a.mode === "decode") {
    const context = await model.createContext({contextSize: 1 + a.warmup + a.steps + 8, threads, batchSize: 8});
    const seq = context.getSequence();
    let n = 0, start = 0;
    for await (const _ of seq.evaluate([1], {temperature: 0})) {
        n++;
        if (n === a.warmup)
            start = performance.now();
        if (n === a.warmup + a.steps)
            break;
    }
    const sec = (performance.now() - start) / 1000;
    result = {steps: a.steps, sec};
    await context.dispose();
} else {
    const vocab = model.fileInfo.metadata?.tokenizer?.ggml?.tokens?.length;
    if (!(vocab > 0))
        throw new Error(`${a.model}: cannot tell the vocabulary size from tokenizer.ggml.tokens`);
    const tokens = promptTokens(a.tokens, vocab);
    const context = await model.createContext({contextSize: a.tokens + 8, threads, batchSize: a.tokens});
    const seq = context.getSequence();
    const run = async () => {
        await seq.clearHistory();
        await seq.evaluateWithoutGeneratingNewTokens(tokens);
    };
    for (let i = 0; i < a.warmup; i++)
        await run();
    const start = performance.now();
    for (let i = 0; i < a.reps; i++)
        await run();
    const sec = (performance.now() - start) / 1000;
    result = {steps: a.tokens * a.reps, sec};
    await context.dispose();
}
await model.dispose();
await llama.dispose();
process.stdout.write(JSON.stringify({
    engine: "llama.cpp", mode: a.mode, threads, tokens: result.steps, seconds: result.sec,
    tok_s: result.steps / result.sec, ms_per_token: 1000 * result.sec / result.steps,
}) + "\n");
