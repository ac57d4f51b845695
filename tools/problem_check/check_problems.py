#!/usr/bin/env python3
"""Static check of problem folders, no GPU needed.

For each problem folder (default: every folder under problems/ plus
docs/examples/*): reads problem.json and its files, checks the fields the way
docs/problems.md describes them, resolves every launch plan (also at the small
dims given with --dims), checks each launch's arguments against the kernel's
signature, refuses host headers, and compiles every kernel for sm_90 with
NVRTC (libnvrtc via ctypes, as ksearch does), with each plan's params as -D
defines. Template kernels are compiled at every point of their space that
satisfies the constraints (--template-points N to cap it).

  python3 tools/problem_check/check_problems.py [FOLDER ...] [--arch sm_90] [--no-compile]
      [--dims matmul:M=100,N=75,K=33] [--ptxas]

Exit status 0 when every check passed.
"""

import argparse
import ctypes
import glob
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import problem_lib as L  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


class Nvrtc:
    def __init__(self, cuda_home):
        lib = None
        for cand in (os.path.join(cuda_home, "lib64", "libnvrtc.so"), "libnvrtc.so",
                     "libnvrtc.so.13", "libnvrtc.so.12"):
            try:
                lib = ctypes.CDLL(cand)
                break
            except OSError:
                continue
        if lib is None:
            raise RuntimeError("libnvrtc not found")
        self.lib = lib
        self.cuda_home = cuda_home
        major, minor = ctypes.c_int(), ctypes.c_int()
        lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
        self.version = f"{major.value}.{minor.value}"
        lib.nvrtcGetErrorString.restype = ctypes.c_char_p

    def compile(self, src, name, options):
        lib = self.lib
        prog = ctypes.c_void_p()
        rc = lib.nvrtcCreateProgram(ctypes.byref(prog), src.encode(), name.encode(), 0, None, None)
        if rc:
            return False, "nvrtcCreateProgram: " + lib.nvrtcGetErrorString(rc).decode(), 0
        opts = [o.encode() for o in options]
        arr = (ctypes.c_char_p * len(opts))(*opts)
        rc = lib.nvrtcCompileProgram(prog, len(opts), arr)
        size = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        buf = ctypes.create_string_buffer(size.value)
        lib.nvrtcGetProgramLog(prog, buf)
        log = buf.value.decode(errors="replace")
        cubin_size = ctypes.c_size_t()
        if rc == 0:
            lib.nvrtcGetCUBINSize(prog, ctypes.byref(cubin_size))
        lib.nvrtcDestroyProgram(ctypes.byref(prog))
        if rc:
            return False, lib.nvrtcGetErrorString(rc).decode() + "\n" + log, 0
        return True, log, cubin_size.value

    def options(self, arch, params, ptxas):
        inc = os.path.join(self.cuda_home, "include")
        opts = [f"--gpu-architecture={arch}", "-std=c++17", f"-I{inc}", f"-I{os.path.join(inc, 'cccl')}"]
        opts += [f"-D{k}={v}" for k, v in params.items()]
        if ptxas:
            opts.append("--ptxas-options=-v")
        return opts


def parse_dims_arg(items):
    out = {}
    for item in items or []:
        prob, _, assigns = item.partition(":")
        d = out.setdefault(prob, {})
        for a in assigns.split(","):
            k, _, v = a.partition("=")
            d[k.strip()] = int(v)
    return out


