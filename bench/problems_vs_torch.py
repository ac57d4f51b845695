#!/usr/bin/env python3
"""The yardstick of issue 5: for each built-in problem, in one run on one GPU,
time PyTorch eager and torch.compile on the same shapes (TF32 off, CUDA
events, L2 flushed before each of 30 repetitions, median), and ksearch's
reference, starting kernel, template defaults and library baseline through
`ksearch eval --json`. Prints a markdown table; asserts nothing.

  python3 bench/problems_vs_torch.py --ksearch .gpu-bundle/ksearch [--no-compile] [PROBLEM ...]
"""

import argparse
import json
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False

PROBLEMS = ["softmax", "layernorm", "matmul", "conv2d", "conv2d_relu_maxpool", "add_rmsnorm", "swiglu", "rope"]


# The shape case make() builds PyTorch's tensors at, for problems with shape
# cases: ksearch's figure to compare with is that case's, not the weighted mean.
TORCH_CASE = {"rope": "prefill"}


def rope_tables(tokens, head_dim, device="cuda"):
    """An engine's precomputed cos/sin rows for positions 0..tokens-1 (base
    10000), [tokens, head_dim/2] fp32 as the rope problem takes them."""
    inv = 1.0 / (10000 ** (torch.arange(0, head_dim, 2, device=device, dtype=torch.float32) / head_dim))
    angles = torch.arange(tokens, device=device, dtype=torch.float32)[:, None] * inv[None, :]
    return angles.cos(), angles.sin()


def rope_eager(q, k, cos, sin):
    """What an engine runs in PyTorch (the Hugging Face Llama form: rotate_half
    with the tables repeated to head_dim and broadcast over heads), in fp32 as
    the problem's accuracy contract asks, written back in place with copy_.
    Repeating the tables is part of the op here: the problem's tables are
    [tokens, head_dim/2], once per forward for every layer."""
    c = torch.cat([cos, cos], dim=-1)[:, None, :]
    s = torch.cat([sin, sin], dim=-1)[:, None, :]
    for x in (q, k):
        xf = x.float()
        x1, x2 = xf.chunk(2, dim=-1)
        x.copy_(xf * c + torch.cat([-x2, x1], dim=-1) * s)
    return q, k


def make(problem):
    g = torch.Generator(device="cuda").manual_seed(0)
    n = lambda *s: torch.randn(*s, device="cuda", generator=g)  # noqa: E731
    if problem == "softmax":
        x = n(4096, 65536)
        return (lambda x: torch.softmax(x, dim=1)), (x,)
    if problem == "layernorm":
        x, w, b = n(16, 64, 256, 256), n(64, 256, 256), n(64, 256, 256)
        return (lambda x, w, b: F.layer_norm(x, (64, 256, 256), w, b, 1e-5)), (x, w, b)
    if problem == "matmul":
        return (lambda a, b: a @ b), (n(4096, 4096), n(4096, 4096))
    bf = lambda *s: n(*s).to(torch.bfloat16)  # noqa: E731
    if problem == "add_rmsnorm":
        def add_rmsnorm(x, r, w):
            h = x + r
            return h, F.rms_norm(h, (4096,), w, 1e-6)
        return add_rmsnorm, (bf(8192, 4096), bf(8192, 4096), bf(4096))
    if problem == "swiglu":
        return (lambda g, u: F.silu(g) * u), (bf(8192, 14336), bf(8192, 14336))
    if problem == "rope":
        # In place: each timed call rotates the previous call's result; real
        # tables are rotations, so the values stay in range run after run.
        cos, sin = rope_tables(8192, 128)
        return rope_eager, (bf(8192, 32, 128), bf(8192, 32, 128), cos, sin)
    x, w, b = n(100, 3, 224, 224), n(96, 3, 11, 11), n(96)
    if problem == "conv2d":
        return (lambda x, w, b: F.conv2d(x, w, b, stride=4, padding=2)), (x, w, b)
    return (lambda x, w, b: F.max_pool2d(F.relu(F.conv2d(x, w, b, stride=4, padding=2)), 3, 2)), (x, w, b)


def time_ms(fn, args, reps=30):
    flush = torch.empty(256 * 1024 * 1024, dtype=torch.int8, device="cuda")
    for _ in range(3):
        fn(*args)
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(*args)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    return times[len(times) // 2]


def ksearch_eval(binary, problem, kernel):
    out = subprocess.run([binary, "eval", problem, "--kernel", kernel, "--json", "--seed", "5"],
                         capture_output=True, text=True, timeout=300)
    try:
        return json.loads(out.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"status": "error", "message": (out.stderr or out.stdout).strip()[:200]}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ksearch", required=True)
    parser.add_argument("--no-compile", action="store_true")
    parser.add_argument("problems", nargs="*", default=PROBLEMS)
    args = parser.parse_args()
    rows = []
    print(f"# {torch.cuda.get_device_name()} · torch {torch.__version__} · {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
          flush=True)
    for problem in args.problems:
        fn, inputs = make(problem)
        eager = time_ms(fn, inputs)
        compiled = None
        if not args.no_compile:
            try:
                compiled = time_ms(torch.compile(fn), inputs)
            except Exception as e:  # noqa: BLE001
                print(f"{problem}: torch.compile failed: {e}", file=sys.stderr)
        del inputs
        torch.cuda.empty_cache()
        start = ksearch_eval(args.ksearch, problem, "start")
        ref = ksearch_eval(args.ksearch, problem, "reference")
        t = lambda e: e.get("timing", {}).get("median_ms")  # noqa: E731
        base = start.get("baseline_timing", {}).get("median_ms")
        base_name = start.get("speedup", {}).get("baseline", "?")
        rows.append((problem, eager, compiled, base, base_name, t(ref), t(start), start.get("status"),
                     start.get("roofline_fraction")))
        print(rows[-1], flush=True)
    print("\n| problem | PyTorch eager | torch.compile | baseline (ksearch) | reference | starting kernel (status) | start vs eager |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    fmt = lambda v: "—" if v is None else f"{v:.3f} ms"  # noqa: E731
    for p, eager, comp, base, bname, ref, start, status, roof in rows:
        ratio = f"{eager / start:.2f}×" if start else "—"
        print(f"| {p} | {fmt(eager)} | {fmt(comp)} | {fmt(base)} {bname} | {fmt(ref)} | {fmt(start)} ({status}) | {ratio} |")


if __name__ == "__main__":
    main()
