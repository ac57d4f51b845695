#!/usr/bin/env bash
# The GPU run of the fused projections and the decode layout for K = 14336
# (linear_swiglu, linear_residual, linear_qkv_rope; linear's streamk, and tma
# with and without its tail strips): on the GPU host, from the repository root, with the bundle of
# scripts/gpu-bundle.sh in .gpu-bundle (or $KSEARCH_BUNDLE):
#
#   bench/fused_gpu.sh [OUT_DIR]          (default: fused-gpu; about 6 minutes)
#
# 1. Judges each fused problem's template defaults and a few other points
#    with the bundle's `ksearch eval` at every shape case, the baseline (the
#    GEMM sequence, or cuBLASLt for linear) timed in the same evaluation;
#    linear's decode templates also on a copy of linear holding only the down
#    projection's decode shapes (N 4096, K 14336), and linear_residual's on a
#    copy holding only the o projection's (N = K = 4096).
# 2. Runs bench/layer_vs_torch.py on the bundle's engine example (its ops
#    tuned on first use, $KSEARCH_LAYER_TUNE_SECONDS (20) s each, into
#    OUT_DIR/layer.db; 5 s left the decode buckets with the first template
#    judged, not a decode template: the layer read 0.75x PyTorch's graph).
# 3. Prints one compact table of everything last.
# Each evaluation is kept as OUT_DIR/NAME.json (ksearch eval --json), its
# plan as OUT_DIR/plans/NAME.json. Figures only: nothing here asserts a time.
set -uo pipefail
root=$(pwd)
bundle=${KSEARCH_BUNDLE:-$root/.gpu-bundle}
out=${1:-$root/fused-gpu}
ks=$bundle/ksearch
if [ ! -f "$root/problems/linear_swiglu/problem.json" ]; then
  echo "fused_gpu: run from the repository root (problems/linear_swiglu not found)" >&2
  exit 2
fi
if [ ! -x "$ks" ] || [ ! -x "$bundle/example_engine_autotune" ]; then
  echo "fused_gpu: $bundle lacks ksearch or example_engine_autotune: build it with scripts/gpu-bundle.sh" >&2
  exit 2
fi
export KSEARCH_PROBLEMS_DIR=$root/problems
export KSEARCH_CACHE_DIR=${KSEARCH_CACHE_DIR:-/tmp/ksearch-cache}
mkdir -p "$out/plans"
started=$SECONDS
: > "$out/points.txt"

# decode_copy NAME PROBLEM K OVERRIDES: a copy of a built-in problem judged
# only at decode shapes (M 1 and 16 over N 4096 and K, a ragged M 7 × N 4104
# checked), holding only its decode templates `stream` and `streamk`, their
# default params updated from OVERRIDES ({"template": {"PARAM": value}}) and
# their sources found from the copy's folder; prints the copy's folder.
decode_copy() {
  local dir=$out/$1
  rm -rf "$dir" && cp -r "$root/problems/$2" "$dir"
  python3 - "$dir/problem.json" "$1" "$root/problems/$2" "$3" "$4" <<'PY'
import json, os, sys
path, name, origin, k, overrides = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), json.loads(sys.argv[5])
p = json.load(open(path))
p["name"] = name
p["dims"] = {"M": 16, "N": 4096, "K": k}
p["shapes"] = [{"name": "decode_1", "dims": {"M": 1}, "weight": 1},
               {"name": "decode_16", "dims": {"M": 16}, "weight": 1},
               {"name": "decode_ragged", "dims": {"M": 7, "N": 4104}, "timed": False}]
p.pop("dispatch", None)
p["templates"] = [t for t in p["templates"] if t["name"] in ("stream", "streamk")]
for t in p["templates"]:
    t["plan"]["params"].update(overrides.get(t["name"], {}))
    t["source"] = os.path.normpath(os.path.join(origin, t["source"]))  # linear_residual's stream is linear's
json.dump(p, open(path, "w"), indent=1)
PY
  echo "$dir"
}

# linear at the down projection's decode shapes, at defaults valid for
# K = 14336 (stream's MODE 1 needs K == CW * XK: its MODE 0 at 32 rows per CTA
# instead); linear_residual at the o projection's (N = K = 4096: 32 MiB of W,
# the op furthest from a plain read of its bytes).
down=$(decode_copy linear_down linear 14336 '{"stream": {"MODE": 0, "STAGES": 4, "RPC": 32}, "streamk": {"RPC": 32}}')
oproj=$(decode_copy residual_o linear_residual 4096 '{}')

# point NAME PROBLEM_DIR TEMPLATE [PARAM=VALUE ...]: the template's plan with
# its default params overridden, judged at every case of the problem.
point() {
  local name=$1 dir=$2 template=$3
  shift 3
  local src
  src=$(python3 - "$dir/problem.json" "$template" "$out/plans/$name.json" "$@" <<'PY'
import json, os, sys
path, template, plan_path, overrides = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
t = next(t for t in json.load(open(path))["templates"] if t["name"] == template)
plan = t["plan"]
for o in overrides:
    key, value = o.split("=")
    plan["params"][key] = int(value)
json.dump(plan, open(plan_path, "w"))
print(os.path.join(os.path.dirname(path), t["source"]))
PY
)
  echo "$name $*" >> "$out/points.txt"
  printf '[%4ds] %-28s %s %s %s\n' $((SECONDS - started)) "$name" "$(basename "$dir")" "$template" "$*"
  timeout 240 "$ks" eval "$dir" --source "$src" --plan "$out/plans/$name.json" --json \
      --max-timing-seconds 0.3 > "$out/$name.json" 2> "$out/$name.log" || echo "  (ksearch eval exited $?)"
}

