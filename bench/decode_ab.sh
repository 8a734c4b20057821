#!/usr/bin/env bash
# The A/B measurements of docs/performance.md in one run: Seam against
# llama2.c's run.c and runq.c and against llama.cpp (node-llama-cpp), on
# synthetic stories110M-shaped models, each pair alternating its order over
# ROUNDS rounds with round 0 discarded as warm-up.
#
# usage: bench/decode_ab.sh [WORKDIR]
#   WORKDIR   models, binaries and results (default /tmp/seam-ab); models are
#             made once and reused
# environment:
#   LLAMA2C   a llama2.c checkout (https://github.com/karpathy/llama2.c); its
#             run.c and runq.c are built in WORKDIR with gcc -Ofast
#             -march=native -fopenmp. Unset: the llama2.c pairs are skipped.
#   ROUNDS    rounds per pair (default 6), STEPS decode steps (default 128),
#             PROMPT prefill tokens (default 128), THREADS (default: nproc)
#   ONLY      a regular expression: run only the pairs whose name matches
#
# Needs Go, gcc (for llama2.c), and node with reference/node_modules (for
# llama.cpp). Prints one markdown table per pair, then the summary.
set -euo pipefail

W=${1:-/tmp/seam-ab}
ROUNDS=${ROUNDS:-6}
STEPS=${STEPS:-128}
PROMPT=${PROMPT:-128}
T=${THREADS:-$(nproc)}
ONLY=${ONLY:-.}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$W"
cd "$W"

echo "building seam" >&2
(cd "$ROOT" && go build -o "$W/seam" ./cmd/seam)
SEAM="$W/seam"

SHAPE="--dim 768 --hidden 2048 --layers 12 --heads 12 --kv-heads 12 --vocab 32000 --seq-len 1024"
[ -f s110/model.bin ] || $SEAM synth --shape stories110m --out s110 >&2
[ -f s110/model-q8.bin ] || $SEAM bench llama2c-q8 --in s110/model.bin --out s110/model-q8.bin >&2
for q in f32 q8_0 q4_0 q4_k; do
	emb=q8_0
	[ $q = f32 ] && emb=f32
	[ -f s110-$q.gguf ] || $SEAM bench make-gguf --out s110-$q.gguf $SHAPE --matrices $q --embedding $emb >&2
done
[ -f s110-f32-same.bin ] || $SEAM bench to-llama2c --in s110-f32.gguf --out s110-f32-same.bin >&2

if [ -n "${LLAMA2C:-}" ]; then
	gcc -Ofast -march=native -fopenmp "$LLAMA2C/run.c" -lm -o run
	gcc -Ofast -march=native -fopenmp "$LLAMA2C/runq.c" -lm -o runq
fi

calc() { awk "BEGIN { printf \"%.6f\", $1 }"; }
num() { sed -n "s/.*\"$1\":\([0-9.e+-]*\).*/\1/p"; }

BW1=$($SEAM bench bandwidth --threads 1 --json | num bandwidth_gb_s)
BWT=$($SEAM bench bandwidth --threads "$T" --json | num bandwidth_gb_s)
echo "read bandwidth: $BW1 GB/s (1 thread), $BWT GB/s ($T threads)"
bw() { if [ "$1" = 1 ]; then echo "$BW1"; else echo "$BWT"; fi; }

# Each command prints one number: tokens per second.
seam_decode() { $SEAM bench decode --model "$1" --threads "$2" -n "$STEPS" --bandwidth "$(bw "$2")" --json | num tok_s; }
seam_prefill() { $SEAM bench prefill --model "$1" --threads "$2" --tokens "$PROMPT" --bandwidth "$(bw "$2")" --json | num tok_s; }
# llama2c binary model threads: greedy, timing every position after the first.
# With random tied weights greedy decoding repeats the last token, and run.c
# stops at a BOS, so the prompt must not end in one: "Once upon a time".
llama2c() {
	OMP_NUM_THREADS=$3 ./"$1" "$2" -z s110/tokenizer.bin -n $((STEPS + 9)) -t 0 -i "Once upon a time" 2>&1 >/dev/null | sed -n 's/achieved tok\/s: //p'
}
llamacpp() { # mode model threads
	node "$ROOT/reference/llamacpp-bench.mjs" --mode "$1" --model "$2" --threads "$3" --steps "$STEPS" --tokens "$PROMPT" | num tok_s
}

