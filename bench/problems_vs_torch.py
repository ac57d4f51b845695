#!/usr/bin/env python3
"""The yardstick of issue 5: for each built-in problem, in one run on one GPU,
time PyTorch eager and torch.compile on the same shapes (TF32 off, CUDA
events, L2 flushed before each of 30 repetitions, median), and ksearch's
reference, starting kernel, template defaults and library baseline through
`ksearch eval --json`. A problem with shape cases (linear, rope) is timed in
PyTorch at each timed case and weighted as ksearch weights them. Prints a markdown table; asserts nothing.

  python3 bench/problems_vs_torch.py --ksearch .gpu-bundle/ksearch [--no-compile] [PROBLEM ...]
"""

import argparse
import json
import os
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False

PROBLEMS = ["softmax", "layernorm", "matmul", "conv2d", "conv2d_relu_maxpool", "add_rmsnorm", "swiglu", "linear", "attention",
            "attention_engine", "rope"]

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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


def sdpa_bottom_right(q, k, v):
    """Causal attention on [B, S, H, D] tensors with the mask aligned to the
    bottom right (query i sees key j <= i + Skv - Sq), as problems/attention
    defines it. torch's is_causal=True aligns the mask to the top left, which
    is the same only when Sq == Skv; Sq == 1 sees every key (no mask)."""
    from torch.nn.attention.bias import causal_lower_right
    sq, skv = q.shape[1], k.shape[1]
    qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
    if sq == skv:
        out = F.scaled_dot_product_attention(qt, kt, vt, is_causal=True)
    elif sq == 1:
        out = F.scaled_dot_product_attention(qt, kt, vt)
    else:
        out = F.scaled_dot_product_attention(qt, kt, vt, attn_mask=causal_lower_right(sq, skv))
    return out.transpose(1, 2)


def attention_cases(problem):
    """The timed shape cases of an attention problem's problem.json as
    (name, B, H, Sq, Skv)."""
    return [(name, d["B"], d["H"], d["Sq"], d["Skv"]) for name, _, d in timed_cases(problem)]


def attention_backends(cases=None):
    """Times PyTorch's flash and cuDNN SDPA backends at every case of `cases`
    ((name, B, H, Sq, Skv); default: problems/attention's timed cases), bf16,
    D = 128, the method of time_ms. A backend that refuses a case is reported
    with its error. Also prints the largest difference between the two
    backends' outputs, as a sanity check of the mask."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    rows = []
    for name, b, h, sq, skv in cases or attention_cases("attention"):
        g = torch.Generator(device="cuda").manual_seed(0)
        q, k, v = (torch.randn(b, s, h, 128, device="cuda", generator=g).to(torch.bfloat16)
                   for s in (sq, skv, skv))
        row, outs = [name, f"B{b} H{h} Sq={sq} Skv={skv}"], []
        for backend in (SDPBackend.FLASH_ATTENTION, SDPBackend.CUDNN_ATTENTION):
            try:
                with sdpa_kernel([backend]):
                    outs.append(sdpa_bottom_right(q, k, v).float())
                    row.append(f"{time_ms(sdpa_bottom_right, (q, k, v)):.4f} ms")
            except Exception as e:  # noqa: BLE001
                row.append(f"n/a ({str(e).splitlines()[0][:80]})")
        row.append(f"{(outs[0] - outs[1]).abs().max().item():.2e}" if len(outs) == 2 else "—")
        rows.append(row)
        del q, k, v, outs
        torch.cuda.empty_cache()
    print("\n| attention case | shape | PyTorch flash backend | PyTorch cuDNN backend | max |flash - cuDNN| |")
    print("| --- | --- | --- | --- | --- |")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    sys.stdout.flush()
    return rows


def timed_cases(problem):
    """The problem's timed shape cases as (name, weight, dims), read from its
    problem.json; one case at its dims when it declares none."""
    with open(os.path.join(ROOT, "problems", problem, "problem.json")) as f:
        spec = json.load(f)
    cases = spec.get("shapes") or [{"name": "default", "dims": {}}]
    return [(c["name"], c.get("weight", 1.0), {**spec["dims"], **c["dims"]}) for c in cases if c.get("timed", True)]


def torch_ms(problem, compile_it=False):
    """PyTorch's time for the problem as ksearch ranks kernels: the median at
    each timed shape case, weighted by the case weights (problems with shape
    cases need `make` to honour `dims`). Returns (weighted ms, {case: ms})."""
    per_case, total, weights = {}, 0.0, 0.0
    for name, weight, dims in timed_cases(problem):
        fn, inputs = make(problem, dims)
        if compile_it:
            fn = torch.compile(fn, dynamic=False)
        per_case[name] = time_ms(fn, inputs)
        total += weight * per_case[name]
        weights += weight
        del inputs
        torch.cuda.empty_cache()
    return total / weights, per_case


def make(problem, dims=None):
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
    if problem == "linear":
        return F.linear, (bf(dims["M"], dims["K"]), bf(dims["N"], dims["K"]))
    if problem == "attention":  # the nominal (prefill) case; attention_backends() times every case
        return sdpa_bottom_right, (bf(4, 2048, 32, 128), bf(4, 2048, 32, 128), bf(4, 2048, 32, 128))
    if problem == "attention_engine":  # each case (weighted as ksearch weights them)
        return sdpa_bottom_right, (bf(dims["B"], dims["Sq"], dims["H"], dims["D"]),
                                   bf(dims["B"], dims["Skv"], dims["H"], dims["D"]),
                                   bf(dims["B"], dims["Skv"], dims["H"], dims["D"]))
    if problem == "rope":
        # In place: each timed call rotates the previous call's result; real
        # tables are rotations, so the values stay in range run after run.
        d = dims or {"tokens": 8192, "heads": 32, "kv_heads": 32, "head_dim": 128}
        cos, sin = rope_tables(d["tokens"], d["head_dim"])
        return rope_eager, (bf(d["tokens"], d["heads"], d["head_dim"]), bf(d["tokens"], d["kv_heads"], d["head_dim"]),
                            cos, sin)
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
    out = subprocess.run([binary, "eval", problem, "--kernel", kernel, "--json"],
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
        eager, eager_cases = torch_ms(problem)
        if len(eager_cases) > 1:
            print(f"{problem}: PyTorch eager per case (ms): {eager_cases}", flush=True)
        compiled = None
        if not args.no_compile:
            try:
                compiled, _ = torch_ms(problem, compile_it=True)
            except Exception as e:  # noqa: BLE001
                print(f"{problem}: torch.compile failed: {e}", file=sys.stderr)
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
    for problem in ("attention", "attention_engine"):
        if problem in args.problems:
            attention_backends(attention_cases(problem))


if __name__ == "__main__":
    main()
