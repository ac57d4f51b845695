#!/usr/bin/env python3
"""Runs every GPU-labelled test of a GPU bundle and prints one count.

    run-gpu-tests.py [--bundle DIR] [--timeout SECONDS] [--filter GLOB]

The bundle (scripts/gpu-bundle.sh) holds the test binaries and gpu-tests.txt,
one binary name per line. Each binary runs once for its ordinary tests; a
test in a suite whose name contains "Fatal" ends its process on purpose (a
dead CUDA context, a spinning kernel) and runs alone. Should a process end
before reporting some tests (a crash that was not meant), each of those runs
again in a process of its own, so that one fault never hides the others.
The last line reads "N passed, M failed, K skipped"; the exit status is 0
only when nothing failed and at least one test ran.
"""
import argparse
import fnmatch
import json
import os
import subprocess
import sys
import tempfile


def list_tests(binary):
    out = subprocess.run([binary, "--gtest_list_tests"], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    tests, suite = [], None
    for line in out.splitlines():
        if not line.strip():
            continue
        if not line.startswith(" "):
            suite = line.split("#")[0].strip()
        else:
            tests.append(suite + line.split("#")[0].strip())
    return tests


def run(binary, tests, timeout, log):
    """Runs `tests` in one process; returns {name: "passed"|"failed"|"skipped"}."""
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "report.json")
        command = [binary, "--gtest_filter=" + ":".join(tests), "--gtest_output=json:" + report]
        log.write("$ " + " ".join(command[:2]) + "\n")
        log.flush()
        try:
            proc = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, timeout=timeout)
            code = proc.returncode
        except subprocess.TimeoutExpired:
            code = "timeout"
        results = {}
        if os.path.exists(report):
            with open(report) as f:
                data = json.load(f)
            for suite in data.get("testsuites", []):
                for case in suite.get("testsuite", []):
                    name = suite["name"] + "." + case["name"]
                    if case.get("result") == "SKIPPED" or case.get("status") == "NOTRUN":
                        results[name] = "skipped"
                    elif case.get("failures"):
                        results[name] = "failed"
                    else:
                        results[name] = "passed"
        return results, code


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bundle", default=os.path.dirname(os.path.abspath(__file__)))
    parser.add_argument("--timeout", type=float, default=900, help="seconds per process")
    parser.add_argument("--filter", default="*", help="glob over Suite.Test names")
    parser.add_argument("--log", default=None, help="full output here (default: stdout)")
    args = parser.parse_args()
    log = open(args.log, "w") if args.log else sys.stdout

    with open(os.path.join(args.bundle, "gpu-tests.txt")) as f:
        binaries = [os.path.join(args.bundle, os.path.basename(l.strip())) for l in f if l.strip()]
    totals = {"passed": 0, "failed": 0, "skipped": 0}
    failed = []
    for binary in binaries:
        tests = [t for t in list_tests(binary) if fnmatch.fnmatch(t, args.filter)]
        fatal = [t for t in tests if "Fatal" in t.split(".")[0]]
        ordinary = [t for t in tests if t not in fatal]
        results = {}
        if ordinary:
            got, code = run(binary, ordinary, args.timeout, log)
            results.update(got)
            missing = [t for t in ordinary if t not in got]
            if missing:
                log.write(f"{os.path.basename(binary)} ended ({code}) before reporting "
                          f"{len(missing)} tests: each runs alone\n")
        else:
            missing = []
        for t in fatal + missing:
            got, code = run(binary, [t], args.timeout, log)
            if t in got:
                results[t] = got[t]
            else:
                # A fatal test ends its process with _Exit, before gtest
                # writes its report: its exit status is the verdict.
                results[t] = "passed" if code == 0 else "failed"
                log.write(f"{t}: the process ended ({code}) without a report\n")
        for t in tests:
            outcome = results.get(t, "failed")
            totals[outcome] += 1
            if outcome == "failed":
                failed.append(os.path.basename(binary) + " " + t)
        print(f"{os.path.basename(binary)}: " +
              ", ".join(f"{sum(1 for t in tests if results.get(t) == k)} {k}"
                        for k in ("passed", "failed", "skipped")), flush=True)
    for f in failed:
        print("FAILED " + f)
    print(f"{totals['passed']} passed, {totals['failed']} failed, {totals['skipped']} skipped")
    ran = totals["passed"] + totals["failed"]
    return 0 if totals["failed"] == 0 and ran > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