SUMMARY=""
# ab NAME "A command" "B command": ROUNDS alternating rounds; the ratio is
# mean(A) / mean(B) over rounds 1.. (round 0 is warm-up).
ab() {
	local name=$1 a=$2 b=$3 sa=0 sb=0 n=0
	[[ $name =~ $ONLY ]] || return 0
	echo
	echo "### $name"
	echo "A: $a"
	echo "B: $b"
	echo
	echo "| round | A tok/s | B tok/s |"
	echo "|---|---|---|"
	for r in $(seq 0 $((ROUNDS - 1))); do
		local x y
		if [ $((r % 2)) = 0 ]; then
			x=$(eval "$a")
			y=$(eval "$b")
		else
			y=$(eval "$b")
			x=$(eval "$a")
		fi
		if [ "$r" = 0 ]; then
			echo "| 0 (warm-up) | $x | $y |"
			continue
		fi
		echo "| $r | $x | $y |"
		sa=$(calc "$sa + $x")
		sb=$(calc "$sb + $y")
		n=$((n + 1))
	done
	local ma mb
	ma=$(calc "$sa / $n")
	mb=$(calc "$sb / $n")
	printf "| mean | %.2f | %.2f |\n\nA / B = %.3f\n" "$ma" "$mb" "$(calc "$ma / $mb")"
	SUMMARY+=$(printf "%-56s A %8.2f  B %8.2f  A/B %.3f" "$name" "$ma" "$mb" "$(calc "$ma / $mb")")$'\n'
}

if [ -n "${LLAMA2C:-}" ]; then
	ab "decode f32, $T threads: Seam / run.c" "seam_decode s110/model.bin $T" "llama2c run s110/model.bin $T"
	ab "decode q8, $T threads: Seam / runq.c" "seam_decode s110/model-q8.bin $T" "llama2c runq s110/model-q8.bin $T"
fi
ab "decode f32: GGUF / llama2.c, same weights" "seam_decode s110-f32.gguf $T" "seam_decode s110-f32-same.bin $T"
for q in q8_0 q4_0; do
	ab "decode $q, 1 thread: Seam / llama.cpp" "seam_decode s110-$q.gguf 1" "llamacpp decode s110-$q.gguf 1"
done
for q in q4_0 q4_k; do
	ab "decode $q, $T threads: Seam / llama.cpp" "seam_decode s110-$q.gguf $T" "llamacpp decode s110-$q.gguf $T"
done
for q in f32 q8_0 q4_0; do
	ab "prefill $PROMPT $q, $T threads: Seam / llama.cpp" "seam_prefill s110-$q.gguf $T" "llamacpp prefill s110-$q.gguf $T"
done
for m in s110/model.bin s110-q8_0.gguf s110-q4_0.gguf; do
	ab "decode $m: Seam $T threads / 1 thread" "seam_decode $m $T" "seam_decode $m 1"
done
# llama.cpp's per-token cost outside the arithmetic: a model of 2 tiny layers.
[ -f tiny.gguf ] || $SEAM bench make-gguf --out tiny.gguf --dim 64 --hidden 96 --heads 4 --kv-heads 2 --vocab 300 --layers 2 --seq-len 1024 >&2
ab "decode tiny: llama.cpp $T threads / 1 thread (overhead)" "llamacpp decode tiny.gguf $T" "llamacpp decode tiny.gguf 1"

echo
echo "## summary ($(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs))"
echo "read bandwidth: $BW1 GB/s (1 thread), $BWT GB/s ($T threads)"
printf "%s" "$SUMMARY"
