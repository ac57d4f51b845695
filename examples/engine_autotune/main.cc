// A small inference engine: one decoder layer of a Llama-style model in
// bf16, built the way an engine uses ksearch. At start it looks each op's
// kernels up in the kernel cache for this GPU, driver and NVRTC; an op this
// machine has never seen is tuned once, offline, within a time budget (a
// parameter search over the problem's templates, recorded in the same
// database) and its dispatch table is stored. Then the layer runs on the
// engine's own stream with its own device memory, each op dispatched by the
// number of tokens: a decode step (1 or 16 new tokens over a KV cache) runs
// the decode bucket's kernels, a prefill the prefill bucket's.
//
// The projections are fused with what follows them (ksearch's fused
// problems), so the layer is seven launches:
//
//   x, residual ─ add_rmsnorm ─ h1 (the residual stream), y1
//   y1 ─ linear_qkv_rope [Wq; Wk; Wv] ─ q, and k, v written into the KV cache, RoPE applied
//   q ─ attention_engine over the cache ─ o ─ linear_residual Wo, + h1 ─ h2
//       (P rounded to bf16 before P·V as cuDNN does, held to cuDNN's accuracy)
//   h2 ─ rmsnorm_bf16 ─ y2 ─ linear_swiglu [Wg; Wu] ─ silu(gate) · up
//     ─ linear_residual Wd, + h2 ─ the layer's output (the residual stream after it)
//
//   example_engine_autotune [--db FILE] [--tune-seconds S] [--context N]
//                           [--prefill N] [--repeats N] [--dump DIR] [--json]
//   example_engine_autotune --ops    (the ops and their shape cases; no GPU needed)
//
// Run it twice: the first run tunes every op (about S seconds each), the
// second starts at once. Weights and inputs are deterministic (Fill below;
// bench/layer_vs_torch.py rebuilds them to check the output against PyTorch
// and to time the same layer with PyTorch's cuBLAS/cuDNN ops). Without a GPU
// it says so in one line and exits with status 3.
#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include <ksearch/kernel_cache.h>
#include <ksearch/kernel_runner.h>
#include <ksearch/ksearch.h>
#include <ksearch/run_session.h>
#include <ksearch/store.h>

namespace {

// The model's sizes (Llama-3-8B's, without grouped KV heads).
constexpr int64_t kHidden = 4096, kHeads = 32, kHeadDim = 128, kInter = 14336;

// The engine's own CUDA: a real engine links the CUDA runtime; this example
// links only ksearch, so it opens the driver itself for the few calls an
// engine makes (memory, copies, a stream, events). Types are spelled out to
// need no CUDA header.
struct EngineCuda {
  using CUresult = int;
  using CUdeviceptr = unsigned long long;
  CUresult (*cuInit)(unsigned);
  CUresult (*cuDeviceGet)(int*, int);
  CUresult (*cuDevicePrimaryCtxRetain)(void**, int);
  CUresult (*cuCtxSetCurrent)(void*);
  CUresult (*cuMemAlloc)(CUdeviceptr*, size_t);
  CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void*, size_t);
  CUresult (*cuMemcpyDtoH)(void*, CUdeviceptr, size_t);
  CUresult (*cuStreamCreate)(void**, unsigned);
  CUresult (*cuStreamSynchronize)(void*);
  CUresult (*cuEventCreate)(void**, unsigned);
  CUresult (*cuEventRecord)(void*, void*);
  CUresult (*cuEventElapsedTime)(float*, void*, void*);

  bool Load() {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (!lib) return false;
    auto get = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
      return fn != nullptr;
    };
    bool elapsed = get(cuEventElapsedTime, "cuEventElapsedTime_v2") ||
                   get(cuEventElapsedTime, "cuEventElapsedTime");
    return elapsed && get(cuInit, "cuInit") && get(cuDeviceGet, "cuDeviceGet") &&
           get(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain") && get(cuCtxSetCurrent, "cuCtxSetCurrent") &&
           get(cuMemAlloc, "cuMemAlloc_v2") && get(cuMemcpyHtoD, "cuMemcpyHtoD_v2") &&
           get(cuMemcpyDtoH, "cuMemcpyDtoH_v2") && get(cuStreamCreate, "cuStreamCreate") &&
           get(cuStreamSynchronize, "cuStreamSynchronize") && get(cuEventCreate, "cuEventCreate") &&
           get(cuEventRecord, "cuEventRecord");
  }
};

