#!/usr/bin/env python3
"""Searches on every built-in problem with a fixed budget and reads the result
against PyTorch, in one run on one GPU (issues 7 and 9).

For each problem (rope included: its PyTorch side is the rotate_half formula
written back in place with copy_, see problems_vs_torch.rope_eager): PyTorch
eager and torch.compile are timed on the same shapes
(TF32 off, CUDA events, L2 flushed, 30 repetitions, median: the method of
bench/problems_vs_torch.py); then `ksearch run PROBLEM --strategy S
--budget-minutes M --json` runs each strategy asked for (default: tune, and
branch with the offline catalog generator). ksearch's summary gives the best
kernel's median time, its ratio to the library baseline (cuBLAS/cuDNN, timed
by the same evaluator in the same run; the reference where no library does
the op), its roofline fraction, its L2 relative error vs the fp64 reference
(worst input set), the parameters chosen, candidates judged and wall time.
Prints a markdown table and writes every JSON summary to --out; for a
problem with shape cases a second table gives each timed case's time and
library ratio for the overall best kernel and for its dispatch bucket's best.
Asserts nothing.

  python3 bench/search_vs_torch.py --ksearch .gpu-bundle/ksearch \
      [--budget-minutes 1] [--strategies tune,branch] [--db bench.db] [PROBLEM ...]
"""

import argparse
import datetime
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import problems_vs_torch as yard  # noqa: E402


def run_search(args, problem, strategy):
    cmd = [args.ksearch, "run", problem, "--strategy", strategy, "--rounds", "0",
           "--budget-minutes", str(args.budget_minutes), "--json", "--db", args.db,
           "--seed", str(args.seed)]
    if strategy == "tune":
        cmd += ["--batch", str(args.batch), "--tune-method", args.tune_method]
    if strategy == "branch":
        cmd += ["--seeds", "2", "--ideas", "4", "--branches", "2"]
    if args.gpus:
        cmd += ["--gpus", args.gpus]
    start = time.time()
    done = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.time() - start
    try:
        summary = json.loads(done.stdout)
    except json.JSONDecodeError:
        sys.stderr.write(f"{problem} {strategy}: exit {done.returncode}\n{done.stderr[-3000:]}\n")
        return None, wall
    return summary, wall


def fmt(value, pattern="{:.3f}"):
    return "—" if value is None else pattern.format(value)


def case_table(dump):
    """For problems with shape cases: each timed case's figures for the
    overall best kernel and for its dispatch bucket's best kernel
    (`best_per_bucket`), with the library baseline the judge timed at that
    case in the same run."""
    rows = []
    for key, summary in dump.items():
        best = (summary or {}).get("best") or {}
        cases = best.get("cases") or []
        if not cases:
            continue
        by_case = {}
        for bucket in summary.get("best_per_bucket") or []:
            for c in (bucket.get("evaluation") or {}).get("cases") or []:
                by_case[c["name"]] = (bucket["bucket"], bucket.get("candidate_id"), c)
        for c in cases:
            if not c.get("timed", True):
                continue
            dims = " ".join(f"{k}={v}" for k, v in (c.get("dims") or {}).items())
            bucket, cand, bc = by_case.get(c["name"], ("—", None, {}))
            rows.append([key, c["name"], dims, fmt(c.get("median_ms"), "{:.4f}"),
                         f"{fmt(c.get('speedup') or None, '{:.2f}x')} vs {c.get('baseline') or '—'}"
                         f" ({fmt(c.get('baseline_median_ms') or None, '{:.4f}')} ms)",
                         f"{bucket}: {cand or '—'}", fmt(bc.get("median_ms"), "{:.4f}"),
                         fmt(bc.get("speedup") or None, "{:.2f}x")])
    if not rows:
        return
    head = ["problem/strategy", "case", "dims", "overall best ms", "vs library (same run)",
            "bucket: its best", "bucket best ms", "vs library"]
    print("\n| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in rows:
        print("| " + " | ".join(r) + " |")
    sys.stdout.flush()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ksearch", required=True)
    parser.add_argument("--budget-minutes", type=float, default=1.0)
    parser.add_argument("--strategies", default="tune,branch")
    parser.add_argument("--tune-method", default="annealing")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--gpus", default="")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--db", default="search-bench.db")
    parser.add_argument("--out", default="search-bench.json")
    parser.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    parser.add_argument("problems", nargs="*", default=yard.PROBLEMS)
    args = parser.parse_args()

    device = yard.torch.cuda.get_device_name(0)
    print(f"# {device}, {datetime.date.today()}, budget {args.budget_minutes} min per search\n")
    rows, dump = [], {}
    for problem in args.problems:
        eager, _ = yard.torch_ms(problem)
        compiled = None
        if not args.no_compile:
            compiled, _ = yard.torch_ms(problem, compile_it=True)
        for strategy in args.strategies.split(","):
            summary, wall = run_search(args, problem, strategy)
            dump[f"{problem}/{strategy}"] = summary
            best = (summary or {}).get("best") or {}
            median = (best.get("timing") or {}).get("median_ms")
            base = best.get("speedup") or {}
            base_ms = (best.get("baseline_timing") or {}).get("median_ms")
            params = ((summary or {}).get("best_plan") or {}).get("params", {})
            rows.append([
                problem, strategy, fmt(median, "{:.4f}"),
                fmt(eager / median if median else None, "{:.2f}x"),
                fmt(compiled / median if median and compiled else None, "{:.2f}x"),
                f"{fmt(base.get('ratio'), '{:.2f}x')} vs {base.get('baseline', '—')}"
                f" ({fmt(base_ms, '{:.3f}')} ms)",
                fmt(best.get("roofline_fraction"), "{:.0%}"),
                fmt(best.get("max_l2_rel_error"), "{:.1e}"),
                " ".join(f"{k}={v}" for k, v in params.items()) or "—",
                str((summary or {}).get("candidates", "—")),
                f"{wall:.0f} s",
                f"eager {eager:.3f}, compile {fmt(compiled)}",
            ])
            sys.stdout.flush()
    head = ["problem", "strategy", "best ms", "vs eager", "vs compile", "vs library (same run)",
            "roofline", "L2 err vs fp64", "params", "candidates", "wall", "PyTorch ms"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in rows:
        print("| " + " | ".join(r) + " |")
    case_table(dump)
    for problem in ("attention", "attention_engine"):
        if problem in args.problems:
            dump[f"{problem}/torch_backends"] = yard.attention_backends(yard.attention_cases(problem))
    with open(args.out, "w") as f:
        json.dump(dump, f)


if __name__ == "__main__":
    main()
