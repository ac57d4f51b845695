"""Shared helpers of the problem-check scripts: reading a problem folder,
evaluating plan expressions and conditions, resolving launch plans, and
parsing kernel signatures.

Plain Python 3 (no third-party packages), so it runs on a developer's machine
without a GPU. The rules mirror docs/problems.md; where this file and the C++
loader disagree, the C++ loader is right and this file is out of date.
"""

import json
import os
import re

DTYPES = {"f32": 4, "f64": 8, "f16": 2, "bf16": 2, "i32": 4, "i64": 8, "u8": 1}
NAME_RE = re.compile(r"^[a-z0-9_]+$")
IDENT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
DIST_RE = re.compile(r"^\s*(normal|uniform)\s*\(\s*([-+0-9.eE]+)\s*,\s*([-+0-9.eE]+)\s*\)\s*$")
INT64_MAX = (1 << 63) - 1
# Headers NVRTC cannot open from the file system (the evaluator supplies
# stand-ins for some of them; shipped kernels must not rely on that).
HOST_HEADERS = {"cstdint", "stdint.h", "cfloat", "float.h", "cmath", "math.h", "cstdio",
                "stdio.h", "cassert", "assert.h", "cstdlib", "stdlib.h", "cstring",
                "string.h", "iostream", "vector", "algorithm", "limits", "climits",
                "limits.h", "type_traits", "utility"}


class CheckError(Exception):
    pass


# ----------------------------------------------------------------------------
# Expressions: integer literals, names, + - * / % ( ), ceil_div, min, max,
# and for conditions also < <= > >= == != && || !.

_TOKEN_RE = re.compile(r"\s*(?:(\d+)|([A-Za-z_][A-Za-z0-9_]*)|(&&|\|\||<=|>=|==|!=|[-+*/%(),<>!]))")


def _tokenize(text):
    pos, out = 0, []
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN_RE.match(text, pos)
        if not m or m.end() == pos:
            raise CheckError(f"expression '{text}': unexpected character at offset {pos}")
        if m.group(1) is not None:
            out.append(("int", int(m.group(1))))
        elif m.group(2) is not None:
            out.append(("name", m.group(2)))
        else:
            out.append(("op", m.group(3)))
        pos = m.end()
    return out


def _check64(v, text):
    if v > INT64_MAX or v < -INT64_MAX - 1:
        raise CheckError(f"expression '{text}': 64-bit overflow")
    return v


def _cdiv(a, b, text):
    if b == 0:
        raise CheckError(f"expression '{text}': division by zero")
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _cmod(a, b, text):
    return a - b * _cdiv(a, b, text)


