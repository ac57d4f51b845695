#!/usr/bin/env bash
# attention_engine on one GPU (issue 30), in one call of under 4 minutes on
# an H200: judges the default of each template (wgmma for prefill, split and
# cluster for decoding) at every shape case, then a handful of other points
# of each at the cases of its own dispatch bucket, with the bundle's
# `ksearch eval --json` (its cuDNN baseline timed at each case in the same
# process); times PyTorch's flash and cuDNN SDPA backends at the same cases
# (bench/problems_vs_torch.py's method); prints a compact table last.
#
#   bench/attention_engine_gpu.sh [BUNDLE]      from the repository root;
#                                               BUNDLE defaults to .gpu-bundle
#                                               (scripts/gpu-bundle.sh)
#
#   ATTN_POINTS="label;label;..."  only these points, in this order (a label
#                                  may repeat: a second figure of it in the
#                                  same call); ATTN_TORCH=0 skips PyTorch.
#
# Scratch (problem copies, plans, each evaluation's JSON) goes to
# /tmp/attention_engine_gpu; the table and every evaluation's JSON in one
# file (evaluations.json) also to $OUT when it is set. Asserts nothing.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bundle=$(cd "${1:-$root/.gpu-bundle}" && pwd)
work=/tmp/attention_engine_gpu
rm -rf "$work"
mkdir -p "$work"
export KSEARCH_PROBLEMS_DIR=$root/problems
export KSEARCH_CACHE_DIR=${KSEARCH_CACHE_DIR:-/tmp/ksearch-cache}
export KSEARCH_WORKER=${KSEARCH_WORKER:-$bundle/ksearch-worker}
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader || true

python3 - "$root" "$bundle/ksearch" "$work" "${OUT:-}" <<'PY'
import copy, json, os, shutil, subprocess, sys, time

root, ksearch, out, keep = sys.argv[1:5]
problem_dir = os.path.join(root, "problems", "attention_engine")
spec = json.load(open(os.path.join(problem_dir, "problem.json")))
templates = {t["name"]: t for t in spec["templates"]}
started = time.time()


def bucket_problem(name, cases):
    """A copy of the problem holding only `cases` (no dispatch), so that a
    point is judged at its own bucket's cases only."""
    folder = os.path.join(out, "problem_" + name)
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(problem_dir, folder)
    p = copy.deepcopy(spec)
    for k in [p["reference"], p["reference_fp32"], p["start"]] + p["templates"]:
        k["source"] = os.path.normpath(os.path.join(problem_dir, k["source"]))  # ../attention/… stays found
    p["shapes"] = [c for c in p["shapes"] if c["name"] in cases]
    p.pop("dispatch", None)
    json.dump(p, open(os.path.join(folder, "problem.json"), "w"), indent=1)
    return folder


PREFILL = bucket_problem("prefill", {"prefill", "long", "odd", "chunk"})
DECODE = bucket_problem("decode", {"decode", "decode16", "decode_32k", "decode16_32k", "decode_2k",
                                   "decode16_2k", "odd_decode"})
FULL = problem_dir

# (label, problem folder, template, param overrides). The defaults at every
# case; the other points at their bucket's cases.
POINTS = [
    ("wgmma default", FULL, "wgmma", {}),
    ("cluster default", FULL, "cluster", {}),
    ("split default", FULL, "split", {}),
    ("wgmma prefill bucket", PREFILL, "wgmma", {}),
    ("wgmma EPI=0", PREFILL, "wgmma", {"EPI": 0}),
    ("wgmma SCHED=0", PREFILL, "wgmma", {"SCHED": 0}),
    ("wgmma QBUF=2", PREFILL, "wgmma", {"QBUF": 2}),
    ("wgmma STAGES=3 EPI=0", PREFILL, "wgmma", {"STAGES": 3, "EPI": 0}),  # STAGES 3 leaves no room for EPI 1
    ("wgmma CTAS=1e6", PREFILL, "wgmma", {"CTAS": 1000000}),
    ("wgmma SECT=8", PREFILL, "wgmma", {"SECT": 8}),
    ("wgmma SECT=64", PREFILL, "wgmma", {"SECT": 64}),
    ("wgmma BN=64 STAGES=4", PREFILL, "wgmma", {"BN": 64, "STAGES": 4}),
    ("cluster STAGES=3", DECODE, "cluster", {"STAGES": 3}),
    ("cluster CL=8", DECODE, "cluster", {"CL": 8}),
    ("cluster STAGES=4", DECODE, "cluster", {"STAGES": 4}),
    ("cluster CL=2", DECODE, "cluster", {"CL": 2}),
    ("cluster BN=128", DECODE, "cluster", {"BN": 128}),
    ("split NSPLIT=16", DECODE, "split", {"NSPLIT": 16}),
    ("split NSPLIT=4 STAGES=4", DECODE, "split", {"NSPLIT": 4, "STAGES": 4}),
]


