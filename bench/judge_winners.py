#!/usr/bin/env python3
"""Times the built-in winners under one or more judges, in one run.

    bench/judge_winners.py --ksearch A/ksearch[::PROBLEMS_DIR] [--ksearch B/ksearch ...] [--rounds 2]

Each winner is a template of a built-in problem at the point a tuning search
chose (docs/PERFORMANCE.md): the five fp32 problems', and the bf16 engine
ops' (their templates' defaults are the tuned points), one per dispatch
bucket where the problem has buckets; for a problem with shape cases every
timed case's median is printed too. For every judge binary given, and for `rounds`
interleaved rounds, the winner is judged with `ksearch eval --json` (against
the problem files in PROBLEMS_DIR when given: an older judge may not read
newer files); the
table printed last has the median time and status per judge, so a judge's
effect on honest kernels shows next to run-to-run noise (compare the rounds
of one judge with each other). A figure, never an assertion.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

# (problem, template, params) as chosen by the 2026-11-29 tuning runs.
WINNERS = [
    ("softmax", "cluster", {"CL": 8, "BLOCK": 128, "ITEMS": 16, "LD_CS": 0, "ST_CS": 0}),
    ("layernorm", "twopass", {"BLOCK": 256, "ITEMS": 16, "UNROLL": 4, "REVERSE": 1, "HINT": 1,
                              "ASYNC": 1}),
    ("matmul", "split", {"BM": 128, "BN": 128, "BK": 32, "WARPS_M": 2, "WARPS_N": 2, "STAGES": 3,
                         "SPLIT": 2, "FLUSH": 1}),
    ("conv2d", "tc3", {"R": 2, "MT": 2, "KC": 2, "STAGES": 4, "NCTA": 264}),
    ("conv2d_relu_maxpool", "tc3", {"R": 4, "MT": 2, "KC": 2, "STAGES": 4, "NCTA": 132}),
    # bf16 engine ops (2026-12-01 tuning; the defaults are those points): the
    # prefill and decode buckets of linear and attention, and the rest.
    ("linear", "tma", {}),
    ("linear", "stream", {}),
    ("attention", "wgmma", {}),
    ("attention", "flash_split", {}),
    # attention at the library policy (2026-12-01 templates): prefill and decode.
    ("attention_engine", "wgmma", {}),
    ("attention_engine", "cluster", {}),
    ("add_rmsnorm", "vector", {}),
    ("swiglu", "vector", {}),
    ("rope", "vector", {}),
]


def winner_files(problems_dir, problem, template, params, out_dir):
    with open(os.path.join(problems_dir, problem, "problem.json")) as f:
        spec = json.load(f)
    t = next(t for t in spec["templates"] if t["name"] == template)
    plan = t["plan"]
    if isinstance(plan, str):
        with open(os.path.join(problems_dir, problem, plan)) as f:
            plan = json.load(f)
    plan = dict(plan)
    merged = dict(plan.get("params", {}))
    for k, v in params.items():
        if k in merged:
            merged[k] = v
    plan["params"] = merged
    plan_path = os.path.join(out_dir, f"{problem}.plan.json")
    with open(plan_path, "w") as f:
        json.dump(plan, f)
    return os.path.join(problems_dir, problem, t["source"]), plan_path


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ksearch", action="append", required=True,
                        help="a ksearch binary, optionally ::PROBLEMS_DIR")
    parser.add_argument("--problems", default=os.path.join(os.path.dirname(__file__), "..", "problems"))
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--only", default="", help="comma-separated problem names")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for problem, template, params in WINNERS:
            if args.only and problem not in args.only.split(","):
                continue
            for r in range(args.rounds):
                for spec in args.ksearch:
                    binary, _, problems = spec.partition("::")
                    problems = problems or args.problems
                    source, plan = winner_files(problems, problem, template, params, tmp)
                    env = dict(os.environ, KSEARCH_PROBLEMS_DIR=os.path.abspath(problems))
                    cmd = [binary, "eval", os.path.join(problems, problem), "--source", source,
                           "--plan", plan, "--json"]
                    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
                    try:
                        e = json.loads(proc.stdout)
                    except json.JSONDecodeError:
                        e = {"status": "no-json(rc=%d): %s" % (proc.returncode, proc.stderr[-300:])}
                    median = (e.get("timing") or {}).get("median_ms")
                    speedup = (e.get("speedup") or {}).get("ratio")
                    cases = {c.get("name"): c.get("median_ms") for c in e.get("cases") or []
                             if c.get("median_ms")}
                    rows.append((f"{problem}/{template}", binary, r, e.get("status"), median, speedup,
                                 e.get("max_l2_rel_error"), cases, e.get("message", "")[:120]))
                    print(rows[-1], flush=True)
    fmt = lambda v, f: (f % v) if isinstance(v, (int, float)) else str(v)
    print("\n| winner | judge | round | status | median ms | speedup | L2 err | timed cases (ms) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for p, b, r, s, m, sp, l2, cases in (row[:8] for row in rows):
        per_case = ", ".join(f"{k} {fmt(v, '%.4f')}" for k, v in cases.items())
        print(f"| {p} | {b} | {r} | {s} | {fmt(m, '%.4f')} | {fmt(sp, '%.3f')} | {fmt(l2, '%.2g')} | {per_case} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