class _Parser:
    def __init__(self, text, values, allow_conditions):
        self.text, self.values, self.cond = text, values, allow_conditions
        self.toks, self.i = _tokenize(text), 0

    def peek(self):
        return self.toks[self.i] if self.i < len(self.toks) else (None, None)

    def take(self, op=None):
        tok = self.peek()
        if tok[0] is None or (op is not None and tok != ("op", op)):
            raise CheckError(f"expression '{self.text}': expected {op or 'a value'}")
        self.i += 1
        return tok

    def parse(self):
        v = self.or_() if self.cond else self.add()
        if self.i != len(self.toks):
            raise CheckError(f"expression '{self.text}': unexpected '{self.peek()[1]}'")
        return v

    def or_(self):
        v = self.and_()
        while self.peek() == ("op", "||"):
            self.take()
            r = self.and_()
            v = int(bool(v) or bool(r))
        return v

    def and_(self):
        v = self.cmp()
        while self.peek() == ("op", "&&"):
            self.take()
            r = self.cmp()
            v = int(bool(v) and bool(r))
        return v

    def cmp(self):
        v = self.add()
        ops = {"<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b,
               ">=": lambda a, b: a >= b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b}
        while self.peek()[0] == "op" and self.peek()[1] in ops:
            op = self.take()[1]
            v = int(ops[op](v, self.add()))
        return v

    def add(self):
        v = self.mul()
        while self.peek() in (("op", "+"), ("op", "-")):
            op = self.take()[1]
            r = self.mul()
            v = _check64(v + r if op == "+" else v - r, self.text)
        return v

    def mul(self):
        v = self.unary()
        while self.peek() in (("op", "*"), ("op", "/"), ("op", "%")):
            op = self.take()[1]
            r = self.unary()
            if op == "*":
                v = _check64(v * r, self.text)
            elif op == "/":
                v = _cdiv(v, r, self.text)
            else:
                v = _cmod(v, r, self.text)
        return v

    def unary(self):
        if self.peek() == ("op", "-"):
            self.take()
            return -self.unary()
        if self.peek() == ("op", "+"):
            self.take()
            return self.unary()
        if self.cond and self.peek() == ("op", "!"):
            self.take()
            return int(not self.unary())
        return self.primary()

    def primary(self):
        kind, val = self.take()
        if kind == "int":
            return _check64(val, self.text)
        if kind == "op" and val == "(":
            v = self.or_() if self.cond else self.add()
            self.take(")")
            return v
        if kind == "name":
            if val in ("ceil_div", "min", "max") and self.peek() == ("op", "("):
                self.take("(")
                a = self.add()
                self.take(",")
                b = self.add()
                self.take(")")
                if val == "min":
                    return min(a, b)
                if val == "max":
                    return max(a, b)
                if b == 0:
                    raise CheckError(f"expression '{self.text}': division by zero")
                return -((-a) // b)  # the ceiling of a / b
            if val not in self.values:
                raise CheckError(f"expression '{self.text}': unknown name '{val}'")
            return self.values[val]
        raise CheckError(f"expression '{self.text}': unexpected '{val}'")


def evaluate(expr, values):
    """Evaluates an integer expression of the plan grammar."""
    if isinstance(expr, bool):
        raise CheckError(f"expression {expr!r}: not an integer")
    if isinstance(expr, int):
        return expr
    if not isinstance(expr, str):
        raise CheckError(f"expression {expr!r}: neither a string nor an integer")
    return _Parser(expr, values, False).parse()


def evaluate_condition(expr, values):
    return bool(_Parser(expr, values, True).parse())


# ----------------------------------------------------------------------------
# Problem files.

_NUM = r"([-+0-9.eE]+)"
SCALE_RE = re.compile(r"^(.*?)\s*\*\s*10\s*\^\s*uniform\s*\(\s*" + _NUM + r"\s*,\s*" + _NUM
                      + r"\s*\)\s*(?:per\s+(row|column))?\s*$")


def parse_distribution_scaled(text):
    """(kind, a, b, scale): scale is None or (low, high, 'row' | 'column'),
    for a distribution written 'normal(0, 1) * 10^uniform(-4, 0) per row'."""
    scale = None
    m = SCALE_RE.match(text)
    if m:
        if not m.group(4):
            raise CheckError(f"distribution '{text}': a scale applies 'per row' or 'per column'")
        low, high = float(m.group(2)), float(m.group(3))
        if not (-38 <= low <= high <= 38):
            raise CheckError(f"distribution '{text}': the exponents must satisfy -38 <= LOW <= HIGH <= 38")
        scale = (low, high, m.group(4))
        text = m.group(1)
    m = DIST_RE.match(text)
    if not m:
        raise CheckError(f"distribution '{text}': expected normal(MEAN, STDDEV) or uniform(LOW, HIGH),"
                         " optionally followed by '* 10^uniform(LOW, HIGH) per row' (or 'per column')")
    return m.group(1), float(m.group(2)), float(m.group(3)), scale


def parse_distribution(text):
    """(kind, a, b) of a distribution, its per-row or per-column scale checked and dropped."""
    return parse_distribution_scaled(text)[:3]


def load_problem(path, dims_override=None):
    """Reads problem.json (or a folder holding one) and its .cu files.

    Returns a dict: the JSON with 'dir', 'description' and each kernel's
    'text' filled in, and dims replaced by dims_override where given.
    """
    if os.path.isdir(path):
        path = os.path.join(path, "problem.json")
    with open(path, encoding="utf-8") as f:
        p = json.load(f)
    p["dir"] = os.path.dirname(os.path.abspath(path))
    if "description_file" in p:
        with open(os.path.join(p["dir"], p["description_file"]), encoding="utf-8") as f:
            p["description"] = f.read()
    for k in kernels_of(p):
        with open(os.path.join(p["dir"], k["source"]), encoding="utf-8") as f:
            k["text"] = f.read()
    if dims_override:
        for name, value in dims_override.items():
            if name not in p["dims"]:
                raise CheckError(f"dims override: unknown dim '{name}'")
            p["dims"][name] = int(value)
    return p


def kernels_of(p):
    """(label, kernel spec) pairs: reference, reference_fp32, start, templates."""
    out = []
    for key in ("reference", "reference_fp32", "start"):
        if key in p:
            k = p[key]
            k.setdefault("label", key)
            out.append(k)
    for t in p.get("templates", []):
        t.setdefault("label", "template " + t.get("name", "?"))
        out.append(t)
    return out


def plan_values(p, plan, params=None):
    values = dict(p["dims"])
    for name, v in (params if params is not None else plan.get("params", {})).items():
        if name in values:
            raise CheckError(f"params.{name}: shadows the dim '{name}'")
        values[name] = v
    return values


def tensor_elements(p, t):
    n = 1
    for e in t["shape"]:
        n *= evaluate(e, p["dims"])
        _check64(n, str(t["shape"]))
    return n


def resolve_plan(p, plan, params=None):
    """Evaluates a plan for the problem's dims; returns workspace sizes and
    launches with concrete numbers. Raises CheckError naming the field."""
    values = plan_values(p, plan, params)
    tensors = {t["name"]: t for t in p["tensors"]}
    ws = {}
    for i, w in enumerate(plan.get("workspace", [])):
        if w["name"] in tensors:
            raise CheckError(f"workspace[{i}].name: '{w['name']}' is already a tensor")
        if w["dtype"] not in DTYPES:
            raise CheckError(f"workspace[{i}].dtype: unknown dtype '{w['dtype']}'")
        n = evaluate(w["elements"], values)
        if n <= 0:
            raise CheckError(f"workspace[{i}].elements: {w['elements']} = {n}")
        ws[w["name"]] = (w["dtype"], n)
    launches = []
    for i, l in enumerate(plan["launches"]):
        where = f"launches[{i}] ({l['kernel']})"
        if len(l["grid"]) != 3 or len(l["block"]) != 3:
            raise CheckError(f"{where}: grid and block need 3 entries")
        grid = [evaluate(e, values) for e in l["grid"]]
        block = [evaluate(e, values) for e in l["block"]]
        shared = evaluate(l.get("shared_bytes", 0), values)
        if not (1 <= grid[0] < 2**31 and 1 <= grid[1] <= 65535 and 1 <= grid[2] <= 65535):
            raise CheckError(f"{where}: grid {grid} out of CUDA's limits")
        if min(block) < 1 or block[0] > 1024 or block[1] > 1024 or block[2] > 64 or \
                block[0] * block[1] * block[2] > 1024:
            raise CheckError(f"{where}: block {block} out of CUDA's limits")
        args = []
        for j, a in enumerate(l["args"]):
            if isinstance(a, dict):
                args.append(("tensor_map", _tensor_map_arg(p, a, values, f"{where}.args[{j}]")))
            elif a in tensors:
                args.append(("tensor", a))
            elif a in ws:
                args.append(("workspace", a))
            elif ":" in a:
                expr, typ = a.rsplit(":", 1)
                if typ not in ("i32", "i64", "f32"):
                    raise CheckError(f"{where}.args[{j}]: scalar type '{typ}'")
                if typ == "f32":
                    try:
                        args.append(("f32", float(evaluate(expr, values))))
                    except CheckError:
                        args.append(("f32", float(expr)))
                else:
                    v = evaluate(expr, values)
                    if typ == "i32" and not -2**31 <= v < 2**31:
                        raise CheckError(f"{where}.args[{j}]: {expr} = {v} does not fit i32")
                    args.append((typ, v))
            else:
                raise CheckError(f"{where}.args[{j}]: '{a}' names no tensor or workspace")
        launches.append({"kernel": l["kernel"], "grid": grid, "block": block,
                         "shared_bytes": shared, "args": args})
    return ws, launches


def _tensor_map_arg(p, a, values, where):
    """Checks a tensor-map argument ({"tensor_map": T, "box": [...], ...}, see
    docs/kernel-contract.md) at the resolved dims; returns the tensor's name."""
    tensors = {t["name"]: t for t in p["tensors"]}
    name = a.get("tensor_map")
    if name not in tensors:
        raise CheckError(f"{where}: tensor_map '{name}' names no tensor")
    t = tensors[name]
    dims = [evaluate(e, values) for e in (a["dims"] if "dims" in a else list(reversed(t["shape"])))]
    count, viewed = 1, 1
    for e in t["shape"]:
        count *= evaluate(e, values)
    for d in dims:
        viewed *= d
    if viewed != count:
        raise CheckError(f"{where}: dims {dims} do not cover the {count} elements of '{name}'")
    box = a.get("box", [])
    if len(box) != len(dims) or not 1 <= len(dims) <= 5:
        raise CheckError(f"{where}: box {box} for a map of {len(dims)} dimensions")
    for i, e in enumerate(box):
        v = evaluate(e, values)
        if not 1 <= v <= 256 or v > dims[i]:
            raise CheckError(f"{where}: box[{i}] '{e}' = {v} (must be 1..256 and at most the dimension {dims[i]})")
    swizzle = a.get("swizzle", "none")
    if swizzle not in ("none", "32B", "64B", "128B"):
        raise CheckError(f"{where}: swizzle '{swizzle}'")
    inner = evaluate(box[0], values) * DTYPES[t["dtype"]]
    if inner % 16 or (swizzle != "none" and inner > int(swizzle[:-1])):
        raise CheckError(f"{where}: inner box of {inner} bytes (a multiple of 16, at most the swizzle span)")
    for k in a:
        if k not in ("tensor_map", "box", "dims", "swizzle", "l2_promotion", "oob_fill"):
            raise CheckError(f"{where}: unknown tensor-map key '{k}'")
    return name


def template_points(t, dims):
    """Every point of a template's space that satisfies its constraints."""
    names = list(t["space"].keys())
    points = [{}]
    for n in names:
        points = [dict(pt, **{n: v}) for pt in points for v in t["space"][n]]
    base = dict(t["plan"].get("params", {}))
    out = []
    for pt in points:
        params = dict(base, **pt)
        values = dict(dims, **params)
        if all(evaluate_condition(c, values) for c in t.get("constraints", [])):
            out.append(params)
    return out


# ----------------------------------------------------------------------------
# Kernel sources.

_COMMENT_RE = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


def strip_comments(src):
    return _COMMENT_RE.sub(" ", src)


def includes(src):
    return re.findall(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', strip_comments(src), re.M)


_DIRECTIVE_RE = re.compile(r"^\s*#\s*(if|ifdef|ifndef|elif|else|endif|define)\b(.*)$")


def _condition(text, defines):
    """The value of a preprocessor condition: `defined X` and object-like
    macros expanded (their text, in parentheses), other names 0 as the
    preprocessor has it, then read by the plan grammar's conditions (C's
    integer division and remainder); raises CheckError on what it cannot
    read."""
    text = re.sub(r"\bdefined\s*\(\s*(\w+)\s*\)|\bdefined\s+(\w+)",
                  lambda m: "1" if (m.group(1) or m.group(2)) in defines else "0", text)
    for _ in range(16):
        expanded = re.sub(r"[A-Za-z_]\w*", lambda m: f"({defines[m.group(0)]})" if m.group(0) in defines
                          else m.group(0), text)
        if expanded == text:
            break
        text = expanded
    text = re.sub(r"[A-Za-z_]\w*", "0", text)
    text = re.sub(r"(\d+)[uUlL]+\b", r"\1", text)
    return evaluate_condition(text, {})


def active_source(src, params):
    """`src` with the lines of inactive #if/#ifdef/#ifndef branches blanked,
    given the plan's params as -D defines (as the compile gets them) and the
    source's own integer #defines met on the way: what the compiler sees of
    the kernels' signatures (a signature may depend on a param)."""
    defines = {k: str(int(v)) for k, v in params.items()}
    out, stack = [], []  # stack: [this branch active, some branch taken, parent active]
    lines = strip_comments(src).split("\n")
    for i in range(len(lines) - 1):  # continued lines: joined, the line count kept
        if lines[i].endswith("\\"):
            lines[i + 1], lines[i] = lines[i][:-1] + " " + lines[i + 1], ""
    for line in lines:
        m = _DIRECTIVE_RE.match(line)
        active = all(frame[0] for frame in stack)
        if not m:
            out.append(line if active else "")
            continue
        kind, rest = m.group(1), m.group(2).strip()
        if kind in ("if", "ifdef", "ifndef"):
            if not active:
                value = False
            elif kind == "if":
                value = _condition(rest, defines)
            else:
                value = (rest.split()[0] in defines) == (kind == "ifdef")
            stack.append([value, value, active])
        elif kind in ("elif", "else"):
            if not stack:
                raise CheckError(f"#{kind} without #if")
            frame = stack[-1]
            value = frame[2] and not frame[1] and (kind == "else" or _condition(rest, defines))
            frame[0], frame[1] = value, frame[1] or value
        elif kind == "endif":
            if not stack:
                raise CheckError("#endif without #if")
            stack.pop()
        elif kind == "define" and active:
            dm = re.match(r"(\w+)(?![\w(])\s*(.*)$", rest)  # object-like macros only
            if dm:
                defines[dm.group(1)] = dm.group(2).strip() or "1"
        out.append("")
    return "\n".join(out)


def kernel_signature(src, name, params=None):
    """The parameter list of `extern "C" __global__ void NAME(...)` as a list of
    (type text, parameter name); None when there is no such entry point. With
    `params`, only the source the compiler sees with them (active_source)."""
    code = strip_comments(src) if params is None else active_source(src, params)
    m = re.search(r'extern\s+"C"\s+__global__\s+void\s+(?:(?:__launch_bounds__|__maxnreg__)\s*\([^)]*\)\s*)*'
                  + re.escape(name) + r"\s*\(", code)
    if not m:
        return None
    depth, i = 1, m.end()
    while depth:
        if code[i] == "(":
            depth += 1
        elif code[i] == ")":
            depth -= 1
        i += 1
    params = code[m.end():i - 1].strip()
    if not params or params == "void":
        return []
    out = []
    for p in params.split(","):
        p = " ".join(p.split())
        pm = re.match(r"(.*?)([A-Za-z_][A-Za-z0-9_]*)$", p)
        out.append((pm.group(1).strip(), pm.group(2)))
    return out


def check_args_against_signature(p, plan_launch, sig):
    """Checks a resolved launch's args against a parsed signature; returns a
    list of problems found (strings)."""
    issues = []
    roles = {t["name"]: t["role"] for t in p["tensors"]}
    if len(sig) != len(plan_launch["args"]):
        return [f"{plan_launch['kernel']}: {len(plan_launch['args'])} args for {len(sig)} parameters"]
    for (kind, val), (typ, pname) in zip(plan_launch["args"], sig):
        is_ptr = "*" in typ
        if kind == "tensor_map":
            if is_ptr or "__grid_constant__" not in typ:
                issues.append(f"{plan_launch['kernel']}: tensor map of '{val}' bound to '{typ} {pname}'"
                              " (wants a const __grid_constant__ 128-byte struct by value)")
        elif kind in ("tensor", "workspace"):
            if not is_ptr:
                issues.append(f"{plan_launch['kernel']}: '{val}' bound to non-pointer '{typ} {pname}'")
            elif kind == "tensor" and roles[val] in ("output", "inout") and re.search(r"\bconst\b", typ.split("*")[0]):
                issues.append(f"{plan_launch['kernel']}: {roles[val]} '{val}' bound to const pointer '{pname}'")
            elif kind == "tensor" and roles[val] == "input" and not re.search(r"\bconst\b", typ.split("*")[0]):
                issues.append(f"{plan_launch['kernel']}: input '{val}' bound to non-const pointer '{pname}'")
        else:
            want = {"i32": ("int",), "i64": ("long long", "long long int"), "f32": ("float",)}[kind]
            base = typ.replace("const", "").strip()
            if is_ptr or base not in want:
                issues.append(f"{plan_launch['kernel']}: {kind} scalar bound to '{typ} {pname}'")
    return issues