int Fail(const ksearch::Status& status, int code) {
  std::fprintf(stderr, "engine_autotune: %s\n", status.ToString().c_str());
  return code;
}

// One op of the layer as the engine sees it: a built-in problem at the
// engine's sizes, with the engine's own shape cases (the token counts it
// runs) and dispatch buckets over its token dim.
struct Op {
  std::string label;    // "linear 4096x4096"
  std::string builtin;  // the built-in problem
  ksearch::Problem problem;
  std::unique_ptr<ksearch::KernelRunner> runner;
};

struct Shapes {
  int64_t context = 2048;  // KV-cache length a decode step attends over
  int64_t prefill = 2048;  // tokens of the prefill
};

// The engine's three calls: a decode step of 1 and of 16 tokens over a cache
// of `context` tokens, and a prefill of `prefill` tokens.
struct Mode {
  std::string name;
  int64_t tokens;    // new tokens (the GEMMs' M)
  int64_t kv;        // keys attended (the cache after this step)
};

std::vector<Mode> Modes(const Shapes& s) {
  return {{"decode_1", 1, s.context}, {"decode_16", 16, s.context}, {"prefill", s.prefill, s.prefill}};
}

// The op's problem: `fixed` dims, then one timed case per mode with the
// token dim (and for attention the key count) of that mode, and buckets
// over the token dim: <= 16 decodes, larger prefills.
ksearch::StatusOr<ksearch::Problem> EngineProblem(const std::string& builtin,
                                                 const std::vector<std::pair<std::string, int64_t>>& fixed,
                                                 const std::string& token_dim, const std::string& kv_dim,
                                                 const Shapes& shapes) {
  auto base = ksearch::LoadProblem(builtin);
  if (!base.ok()) return base.status();
  std::vector<std::pair<std::string, int64_t>> nominal = fixed;
  nominal.emplace_back(token_dim, shapes.prefill);
  if (!kv_dim.empty()) nominal.emplace_back(kv_dim, shapes.prefill);
  base->shapes.clear();
  base->dispatch = {};
  auto problem = base->WithDims(nominal);
  if (!problem.ok()) return problem.status();
  for (const Mode& m : Modes(shapes)) {
    ksearch::ShapeCase c;
    c.name = m.name;
    c.dims = {{token_dim, m.tokens}};
    if (!kv_dim.empty()) c.dims.emplace_back(kv_dim, m.kv);
    problem->shapes.push_back(c);
  }
  problem->dispatch = ksearch::DispatchSpec{token_dim, {16}};
  if (ksearch::Status valid = problem->Validate(); !valid.ok()) return valid;
  return problem;
}

// Tunes one op on this GPU within `seconds` and stores its dispatch table.
// The search is recorded as a run in the same database, so `ksearch show` and
// `ksearch report` can explain each choice.
ksearch::Status Tune(ksearch::Store& store, ksearch::KernelCache& cache, const Op& op, double seconds) {
  ksearch::EvaluatorOptions eval_options;
  eval_options.max_timing_seconds = 0.3;
  auto evaluator = ksearch::CreateLocalEvaluator(op.problem, eval_options);
  if (!evaluator.ok()) return evaluator.status();
  ksearch::SearchOptions options;
  options.budget.max_wall_seconds = seconds;
  ksearch::ParameterTuneOptions tune;
  tune.batch_size = 8;
  auto searcher = ksearch::MakeParameterTuneSearch(options, tune);
  ksearch::RunSettings settings;
  settings.strategy = searcher->name();
  settings.options_json = R"({"batch": 8, "example": "engine_autotune", "budget_seconds": )" +
                          std::to_string(seconds) + "}";
  settings.seed = options.seed;
  settings.device = (*evaluator)->device();
  auto session = ksearch::BeginRun(store, op.problem, settings);
  if (!session.ok()) return session.status();
  auto recorded = (*session)->WrapEvaluator(**evaluator);
  if (!recorded.ok()) return recorded.status();
  ksearch::SearchContext context;
  context.problem = &op.problem;
  context.evaluator = recorded->get();
  context.observers.push_back((*session)->observer());
  auto summary = searcher->Run(context);
  if (ksearch::Status finished = (*session)->Finish(summary); !finished.ok()) return finished;
  if (!summary.ok()) return summary.status();
  std::printf("  %s: %s\n", op.label.c_str(), summary->BriefReport().c_str());
  auto stored = cache.PutTable(op.problem, (*evaluator)->device(), summary->best_per_bucket, (*session)->run_id());
  if (!stored.ok()) return stored.status();
  if (*stored == 0) return ksearch::NotFoundError(op.label + ": the search found no correct kernel for any bucket");
  return ksearch::Status();
}

