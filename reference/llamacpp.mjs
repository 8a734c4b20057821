// llama.cpp (through node-llama-cpp) as the reference engine for model
// parity: teacher-forced next-token distributions and greedy continuations.
//
// stdin: {"threads": N, "jobs": [{"model": PATH, "tokens": [ids], "topK": K,
//          "greedy": G, "kvF32": bool}]}
// stdout: {"results": [{"top": [{"ids": [...], "probs": [...]}, ...],
//                       "greedy": [ids]}]}
//
// top[i] describes the next token after tokens[0..i]: llama.cpp's K most
// likely ids, most likely first, with their probabilities renormalised over
// those K (the sampler chain is top-k(K), then temperature 1, so the
// probabilities are the softmax of the K largest logits). greedy continues
// tokens with G argmax steps.
import {getLlama} from "node-llama-cpp";

const input = JSON.parse(await new Promise((resolve, reject) => {
    let data = "";
    process.stdin.setEncoding("utf8");
    process.stdin.on("data", (c) => data += c);
    process.stdin.on("end", () => resolve(data));
    process.stdin.on("error", reject);
}));

const llama = await getLlama({gpu: false, build: "never", logLevel: "error"});
const results = [];
for (const job of input.jobs) {
    const t0 = Date.now();
    const model = await llama.loadModel({modelPath: job.model});
    if (process.env.SEAM_TIMING) console.error("load", Date.now() - t0);
    const kv = job.kvF32 ? {experimentalKvCacheKeyType: "F32", experimentalKvCacheValueType: "F32"} : {};
    const n = job.tokens.length;
    const context = await model.createContext({
        contextSize: n + job.greedy + 8, batchSize: n, threads: input.threads, ...kv,
    });
    const seq = context.getSequence();
    const topOptions = {temperature: 1, topK: job.topK, topP: 1, minP: 0, seed: 1};
    const evaluated = await seq.controlledEvaluate(job.tokens.map((t) =>
        [t, {generateNext: {probabilities: true, options: topOptions}}]));
    if (process.env.SEAM_TIMING) console.error("eval", Date.now() - t0);
    const top = evaluated.map((r) => {
        const entries = [...r.next.probabilities.entries()];
        return {ids: entries.map((e) => e[0]), probs: entries.map((e) => e[1])};
    });
    const greedy = [];
    let next = top[n - 1].ids[0];
    for (let i = 0; i < job.greedy; i++) {
        greedy.push(next);
        if (i + 1 === job.greedy)
            break;
        const [r] = await seq.controlledEvaluate([[next, {generateNext: {token: true}}]]);
        next = r.next.token;
    }
    if (process.env.SEAM_TIMING) console.error("greedy", Date.now() - t0);
    results.push({top, greedy});
    await context.dispose();
    await model.dispose();
}
process.stdout.write(JSON.stringify({results}));
await llama.dispose();