def check_fields(p, errors):
    if not L.NAME_RE.match(p.get("name", "")):
        errors.append(f"name: '{p.get('name')}' is not [a-z0-9_]+")
    if not p.get("description", "").strip():
        errors.append("description: empty")
    for k, v in p["dims"].items():
        if not L.IDENT_RE.match(k) or not isinstance(v, int) or isinstance(v, bool) or v <= 0:
            errors.append(f"dims.{k}: {v!r} is not a positive integer")
    names = set()
    for i, t in enumerate(p["tensors"]):
        if not L.IDENT_RE.match(t["name"]) or t["name"] in names or t["name"] in p["dims"]:
            errors.append(f"tensors[{i}].name: '{t['name']}' is not a fresh C identifier")
        names.add(t["name"])
        if t["dtype"] not in L.DTYPES:
            errors.append(f"tensors[{i}].dtype: unknown dtype '{t['dtype']}'")
        if t["role"] not in ("input", "output", "inout"):
            errors.append(f"tensors[{i}].role: '{t['role']}'")
        try:
            n = L.tensor_elements(p, t)
            if n * L.DTYPES.get(t["dtype"], 1) > L.INT64_MAX:
                errors.append(f"tensors[{i}]: byte count overflows 64 bits")
        except L.CheckError as e:
            errors.append(f"tensors[{i}].shape: {e}")
    if not any(t["role"] in ("output", "inout") for t in p["tensors"]):
        errors.append("tensors: no output or inout tensor")
    inputs = {t["name"] for t in p["tensors"] if t["role"] in ("input", "inout")}
    for i, s in enumerate(p.get("input_sets", [])):
        try:
            L.parse_distribution(s["distribution"])
            for tn, d in s.get("tensors", {}).items():
                if tn not in inputs:
                    errors.append(f"input_sets[{i}].tensors: '{tn}' is not an input or inout tensor")
                L.parse_distribution(d)
        except L.CheckError as e:
            errors.append(f"input_sets[{i}]: {e}")
    for key in ("flops", "bytes"):
        try:
            v = L.evaluate(p[key], p["dims"])
            if v <= 0:
                errors.append(f"{key}: {p[key]} = {v}")
        except (L.CheckError, KeyError) as e:
            errors.append(f"{key}: {e}")
    for key in ("reference", "reference_fp32", "start"):
        if key not in p:
            errors.append(f"{key}: missing")


def check_kernel(p, k, params, nvrtc, args, errors, compile_it=True):
    label = k["label"]
    src = k["text"]
    for inc in L.includes(src):
        if inc in L.HOST_HEADERS or not (inc.startswith("cuda") or inc in ("mma.h", "cooperative_groups.h", "sm_20_atomic_functions.h")):
            errors.append(f"{label}: includes <{inc}>, which is no toolkit device header")
    try:
        ws, launches = L.resolve_plan(p, k["plan"], params)
    except L.CheckError as e:
        errors.append(f"{label} plan: {e}")
        return None
    for l in launches:
        try:
            sig = L.kernel_signature(src, l["kernel"], params)
        except L.CheckError as e:
            errors.append(f"{label}: {k['source']}: {e}")
            continue
        if sig is None:
            errors.append(f"{label}: no extern \"C\" __global__ {l['kernel']} in {k['source']}")
            continue
        for issue in L.check_args_against_signature(p, l, sig):
            errors.append(f"{label}: {issue}")
        if l["shared_bytes"] > 227 * 1024:
            errors.append(f"{label}: {l['kernel']} asks for {l['shared_bytes']} bytes of shared memory")
    if not compile_it or nvrtc is None:
        return None
    t0 = time.time()
    ok, log, size = nvrtc.compile(src, k["source"], nvrtc.options(args.arch, params, args.ptxas))
    ms = (time.time() - t0) * 1000
    if not ok:
        errors.append(f"{label}: compile failed with {params}:\n{log}")
        return None
    return ms, size, log