// Looks the op's table up (tuning it when missing) and loads it.
ksearch::Status Prepare(ksearch::Store& store, ksearch::KernelCache& cache, Op& op, double seconds) {
  auto key = ksearch::KernelCacheKey::ForDevice(op.problem, 0);
  if (!key.ok()) return key.status();
  auto table = cache.LookupTable(*key);
  if (!table.ok() && table.status().code() == ksearch::StatusCode::kNotFound) {
    std::printf("%s: not cached for this machine; tuning for up to %.0f s…\n", op.label.c_str(), seconds);
    std::fflush(stdout);
    if (ksearch::Status tuned = Tune(store, cache, op, seconds); !tuned.ok()) return tuned;
    table = cache.LookupTable(*key);
  }
  if (!table.ok()) return table.status();
  for (const ksearch::CachedKernel& k : *table) {
    std::printf("%s, bucket %d: candidate %s of run %lld, %.4f ms", op.label.c_str(), k.key.bucket,
                k.candidate_id.c_str(), static_cast<long long>(k.run_id), k.median_ms());
    if (k.speedup() > 0) std::printf(" (%.2fx vs %s)", k.speedup(), k.evaluation.speedup->baseline.c_str());
    std::printf("\n");
  }
  auto runner = ksearch::KernelRunner::LoadTable(*table, op.problem, {});
  if (!runner.ok()) return runner.status();
  op.runner = std::move(*runner);
  return ksearch::Status();
}

// bf16 from float, rounding to nearest even (the values are finite).
uint16_t ToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