P=$root/problems
point residual_tma            "$P/linear_residual" tma
point residual_tma_bn192      "$P/linear_residual" tma BN=192 STAGES=4
point residual_streamk        "$P/linear_residual" streamk
point residual_stream         "$P/linear_residual" stream
point swiglu_tma              "$P/linear_swiglu" tma
point swiglu_streamk          "$P/linear_swiglu" streamk
point swiglu_streamk_rpc112   "$P/linear_swiglu" streamk RPC=112
point qkv_rope_tma            "$P/linear_qkv_rope" tma
point qkv_rope_streamk        "$P/linear_qkv_rope" streamk
point linear_tma              "$P/linear" tma
point linear_tma_notail       "$P/linear" tma TAIL=0
point linear_streamk          "$P/linear" streamk
point down_streamk            "$down" streamk
point down_streamk_cw4        "$down" streamk CW=4 XK=512
point down_stream_mode0       "$down" stream
point o_streamk               "$oproj" streamk
point o_streamk_rpc16_s3      "$oproj" streamk RPC=16 STAGES=3
point o_streamk_cw16_s3       "$oproj" streamk CW=16 XK=256 STAGES=3
point o_streamk_rpc16_s2      "$oproj" streamk RPC=16 STAGES=2
point o_stream                "$oproj" stream
point o_stream_mode1          "$oproj" stream MODE=1 RPC=32 STAGES=3

printf '[%4ds] layer_vs_torch\n' $((SECONDS - started))
timeout 360 python3 "$root/bench/layer_vs_torch.py" --engine "$bundle/example_engine_autotune" \
    --db "$out/layer.db" --tune-seconds "${KSEARCH_LAYER_TUNE_SECONDS:-20}" --repeats 20 --out "$out/layer.json" > "$out/layer.log" 2>&1 ||
  echo "  (layer_vs_torch exited $?; see $out/layer.log)"

python3 - "$out" $((SECONDS - started)) <<'PY'
import json, os, sys
out, seconds = sys.argv[1], sys.argv[2]
def num(v):
    return v if isinstance(v, (int, float)) else float("nan")
print(f"\nfused_gpu: {seconds} s. Each row one ksearch eval (all cases); per timed case: "
      "ms (baseline ms, baseline / ms)")
print("| point | params | status | baseline | timed cases |")
print("| --- | --- | --- | --- | --- |")
for line in open(os.path.join(out, "points.txt")):
    name, _, params = line.strip().partition(" ")
    try:
        text = open(os.path.join(out, name + ".json")).read()
        try:
            e = json.loads(text)
        except ValueError:  # anything printed before the evaluation: its last JSON line
            e = json.loads([ln for ln in text.splitlines() if ln.startswith("{")][-1])
    except (OSError, ValueError, IndexError):
        print(f"| {name} | {params} | no result ({name}.log) | | |")
        continue
    status = e.get("status", "?")
    if status != "ok":
        status += ": " + e.get("message", "")[:120].replace("|", "/")
    cases, baseline = [], ""
    for c in e.get("cases", []):
        if not c.get("timed"):
            if c.get("status") != "ok":
                cases.append(f"{c['name']} {c.get('status')}")
            continue
        baseline = baseline or c.get("baseline", "")
        ms, base = num(c.get("median_ms")), num(c.get("baseline_median_ms"))
        cases.append(f"{c['name']} {ms:.4f} ({base:.4f}, {num(c.get('speedup')):.3f}x)")
    print(f"| {name} | {params or 'default'} | {status} | {baseline} | {'; '.join(cases)} |")
try:
    layer = json.load(open(os.path.join(out, "layer.json")))
except (OSError, ValueError):
    print("\nlayer_vs_torch: no result (layer.log)")
    sys.exit(0)
print(f"\nDecoder layer, {layer['device']}, torch {layer['torch']}, median of {layer['repeats']}:")
print("| call | PyTorch eager | PyTorch graph | engine | vs graph | out err torch / engine | residual err torch / engine |")
print("| --- | --- | --- | --- | --- | --- | --- |")
for r in layer["rows"]:
    graph = r["torch_graph_ms"]
    vs = f"{graph / r['engine_ms']:.2f}x" if graph else "n/a"
    print(f"| {r['mode']} | {r['torch_eager_ms']:.4f} | {graph or float('nan'):.4f} | {r['engine_ms']:.4f} | {vs} | "
          f"{r['err_out_torch']:.2e} / {r['err_out_engine']:.2e} | {r['err_res_torch']:.2e} / {r['err_res_engine']:.2e} |")
for r in layer["rows"]:
    print(f"  {r['mode']} ops (ms): " + ", ".join(f"{k} {v:.4f}" for k, v in r["engine_ops_ms"].items()))
PY