def check_problem(folder, nvrtc, args, dims_overrides):
    errors = []
    try:
        p = L.load_problem(folder)
    except (OSError, ValueError, L.CheckError) as e:
        return [f"load: {e}"], []
    notes = []
    check_fields(p, errors)
    if errors:
        return errors, notes
    for k in L.kernels_of(p):
        params = dict(k["plan"].get("params", {}))
        r = check_kernel(p, k, params, nvrtc, args, errors, compile_it=not args.no_compile)
        if r:
            ms, size, log = r
            line = f"{k['label']:<22} {k['source']:<24} compiled in {ms:6.0f} ms, cubin {size} bytes"
            warn = [ln for ln in log.splitlines() if "warning" in ln.lower()]
            if warn:
                line += "  WARNINGS: " + " | ".join(warn)
            if args.ptxas:
                line += "\n" + "\n".join("    " + ln for ln in log.splitlines() if "ptxas" in ln)
            notes.append(line)
        if "space" in k:
            try:
                points = L.template_points(k, p["dims"])
            except L.CheckError as e:
                errors.append(f"{k['label']} constraints: {e}")
                continue
            if not points:
                errors.append(f"{k['label']}: no point of the space satisfies the constraints")
                continue
            if dict(k["plan"].get("params", {})) not in points:
                errors.append(f"{k['label']}: the default params violate the constraints or the space")
            sample = points
            if args.template_points and len(points) > args.template_points:
                step = len(points) / args.template_points
                sample = [points[int(i * step)] for i in range(args.template_points)]
            compiled = 0
            for pt in sample:
                before = len(errors)
                check_kernel(p, k, pt, nvrtc, args, errors, compile_it=not args.no_compile)
                compiled += len(errors) == before
            notes.append(f"{k['label']:<22} {len(points)} valid points, {compiled}/{len(sample)} checked ok")
    # The same plans at small dims (as tests use them).
    name = p["name"]
    if name in dims_overrides:
        q = L.load_problem(folder, dims_overrides[name])
        for k in L.kernels_of(q):
            try:
                L.resolve_plan(q, k["plan"])
            except L.CheckError as e:
                errors.append(f"{k['label']} plan at dims {dims_overrides[name]}: {e}")
        notes.append(f"plans resolve at {dims_overrides[name]}")
    flops = L.evaluate(p["flops"], p["dims"])
    nbytes = L.evaluate(p["bytes"], p["dims"])
    notes.append(f"flops {flops / 1e9:.2f} G, bytes {nbytes / 1e9:.3f} GB")
    return errors, notes


DEFAULT_SMALL_DIMS = {
    "matmul": {"M": 100, "N": 75, "K": 33},
    "softmax": {"rows": 7, "cols": 1000},
    "layernorm": {"N": 3, "C": 5, "H": 7, "W": 9},
    "conv2d": {"N": 2, "C": 3, "H": 31, "W": 29, "OC": 5, "KH": 5, "KW": 3, "STRIDE": 2,
               "PAD": 1, "OH": 15, "OW": 15},
    "conv2d_relu_maxpool": {"N": 2, "C": 3, "H": 31, "W": 29, "OC": 5, "KH": 5, "KW": 3,
                            "STRIDE": 2, "PAD": 1, "OH": 15, "OW": 15, "POOL": 3,
                            "POOL_STRIDE": 2, "PH": 7, "PW": 7},
    "rmsnorm": {"rows": 5, "cols": 300},
}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folders", nargs="*")
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--cuda-home", default=os.environ.get("CUDA_HOME", "/usr/local/cuda"))
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--ptxas", action="store_true", help="print ptxas register/spill lines")
    ap.add_argument("--template-points", type=int, default=0, help="compile at most N points per template")
    ap.add_argument("--dims", action="append", help="PROBLEM:NAME=V,NAME=V (small dims to resolve plans at)")
    args = ap.parse_args()
    folders = args.folders or sorted(glob.glob(os.path.join(ROOT, "problems", "*"))) + \
        sorted(glob.glob(os.path.join(ROOT, "docs", "examples", "*")))
    folders = [f for f in folders if os.path.exists(os.path.join(f, "problem.json")) or f.endswith(".json")]
    dims_overrides = dict(DEFAULT_SMALL_DIMS)
    dims_overrides.update(parse_dims_arg(args.dims))
    nvrtc = None
    if not args.no_compile:
        nvrtc = Nvrtc(args.cuda_home)
        print(f"NVRTC {nvrtc.version}, {args.arch}")
    failed = 0
    for folder in folders:
        errors, notes = check_problem(folder, nvrtc, args, dims_overrides)
        status = "FAIL" if errors else "ok"
        print(f"== {os.path.relpath(folder, ROOT)}: {status}")
        for n in notes:
            print("   " + n)
        for e in errors:
            print("   ERROR " + e)
        failed += bool(errors)
    print(f"{len(folders) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
