#!/usr/bin/env python3
"""Judges template points of a built-in problem at chosen shape cases, in one run.

    bench/points_gpu.py KSEARCH PROBLEM CASES POINT [POINT ...] [--rounds N] [--out DIR]

CASES is a comma-separated list of the problem's shape cases (the copy judged
holds only those, without dispatch); POINT is TEMPLATE or TEMPLATE:K=V,K=V
(the template's plan with those params changed). Each point is judged with
`ksearch eval --json` (the problem's baseline timed in the same evaluation),
the points interleaved over the rounds, and a table of the median per case,
its speedup against the baseline and, for memory-bound cases, its share of
the bytes/peak floor is printed last. For A/B comparisons of template
versions (docs/notes/); a figure, never an assertion.
"""
import argparse
import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile


def parse_point(text):
    template, _, rest = text.partition(":")
    params = {}
    for item in filter(None, rest.split(",")):
        key, _, value = item.partition("=")
        params[key] = int(value) if value.lstrip("-").isdigit() else value
    return template, params


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("ksearch")
    parser.add_argument("problem", help="a built-in problem's name")
    parser.add_argument("cases", help="comma-separated shape cases")
    parser.add_argument("points", nargs="+", help="TEMPLATE or TEMPLATE:K=V,K=V")
    parser.add_argument("--problems", default=os.path.join(os.path.dirname(__file__), "..", "problems"))
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--max-timing-seconds", default="1")
    parser.add_argument("--out", default="", help="also write each evaluation's JSON here")
    args = parser.parse_args()

    source_dir = os.path.abspath(os.path.join(args.problems, args.problem))
    with open(os.path.join(source_dir, "problem.json")) as f:
        spec = json.load(f)
    wanted = args.cases.split(",")
    known = [c["name"] for c in spec.get("shapes", [])]
    missing = [c for c in wanted if c not in known]
    if missing:
        sys.exit(f"points_gpu: {args.problem} has no case {missing} (cases: {known})")
    templates = {t["name"]: t for t in spec["templates"]}
    points = [parse_point(p) for p in args.points]
    for template, params in points:
        if template not in templates:
            sys.exit(f"points_gpu: {args.problem} has no template '{template}' (templates: {sorted(templates)})")
        unknown = [k for k in params if k not in templates[template]["plan"].get("params", {})]
        if unknown:
            print(f"points_gpu: note: {template} has no default for {unknown}; passed as new params", flush=True)

    work = tempfile.mkdtemp(prefix="points_gpu_")
    folder = os.path.join(work, args.problem)
    shutil.copytree(source_dir, folder)
    copy_spec = copy.deepcopy(spec)
    for k in [copy_spec.get("reference"), copy_spec.get("reference_fp32"), copy_spec.get("start")] + copy_spec["templates"]:
        if k and "source" in k:
            k["source"] = os.path.normpath(os.path.join(source_dir, k["source"]))
    copy_spec["shapes"] = [c for c in spec["shapes"] if c["name"] in wanted]
    copy_spec.pop("dispatch", None)
    with open(os.path.join(folder, "problem.json"), "w") as f:
        json.dump(copy_spec, f, indent=1)

    rows = []
    for r in range(args.rounds):
        for i, (template, params) in enumerate(points):
            t = templates[template]
            plan = copy.deepcopy(t["plan"])
            plan.setdefault("params", {}).update(params)
            plan_file = os.path.join(work, f"plan_{i}.json")
            with open(plan_file, "w") as f:
                json.dump(plan, f)
            cmd = [args.ksearch, "eval", folder, "--source", os.path.join(source_dir, t["source"]), "--plan",
                   plan_file, "--json", "--max-timing-seconds", args.max_timing_seconds]
            done = subprocess.run(cmd, capture_output=True, text=True)
            lines = done.stdout.strip().splitlines()
            try:
                result = json.loads(lines[-1])
            except (IndexError, ValueError):
                result = {"status": "error", "message": (done.stderr or done.stdout)[-300:]}
            label = args.points[i]
            if args.out:
                os.makedirs(args.out, exist_ok=True)
                with open(os.path.join(args.out, f"{r}_{i}.json"), "w") as f:
                    json.dump(result, f)
            cells = []
            for name in wanted:
                c = next((c for c in result.get("cases", []) if c["name"] == name), None)
                if not c or not c.get("median_ms"):  # a check-only case has no time
                    cells.append(c.get("status", "—") if c else "—")
                    continue
                cell = f"{c['median_ms']:.4f}"
                if c.get("speedup") is not None:
                    cell += f" ({c['speedup']:.3f}x)"
                if c.get("floor_ms") and c["floor_ms"] / c["median_ms"] < 0.999:
                    cell += f" [{100 * c['floor_ms'] / c['median_ms']:.0f}%]"
                cells.append(cell)
            rows.append((label, r, result.get("status"), cells))
            print(f"{label} (round {r}): {result.get('status')} {result.get('message', '')[:200]}", flush=True)
    print()
    print("| point | round | status | " + " | ".join(wanted) + " |")
    print("| --- | --- | --- |" + " --- |" * len(wanted))
    for label, r, status, cells in rows:
        print(f"| {label} | {r} | {status} | " + " | ".join(cells) + " |")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