def evaluate(i, label, problem, template, params, limit_s):
    t = templates[template]
    plan = copy.deepcopy(t["plan"])
    plan["params"].update(params)
    if template == "wgmma" and plan["params"].get("EPI") == 0:  # the plan's o map becomes the pointer
        args = plan["launches"][0]["args"]
        args[:] = ["o" if isinstance(a, dict) and a.get("tensor_map") == "o" else a for a in args]
    plan_file = os.path.join(out, f"plan_{i:02d}.json")
    json.dump(plan, open(plan_file, "w"))
    cmd = [ksearch, "eval", problem, "--source", os.path.join(problem_dir, t["source"]), "--plan", plan_file,
           "--json", "--max-timing-seconds", "1"]
    begin = time.time()
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=limit_s)
        text = done.stdout.strip().splitlines()
        result = json.loads(text[-1]) if text else {"status": "error", "message": done.stderr[-400:]}
    except subprocess.TimeoutExpired:
        result = {"status": "script_timeout", "message": f"no answer within {limit_s:.0f} s"}
    except ValueError:
        result = {"status": "error", "message": (done.stderr or done.stdout)[-400:]}
    result["label"], result["wall_s"] = label, time.time() - begin
    json.dump(result, open(os.path.join(out, f"eval_{i:02d}.json"), "w"), indent=1)
    print(f"[{time.time() - started:5.0f} s] {label}: {result.get('status')} ({result['wall_s']:.0f} s) "
          f"{result.get('message', '')[:300]}", flush=True)
    return result


# PyTorch's flash and cuDNN backends at the timed cases (problems_vs_torch's method), first: its
# figures frame the rest, and it takes a bounded ~30 s.
torch_rows = []
try:
    if os.environ.get("ATTN_TORCH", "1") == "0":
        raise RuntimeError("skipped (ATTN_TORCH=0)")
    sys.path.insert(0, os.path.join(root, "bench"))
    import problems_vs_torch as yard
    torch_rows = yard.attention_backends(yard.attention_cases("attention_engine"))
except Exception as e:  # noqa: BLE001
    print(f"PyTorch comparison failed: {e}", flush=True)

# The points in order of importance, while the call's 4 minutes last (225 s for the evaluations).
# ATTN_POINTS="label;label;..." runs only those points (each may be repeated: a second figure of the
# same point in the same call), ATTN_TORCH=0 skips PyTorch.
only = [x.strip() for x in os.environ.get("ATTN_POINTS", "").split(";") if x.strip()]
if only:
    by_label = {p[0]: p for p in POINTS}
    missing = [x for x in only if x not in by_label]
    if missing:
        sys.exit(f"attention_engine_gpu: no point named {missing} (points: {sorted(by_label)})")
    POINTS = [by_label[x] for x in only]
results = []
for i, (label, problem, template, params) in enumerate(POINTS):
    left = 225 - (time.time() - started)
    if left < 20:
        print(f"skipped {label}: {left:.0f} s left", flush=True)
        continue
    results.append(evaluate(i, label, problem, template, params, min(120, left)))

lines = ["", f"## attention_engine on {results[0].get('device', {}).get('name', '?') if results else '?'} "
         f"({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}); ms, (x cuDNN baseline) or [% of the bandwidth floor]",
         ""]
names = [c["name"] for c in spec["shapes"] if c.get("timed", True)]
lines.append("| point | status | " + " | ".join(names) + " |")
lines.append("| --- | --- |" + " --- |" * len(names))
for r in results:
    cases = {c["name"]: c for c in r.get("cases", [])}
    cells = []
    for n in names:
        c = cases.get(n)
        if not c or c.get("median_ms") is None:
            cells.append("—" if not c else c.get("status", "—"))
            continue
        cell = f"{c['median_ms']:.4f}"
        if n.startswith("decode") and c.get("floor_ms"):
            cell += f" [{100 * c['floor_ms'] / c['median_ms']:.0f}%]"
        if c.get("speedup") is not None:
            cell += f" ({c['speedup']:.2f}x)"
        if c.get("status") != "ok":
            cell += f" {c.get('status')}"
        cells.append(cell)
    lines.append(f"| {r['label']} | {r.get('status')} | " + " | ".join(cells) + " |")
base = {}
for r in results:
    for c in r.get("cases", []):
        if c.get("baseline_median_ms") is not None:
            base.setdefault(c["name"], c["baseline_median_ms"])
lines.append("| cuDNN (judge's baseline) | | " + " | ".join(f"{base[n]:.4f}" if n in base else "—" for n in names) + " |")
if torch_rows:
    lines += ["", "| PyTorch 2.x, same call | shape | flash backend | cuDNN backend | max abs(flash - cuDNN) |",
              "| --- | --- | --- | --- | --- |"]
    lines += ["| " + " | ".join(row) + " |" for row in torch_rows]
lines.append("")
lines.append("Closest to its bound, per point: case, L2 error (worst input set) / allowed")
for r in results:
    worst = max((c for c in r.get("cases", []) if c.get("max_l2_rel_error") and c.get("allowed_l2_rel_error")),
                key=lambda c: c["max_l2_rel_error"] / c["allowed_l2_rel_error"], default=None)
    if worst:
        lines.append(f"  {r['label']}: {worst['name']} {worst['max_l2_rel_error']:.2e} / {worst['allowed_l2_rel_error']:.2e}")
    bad = [f"{c['name']}: {c.get('message', '')[:160]}" for c in r.get("cases", []) if c.get("status") != "ok"]
    for b in bad:
        lines.append(f"    {b}")
lines.append(f"total {time.time() - started:.0f} s")
text = "\n".join(lines)
open(os.path.join(out, "table.md"), "w").write(text + "\n")
if keep:
    os.makedirs(keep, exist_ok=True)
    shutil.copy(os.path.join(out, "table.md"), keep)
    json.dump(results, open(os.path.join(keep, "evaluations.json"), "w"), indent=1)
print(text)
PY