// The deterministic contents of tensor `id`: element i is
// offset + (u / 2^32 - 0.5) * scale with u = (i * 2654435761 + id * 40503)
// mod 2^32, computed in double, rounded to float, then to bf16.
// bench/layer_vs_torch.py computes the same bits with PyTorch.
std::vector<uint16_t> Fill(int id, size_t count, double offset, double scale) {
  std::vector<uint16_t> out(count);
  for (size_t i = 0; i < count; ++i) {
    auto u = static_cast<uint32_t>(static_cast<uint64_t>(i) * 2654435761ull + static_cast<uint64_t>(id) * 40503ull);
    out[i] = ToBf16(static_cast<float>(offset + (static_cast<double>(u) / 4294967296.0 - 0.5) * scale));
  }
  return out;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::string db = "ksearch.db", dump;
  double tune_seconds = 30;
  int repeats = 30;
  bool json = false, ops_only = false;
  Shapes shapes;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    auto number = [&](double lo, double hi) -> double {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "engine_autotune: %s needs a value\n", flag.c_str());
        std::exit(2);
      }
      char* end = nullptr;
      double v = std::strtod(argv[++i], &end);
      if (*end != '\0' || !(v >= lo && v <= hi)) {
        std::fprintf(stderr, "engine_autotune: %s: expected a number in [%g, %g], got '%s'\n", flag.c_str(), lo, hi,
                     argv[i]);
        std::exit(2);
      }
      return v;
    };
    if (flag == "--db" && i + 1 < argc) {
      db = argv[++i];
    } else if (flag == "--dump" && i + 1 < argc) {
      dump = argv[++i];
    } else if (flag == "--tune-seconds") {
      tune_seconds = number(1, 86400);
    } else if (flag == "--context") {
      shapes.context = static_cast<int64_t>(number(17, 1 << 20));
    } else if (flag == "--prefill") {
      shapes.prefill = static_cast<int64_t>(number(17, 1 << 20));
    } else if (flag == "--repeats") {
      repeats = static_cast<int>(number(1, 10000));
    } else if (flag == "--json") {
      json = true;
    } else if (flag == "--ops") {
      ops_only = true;
    } else {
      std::fprintf(stderr,
                   "usage: example_engine_autotune [--db FILE] [--tune-seconds S] [--context N] [--prefill N]\n"
                   "                               [--repeats N] [--dump DIR] [--json] [--ops]\n"
                   "  --db FILE          kernel cache and tuning runs (default ksearch.db)\n"
                   "  --tune-seconds S   budget of each op's first tuning (default 30)\n"
                   "  --context N        KV-cache length a decode step attends over (default 2048)\n"
                   "  --prefill N        tokens of the prefill (default 2048; > 16)\n"
                   "  --repeats N        timed layer runs per mode (default 30; the median is printed)\n"
                   "  --dump DIR         write each mode's layer output and residual as raw bf16\n"
                   "  --json             print the timings as one JSON object per line\n"
                   "  --ops              print the ops, their problems and shape cases, and exit\n");
      return flag == "--help" || flag == "-h" ? 0 : 2;
    }
  }

  // 1. The ops, each a built-in problem at the engine's sizes and calls.
  struct Spec {
    const char* label;
    const char* builtin;
    std::vector<std::pair<std::string, int64_t>> fixed;
    const char* token_dim;
    const char* kv_dim;
  };
  const std::vector<Spec> specs = {
      {"add_rmsnorm", "add_rmsnorm", {{"hidden", kHidden}}, "tokens", ""},
      {"q/k/v + rope", "linear_qkv_rope", {{"K", kHidden}, {"heads", kHeads}, {"kv_heads", kHeads}, {"head_dim", kHeadDim}},
       "M", ""},
      {"attention", "attention_engine", {{"B", 1}, {"H", kHeads}, {"D", kHeadDim}}, "Sq", "Skv"},
      {"o + residual", "linear_residual", {{"N", kHidden}, {"K", kHidden}}, "M", ""},
      {"rmsnorm", "rmsnorm_bf16", {{"hidden", kHidden}}, "tokens", ""},
      {"gate/up + swiglu", "linear_swiglu", {{"N", kInter}, {"K", kHidden}}, "M", ""},
      {"down + residual", "linear_residual", {{"N", kHidden}, {"K", kInter}}, "M", ""},
  };
  std::vector<Op> ops;
  for (const Spec& s : specs) {
    auto problem = EngineProblem(s.builtin, s.fixed, s.token_dim, s.kv_dim, shapes);
    if (!problem.ok()) return Fail(problem.status(), 2);
    ops.push_back(Op{s.label, s.builtin, std::move(*problem), nullptr});
  }
  if (ops_only) {
    for (const Op& op : ops) {
      std::printf("%-18s %-16s", op.label.c_str(), op.builtin.c_str());
      for (size_t c = 0; c < op.problem.shapes.size(); ++c) {
        std::printf(" %s(", op.problem.shapes[c].name.c_str());
        const auto dims = op.problem.CaseDims(c);
        for (size_t d = 0; d < dims.size(); ++d) {
          std::printf("%s%s=%lld", d ? " " : "", dims[d].first.c_str(), static_cast<long long>(dims[d].second));
        }
        std::printf(")");
      }
      std::printf(", buckets over %s at 16\n", op.problem.dispatch.dim.c_str());
    }
    return 0;
  }

  // 2. No GPU, no engine: say so in one line.
  if (std::string why; !ksearch::CudaDriverAvailable(&why)) {
    std::fprintf(stderr, "engine_autotune: %s; run on a machine with an NVIDIA GPU\n", why.c_str());
    return 3;
  }

  // 3. Look every op up; tune what this machine has never seen.
  auto store = ksearch::Store::Open(db);
  if (!store.ok()) return Fail(store.status(), 2);
  ksearch::KernelCache cache(**store);
  for (Op& op : ops) {
    if (ksearch::Status ready = Prepare(**store, cache, op, tune_seconds); !ready.ok()) return Fail(ready, 4);
  }
  Op& norm1 = ops[0];
  Op& qkv = ops[1];
  Op& attention = ops[2];
  Op& o_proj = ops[3];
  Op& norm2 = ops[4];
  Op& gate_up = ops[5];
  Op& down_proj = ops[6];

  // 4. The engine's memory: weights, activations for the largest call, the
  //    KV cache, and one workspace large enough for every launch.
  EngineCuda cuda;
  if (!cuda.Load()) return Fail(ksearch::FailedPreconditionError("libcuda.so.1 lacks an entry point"), 3);
  int device = 0;
  void* context = nullptr;
  void* stream = nullptr;
  if (cuda.cuInit(0) || cuda.cuDeviceGet(&device, 0) || cuda.cuDevicePrimaryCtxRetain(&context, device) ||
      cuda.cuCtxSetCurrent(context) || cuda.cuStreamCreate(&stream, 0)) {
    return Fail(ksearch::UnavailableError("the engine could not set up its CUDA context and stream"), 4);
  }
  using Ptr = EngineCuda::CUdeviceptr;
  bool alloc_failed = false;
  auto alloc = [&](size_t bytes) {
    Ptr p = 0;
    if (cuda.cuMemAlloc(&p, bytes)) alloc_failed = true;
    return p;
  };
  auto upload = [&](const std::vector<uint16_t>& host) {
    Ptr p = alloc(host.size() * 2);
    if (p && cuda.cuMemcpyHtoD(p, host.data(), host.size() * 2)) alloc_failed = true;
    return p;
  };
  const size_t H = kHidden, I = kInter;
  const int64_t max_tokens = std::max<int64_t>(shapes.prefill, 16);
  const int64_t cache_tokens = std::max(shapes.context, shapes.prefill);
  const Ptr x = upload(Fill(1, max_tokens * H, 0.0, 2.0));
  const Ptr residual = upload(Fill(2, max_tokens * H, 0.0, 2.0));
  const Ptr w_norm1 = upload(Fill(3, H, 1.0, 0.2));
  // The merged projections' weights are their parts one after the other:
  // [Wq; Wk; Wv] and [Wg; Wu] (what vLLM loads as qkv_proj and gate_up_proj).
  auto stacked = [&](std::initializer_list<int> ids, size_t rows, size_t cols) {
    std::vector<uint16_t> all;
    for (int id : ids) {
      std::vector<uint16_t> part = Fill(id, rows * cols, 0.0, 2.0 * std::sqrt(3.0 / static_cast<double>(cols)));
      all.insert(all.end(), part.begin(), part.end());
    }
    return upload(all);
  };
  const Ptr wqkv = stacked({4, 5, 6}, H, H), wo = stacked({7}, H, H);
  const Ptr w_norm2 = upload(Fill(8, H, 1.0, 0.2));
  const Ptr wgu = stacked({9, 10}, I, H), wd = stacked({11}, H, I);
  // The cache holds earlier tokens' keys and values; each step writes its own.
  const Ptr k_cache = upload(Fill(12, cache_tokens * H, 0.0, 2.0 * std::sqrt(3.0)));
  const Ptr v_cache = upload(Fill(13, cache_tokens * H, 0.0, 2.0 * std::sqrt(3.0)));
  const Ptr h1 = alloc(max_tokens * H * 2), y1 = alloc(max_tokens * H * 2), q = alloc(max_tokens * H * 2);
  const Ptr o = alloc(max_tokens * H * 2), h2 = alloc(max_tokens * H * 2), y2 = alloc(max_tokens * H * 2);
  const Ptr out = alloc(max_tokens * H * 2), act = alloc(max_tokens * I * 2);
  const Ptr cos = alloc(max_tokens * kHeadDim / 2 * 4), sin = alloc(max_tokens * kHeadDim / 2 * 4);
  if (alloc_failed) return Fail(ksearch::ResourceExhaustedError("the engine could not allocate its buffers"), 4);

  auto dims_of = [](std::initializer_list<ksearch::DimValue> d) { return std::vector<ksearch::DimValue>(d); };
  int64_t workspace_bytes = 0;
  for (const Mode& m : Modes(shapes)) {
    for (Op* op : {&norm1, &qkv, &o_proj, &norm2, &gate_up, &down_proj}) {
      std::string dim = op->problem.dispatch.dim;
      auto need = op->runner->WorkspaceBytes(dims_of({{dim, m.tokens}}));
      if (!need.ok()) return Fail(need.status(), 4);
      workspace_bytes = std::max(workspace_bytes, *need);
    }
    auto need = attention.runner->WorkspaceBytes(dims_of({{"Sq", m.tokens}, {"Skv", m.kv}}));
    if (!need.ok()) return Fail(need.status(), 4);
    workspace_bytes = std::max(workspace_bytes, *need);
  }
  const Ptr workspace = workspace_bytes > 0 ? alloc(static_cast<size_t>(workspace_bytes)) : 0;
  if (alloc_failed) return Fail(ksearch::ResourceExhaustedError("the engine could not allocate its workspace"), 4);

  // 5. The layer for one call, enqueued on the engine's stream; events mark
  //    the end of each op so the time of each is known too.
  const char* op_names[] = {"add_rmsnorm",  "q/k/v projection + rope", "attention",
                            "o projection + residual", "rmsnorm", "gate/up projection + swiglu",
                            "down projection + residual"};
  constexpr int kSteps = 7;
  std::vector<void*> events(kSteps + 1);
  for (void*& e : events) {
    if (cuda.cuEventCreate(&e, 0)) return Fail(ksearch::UnavailableError("cuEventCreate failed"), 4);
  }
  auto dev = [](Ptr p) { return reinterpret_cast<void*>(p); };
  auto layer = [&](const Mode& m) -> ksearch::Status {
    const int64_t past = m.kv - m.tokens;  // tokens already in the cache
    const Ptr k_new = k_cache + static_cast<Ptr>(past * H * 2), v_new = v_cache + static_cast<Ptr>(past * H * 2);
    auto tokens = dims_of({{"tokens", m.tokens}});
    auto rows = dims_of({{"M", m.tokens}});
    auto launch = [&](Op& op, std::initializer_list<ksearch::TensorPointer> tensors,
                      const std::vector<ksearch::DimValue>& dims) {
      return op.runner->Launch(stream, std::vector<ksearch::TensorPointer>(tensors), dims, dev(workspace),
                               workspace_bytes);
    };
    int step = 0;
    auto mark = [&] { cuda.cuEventRecord(events[static_cast<size_t>(step++)], stream); };
    mark();
    KSEARCH_RETURN_IF_ERROR(launch(norm1, {{"x", dev(x)}, {"residual", dev(residual)}, {"weight", dev(w_norm1)},
                                           {"h", dev(h1)}, {"y", dev(y1)}}, tokens));
    mark();
    KSEARCH_RETURN_IF_ERROR(launch(qkv, {{"X", dev(y1)}, {"W", dev(wqkv)}, {"cos", dev(cos)}, {"sin", dev(sin)},
                                         {"q", dev(q)}, {"k", dev(k_new)}, {"v", dev(v_new)}}, rows));
    mark();
    KSEARCH_RETURN_IF_ERROR(launch(attention, {{"q", dev(q)}, {"k", dev(k_cache)}, {"v", dev(v_cache)}, {"o", dev(o)}},
                                   dims_of({{"Sq", m.tokens}, {"Skv", m.kv}})));
    mark();
    KSEARCH_RETURN_IF_ERROR(launch(o_proj, {{"X", dev(o)}, {"W", dev(wo)}, {"R", dev(h1)}, {"Y", dev(h2)}}, rows));
    mark();
    KSEARCH_RETURN_IF_ERROR(launch(norm2, {{"x", dev(h2)}, {"weight", dev(w_norm2)}, {"y", dev(y2)}}, tokens));
    mark();
    KSEARCH_RETURN_IF_ERROR(launch(gate_up, {{"X", dev(y2)}, {"W", dev(wgu)}, {"Y", dev(act)}}, rows));
    mark();
    KSEARCH_RETURN_IF_ERROR(launch(down_proj, {{"X", dev(act)}, {"W", dev(wd)}, {"R", dev(h2)}, {"Y", dev(out)}}, rows));
    mark();
    return ksearch::Status();
  };

  // 6. Serve each call: rotary tables for its positions, warm-up, then the
  //    median of `repeats` timed layers.
  if (!json) std::printf("\nlayer (hidden %lld, %lld heads of %lld, MLP %lld), median of %d runs:\n",
                         static_cast<long long>(kHidden), static_cast<long long>(kHeads),
                         static_cast<long long>(kHeadDim), static_cast<long long>(kInter), repeats);
  for (const Mode& m : Modes(shapes)) {
    const int64_t past = m.kv - m.tokens, half = kHeadDim / 2;
    std::vector<float> cos_host(static_cast<size_t>(m.tokens * half)), sin_host(cos_host.size());
    for (int64_t t = 0; t < m.tokens; ++t) {
      for (int64_t i = 0; i < half; ++i) {
        double angle = static_cast<double>(past + t) * std::pow(10000.0, -2.0 * static_cast<double>(i) / kHeadDim);
        cos_host[static_cast<size_t>(t * half + i)] = static_cast<float>(std::cos(angle));
        sin_host[static_cast<size_t>(t * half + i)] = static_cast<float>(std::sin(angle));
      }
    }
    cuda.cuMemcpyHtoD(cos, cos_host.data(), cos_host.size() * 4);
    cuda.cuMemcpyHtoD(sin, sin_host.data(), sin_host.size() * 4);
    std::vector<std::vector<double>> step_ms(kSteps);
    std::vector<double> layer_ms;
    for (int r = -3; r < repeats; ++r) {
      if (ksearch::Status s = layer(m); !s.ok()) return Fail(s, 4);
      if (cuda.cuStreamSynchronize(stream)) {
        return Fail(ksearch::InternalError("a kernel of the layer failed at " + m.name), 4);
      }
      if (r < 0) continue;
      for (int i = 0; i < kSteps; ++i) {
        float ms = 0;
        cuda.cuEventElapsedTime(&ms, events[static_cast<size_t>(i)], events[static_cast<size_t>(i + 1)]);
        step_ms[static_cast<size_t>(i)].push_back(ms);
      }
      float total = 0;
      cuda.cuEventElapsedTime(&total, events[0], events[kSteps]);
      layer_ms.push_back(total);
    }
    if (json) {
      std::printf("{\"mode\": \"%s\", \"tokens\": %lld, \"kv\": %lld, \"layer_ms\": %.5f, \"ops\": {", m.name.c_str(),
                  static_cast<long long>(m.tokens), static_cast<long long>(m.kv), Median(layer_ms));
      for (int i = 0; i < kSteps; ++i) {
        std::printf("%s\"%d %s\": %.5f", i ? ", " : "", i + 1, op_names[i], Median(step_ms[static_cast<size_t>(i)]));
      }
      std::printf("}}\n");
    } else {
      std::printf("  %-9s (%5lld tokens, %5lld keys): %.4f ms —", m.name.c_str(), static_cast<long long>(m.tokens),
                  static_cast<long long>(m.kv), Median(layer_ms));
      for (int i = 0; i < kSteps; ++i) {
        std::printf(" %s %.4f%s", op_names[i], Median(step_ms[static_cast<size_t>(i)]), i + 1 < kSteps ? "," : "\n");
      }
    }
    if (!dump.empty()) {
      std::vector<uint16_t> host(static_cast<size_t>(m.tokens) * H);
      for (auto [buffer, what] : {std::pair{out, "out"}, std::pair{h2, "residual"}}) {
        cuda.cuMemcpyDtoH(host.data(), buffer, host.size() * 2);
        std::string path = dump + "/" + m.name + "." + what + ".bf16";
        FILE* f = std::fopen(path.c_str(), "wb");
        if (!f || std::fwrite(host.data(), 2, host.size(), f) != host.size() || std::fclose(f) != 0) {
          return Fail(ksearch::UnavailableError("cannot write " + path), 4);
        }
      }
    }
  }
  return 0;
}
