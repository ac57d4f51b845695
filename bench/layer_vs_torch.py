#!/usr/bin/env python3
"""One decoder layer (examples/engine_autotune) against the same layer in PyTorch.

Runs the engine example (which tunes its ops on the first run and then serves
from the kernel cache), rebuilds its deterministic weights and inputs in
PyTorch, runs the same layer with PyTorch's ops (cuBLAS/cuBLASLt for the
projections, the SDPA backend PyTorch picks for attention), and prints for
each call (decode of 1 and 16 tokens over a KV cache, a prefill):

  - the layer's median time: PyTorch eager, PyTorch replayed from a CUDA
    graph (no launch overhead), and the engine's (its own CUDA events);
  - the error of both outputs against an fp32 evaluation of the same layer
    (relative L2 of the layer output, the residual stream after the layer,
    and of the residual stream between attention and MLP).

Figures only: nothing here asserts a time.

  python3 bench/layer_vs_torch.py --engine build/examples/example_engine_autotune \\
      [--db layer.db] [--tune-seconds 30] [--context 2048] [--prefill 2048] \\
      [--repeats 30] [--out layer.json]
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

HIDDEN, HEADS, HEAD_DIM, INTER = 4096, 32, 128, 14336


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--engine", required=True, help="path of example_engine_autotune")
    p.add_argument("--db", default="layer.db", help="the engine's kernel cache (default layer.db)")
    p.add_argument("--tune-seconds", type=float, default=30, help="budget of each op's first tuning")
    p.add_argument("--context", type=int, default=2048, help="KV-cache length of a decode step (> 16)")
    p.add_argument("--prefill", type=int, default=2048, help="tokens of the prefill (> 16)")
    p.add_argument("--repeats", type=int, default=30, help="timed runs per call; the median is reported")
    p.add_argument("--out", help="write the figures as JSON here")
    args = p.parse_args()
    if not os.access(args.engine, os.X_OK):
        p.error(f"--engine: {args.engine} is not an executable file")
    if args.prefill <= 16 or args.context <= 16:
        p.error("--prefill and --context must exceed 16 (the engine's limits)")
    return args


def run_engine(args, dump):
    cmd = [args.engine, "--db", args.db, "--tune-seconds", str(args.tune_seconds), "--context", str(args.context),
           "--prefill", str(args.prefill), "--repeats", str(args.repeats), "--dump", dump, "--json"]
    print("+ " + " ".join(cmd), flush=True)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    results = {}
    for line in proc.stdout:
        if line.startswith("{"):
            r = json.loads(line)
            results[r["mode"]] = r
        else:
            print("  engine: " + line.rstrip(), flush=True)
    if proc.wait() != 0:
        sys.exit(f"layer_vs_torch: the engine exited with status {proc.returncode}")
    return results


def main():
    args = parse_args()
    with tempfile.TemporaryDirectory() as dump:
        engine = run_engine(args, dump)
        import torch
        import torch.nn.functional as F
        from torch.nn.attention.bias import causal_lower_right

        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        dev = "cuda"

        def fill(tensor_id, count, offset, scale):
            # examples/engine_autotune's Fill, bit for bit.
            i = torch.arange(count, dtype=torch.int64, device=dev)
            u = (i * 2654435761 + tensor_id * 40503) & 0xFFFFFFFF
            return (offset + (u.double() / 4294967296.0 - 0.5) * scale).float().bfloat16()

        def weight(tensor_id, rows, cols):
            return fill(tensor_id, rows * cols, 0.0, 2.0 * math.sqrt(3.0 / cols)).view(rows, cols)

        max_tokens = max(args.prefill, 16)
        cache_tokens = max(args.context, args.prefill)
        x_all = fill(1, max_tokens * HIDDEN, 0.0, 2.0).view(max_tokens, HIDDEN)
        res_all = fill(2, max_tokens * HIDDEN, 0.0, 2.0).view(max_tokens, HIDDEN)
        w1 = fill(3, HIDDEN, 1.0, 0.2)
        wq, wk, wv, wo = (weight(i, HIDDEN, HIDDEN) for i in (4, 5, 6, 7))
        w2 = fill(8, HIDDEN, 1.0, 0.2)
        wg, wu, wd = weight(9, INTER, HIDDEN), weight(10, INTER, HIDDEN), weight(11, HIDDEN, INTER)
        k_init = fill(12, cache_tokens * HIDDEN, 0.0, 2.0 * math.sqrt(3.0)).view(cache_tokens, HIDDEN)
        v_init = fill(13, cache_tokens * HIDDEN, 0.0, 2.0 * math.sqrt(3.0)).view(cache_tokens, HIDDEN)

        def rope_tables(past, tokens):
            half = HEAD_DIM // 2
            pos = torch.arange(past, past + tokens, dtype=torch.float64, device=dev)[:, None]
            inv = torch.pow(10000.0, -2.0 * torch.arange(half, dtype=torch.float64, device=dev) / HEAD_DIM)
            angle = pos * inv[None, :]
            return torch.cos(angle).float(), torch.sin(angle).float()

        def rope(t, cos, sin, dtype):
            # rotate-half on [tokens, heads, head_dim], computed in fp32.
            t = t.view(t.shape[0], HEADS, HEAD_DIM).float()
            x1, x2 = t[..., : HEAD_DIM // 2], t[..., HEAD_DIM // 2:]
            c, s = cos[:, None, :], sin[:, None, :]
            return torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1).to(dtype).view(t.shape[0], HIDDEN)

        def layer(tokens, kv, dtype, k_cache, v_cache, cos, sin):
            past = kv - tokens
            cast = (lambda t: t) if dtype == torch.bfloat16 else (lambda t: t.to(dtype))
            x, res = cast(x_all[:tokens]), cast(res_all[:tokens])
            h1 = x + res
            y1 = F.rms_norm(h1, (HIDDEN,), cast(w1), eps=1e-6)
            q = rope(F.linear(y1, cast(wq)), cos, sin, dtype)
            k_cache[past:kv] = rope(F.linear(y1, cast(wk)), cos, sin, dtype)
            v_cache[past:kv] = F.linear(y1, cast(wv))
            qh = q.view(1, tokens, HEADS, HEAD_DIM).transpose(1, 2)
            kh = k_cache[:kv].view(1, kv, HEADS, HEAD_DIM).transpose(1, 2)
            vh = v_cache[:kv].view(1, kv, HEADS, HEAD_DIM).transpose(1, 2)
            if tokens == kv:
                o = F.scaled_dot_product_attention(qh, kh, vh, is_causal=True)
            else:
                o = F.scaled_dot_product_attention(qh, kh, vh, attn_mask=causal_lower_right(tokens, kv))
            o = o.transpose(1, 2).reshape(tokens, HIDDEN)
            h2 = F.linear(o, cast(wo)) + h1
            y2 = F.rms_norm(h2, (HIDDEN,), cast(w2), eps=1e-6)
            s = F.silu(F.linear(y2, cast(wg))) * F.linear(y2, cast(wu))
            return F.linear(s, cast(wd)) + h2, h2

        def median_ms(fn, repeats):
            for _ in range(3):
                fn()
            torch.cuda.synchronize()
            times = []
            for _ in range(repeats):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                fn()
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end))
            times.sort()
            return times[len(times) // 2]

        def rel_l2(got, want):
            got, want = got.double(), want.double()
            return (torch.linalg.vector_norm(got - want) / torch.linalg.vector_norm(want)).item()

        modes = [("decode_1", 1, args.context), ("decode_16", 16, args.context), ("prefill", args.prefill, args.prefill)]
        rows = []
        for name, tokens, kv in modes:
            cos, sin = rope_tables(kv - tokens, tokens)
            k_cache, v_cache = k_init.clone(), v_init.clone()
            want_out, want_res = layer(tokens, kv, torch.float32, k_init.float(), v_init.float(), cos, sin)
            got_out, got_res = layer(tokens, kv, torch.bfloat16, k_cache, v_cache, cos, sin)
            eager = median_ms(lambda: layer(tokens, kv, torch.bfloat16, k_cache, v_cache, cos, sin), args.repeats)
            graphed = None
            try:
                graph = torch.cuda.CUDAGraph()
                stream = torch.cuda.Stream()
                stream.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(stream):
                    layer(tokens, kv, torch.bfloat16, k_cache, v_cache, cos, sin)
                torch.cuda.current_stream().wait_stream(stream)
                with torch.cuda.graph(graph):
                    layer(tokens, kv, torch.bfloat16, k_cache, v_cache, cos, sin)
                graphed = median_ms(graph.replay, args.repeats)
            except Exception as e:  # noqa: BLE001
                print(f"  {name}: PyTorch's layer does not capture into a CUDA graph ({e})", flush=True)
            raw = lambda what: torch.frombuffer(bytearray(open(os.path.join(dump, f"{name}.{what}.bf16"), "rb").read()),
                                                dtype=torch.bfloat16).to(dev).view(tokens, HIDDEN)
            eng_out, eng_res = raw("out"), raw("residual")
            e = engine[name]
            rows.append({
                "mode": name, "tokens": tokens, "kv": kv,
                "torch_eager_ms": eager, "torch_graph_ms": graphed, "engine_ms": e["layer_ms"],
                "engine_ops_ms": e["ops"],
                "err_out_torch": rel_l2(got_out, want_out), "err_out_engine": rel_l2(eng_out, want_out),
                "err_res_torch": rel_l2(got_res, want_res), "err_res_engine": rel_l2(eng_res, want_res),
            })

        dev_name = torch.cuda.get_device_name()
        print(f"\n{dev_name}, torch {torch.__version__}: one decoder layer (hidden {HIDDEN}, {HEADS} heads of "
              f"{HEAD_DIM}, MLP {INTER}), bf16, median of {args.repeats}")
        print("| call | tokens | keys | PyTorch eager | PyTorch CUDA graph | ksearch engine | vs eager | vs graph "
              "| out err (torch / engine) | residual err (torch / engine) |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for r in rows:
            g = f"{r['torch_graph_ms']:.4f} ms" if r["torch_graph_ms"] else "n/a"
            vs_g = f"{r['torch_graph_ms'] / r['engine_ms']:.2f}x" if r["torch_graph_ms"] else "n/a"
            print(f"| {r['mode']} | {r['tokens']} | {r['kv']} | {r['torch_eager_ms']:.4f} ms | {g} | "
                  f"{r['engine_ms']:.4f} ms | {r['torch_eager_ms'] / r['engine_ms']:.2f}x | {vs_g} | "
                  f"{r['err_out_torch']:.2e} / {r['err_out_engine']:.2e} | "
                  f"{r['err_res_torch']:.2e} / {r['err_res_engine']:.2e} |")
        print("\nengine, per op (ms):")
        for r in rows:
            print(f"  {r['mode']}: " + ", ".join(f"{k} {v:.4f}" for k, v in r["engine_ops_ms"].items()))
        if args.out:
            with open(args.out, "w") as f:
                json.dump({"device": dev_name, "torch": torch.__version__, "repeats": args.repeats, "rows": rows}, f,
                          indent=1)


if __name__ == "__main__":
    main()
