// A small inference "engine" with one op (a row softmax), the way an engine
// uses ksearch: at start it looks its op up in the kernel cache for this GPU,
// driver and NVRTC; when nothing is cached it tunes the op once (a parameter
// search over the problem's templates, recorded in the same database), stores
// the winner, and from then on serves launches from the cached kernel on its
// own stream with its own device memory.
//
//   example_engine_autotune [--db FILE] [--rows N] [--cols N]
//
// Run it twice: the first run tunes (seconds), the second starts at once.
// Without a GPU it says so in one line and exits with status 3.
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include <ksearch/kernel_cache.h>
#include <ksearch/kernel_runner.h>
#include <ksearch/ksearch.h>
#include <ksearch/run_session.h>
#include <ksearch/store.h>

namespace {

// The engine's own CUDA: a real engine links the CUDA runtime; this example
// links only ksearch, so it opens the driver itself for the few calls an
// engine makes (memory, copies, a stream). Types are spelled out to need no
// CUDA header.
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

  bool Load() {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (!lib) return false;
    auto get = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
      return fn != nullptr;
    };
    return get(cuInit, "cuInit") && get(cuDeviceGet, "cuDeviceGet") &&
           get(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain") && get(cuCtxSetCurrent, "cuCtxSetCurrent") &&
           get(cuMemAlloc, "cuMemAlloc_v2") && get(cuMemcpyHtoD, "cuMemcpyHtoD_v2") &&
           get(cuMemcpyDtoH, "cuMemcpyDtoH_v2") && get(cuStreamCreate, "cuStreamCreate") &&
           get(cuStreamSynchronize, "cuStreamSynchronize");
  }
};

int Fail(const ksearch::Status& status, int code) {
  std::fprintf(stderr, "engine_autotune: %s\n", status.ToString().c_str());
  return code;
}

// Tunes the op on this GPU and stores the winner. The search is recorded as a
// run in the same database, so `ksearch show`/`report` can explain the choice.
ksearch::Status Tune(ksearch::Store& store, ksearch::KernelCache& cache, const ksearch::Problem& problem) {
  ksearch::EvaluatorOptions eval_options;
  eval_options.max_timing_seconds = 0.5;
  auto evaluator = ksearch::CreateLocalEvaluator(problem, eval_options);
  if (!evaluator.ok()) return evaluator.status();
  ksearch::SearchOptions options;
  options.budget.max_rounds = 4;
  ksearch::ParameterTuneOptions tune;
  tune.batch_size = 6;
  auto searcher = ksearch::MakeParameterTuneSearch(options, tune);
  ksearch::RunSettings settings;
  settings.strategy = searcher->name();
  settings.options_json = R"({"rounds": 4, "batch": 6, "example": "engine_autotune"})";
  settings.seed = options.seed;
  settings.device = (*evaluator)->device();
  auto session = ksearch::BeginRun(store, problem, settings);
  if (!session.ok()) return session.status();
  auto recorded = (*session)->WrapEvaluator(**evaluator);
  if (!recorded.ok()) return recorded.status();
  ksearch::SearchContext context;
  context.problem = &problem;
  context.evaluator = recorded->get();
  context.observers.push_back((*session)->observer());
  auto summary = searcher->Run(context);
  if (ksearch::Status finished = (*session)->Finish(summary); !finished.ok()) return finished;
  if (!summary.ok()) return summary.status();
  std::printf("tuned: %s\n", summary->BriefReport().c_str());
  if (!summary->best) return ksearch::NotFoundError("the search found no correct kernel");
  auto stored = cache.PutBest(problem, (*evaluator)->device(), *summary->best, (*session)->run_id());
  return stored.ok() ? ksearch::Status() : stored.status();
}

}  // namespace

int main(int argc, char** argv) {
  std::string db = "ksearch.db";
  int64_t rows = 512, cols = 4096;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--db")) db = argv[i + 1];
    if (!std::strcmp(argv[i], "--rows")) rows = std::atoll(argv[i + 1]);
    if (!std::strcmp(argv[i], "--cols")) cols = std::atoll(argv[i + 1]);
  }

  // 1. The op, described as a ksearch problem at the engine's shape.
  auto builtin = ksearch::LoadProblem("softmax");
  if (!builtin.ok()) return Fail(builtin.status(), 2);
  auto problem = builtin->WithDims({{"rows", rows}, {"cols", cols}});
  if (!problem.ok()) return Fail(problem.status(), 2);

  // 2. The cache key of this machine: GPU model, driver, NVRTC. Without a GPU
  //    this is where the engine learns it (one line, exit status 3).
  auto key = ksearch::KernelCacheKey::ForDevice(*problem, 0);
  if (!key.ok()) return Fail(key.status(), 3);

  // 3. Look the op up; tune it when this machine has never seen it.
  auto store = ksearch::Store::Open(db);
  if (!store.ok()) return Fail(store.status(), 2);
  ksearch::KernelCache cache(**store);
  auto kernel = cache.Lookup(*key);
  if (!kernel.ok() && kernel.status().code() == ksearch::StatusCode::kNotFound) {
    std::printf("%s\ntuning once for this machine…\n", kernel.status().message().c_str());
    if (ksearch::Status tuned = Tune(**store, cache, *problem); !tuned.ok()) return Fail(tuned, 4);
    kernel = cache.Lookup(*key);
  }
  if (!kernel.ok()) return Fail(kernel.status(), 4);
  std::printf("cached kernel: candidate %s of run %lld, %.4f ms", kernel->candidate_id.c_str(),
              static_cast<long long>(kernel->run_id), kernel->median_ms());
  if (kernel->speedup() > 0) std::printf(" (%.2fx vs %s)", kernel->speedup(), kernel->evaluation.speedup->baseline.c_str());
  std::printf("\n");

  // 4. Load it once: the module goes into the device's primary context.
  auto runner = ksearch::KernelRunner::Load(*kernel, *problem);
  if (!runner.ok()) return Fail(runner.status(), 4);

  // 5. Serve: the engine's memory, the engine's stream.
  EngineCuda cuda;
  if (!cuda.Load()) return Fail(ksearch::FailedPreconditionError("libcuda.so.1 lacks an entry point"), 3);
  int device = 0;
  void* context = nullptr;
  void* stream = nullptr;
  EngineCuda::CUdeviceptr x = 0, y = 0;
  const size_t bytes = static_cast<size_t>(rows * cols) * sizeof(float);
  if (cuda.cuInit(0) || cuda.cuDeviceGet(&device, 0) || cuda.cuDevicePrimaryCtxRetain(&context, device) ||
      cuda.cuCtxSetCurrent(context) || cuda.cuMemAlloc(&x, bytes) || cuda.cuMemAlloc(&y, bytes) ||
      cuda.cuStreamCreate(&stream, 0)) {
    return Fail(ksearch::UnavailableError("the engine could not set up its CUDA memory and stream"), 4);
  }
  std::vector<float> input(static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < input.size(); ++i) input[i] = std::sin(0.01f * static_cast<float>(i));
  cuda.cuMemcpyHtoD(x, input.data(), bytes);
  ksearch::TensorPointer tensors[] = {{"x", reinterpret_cast<void*>(x)}, {"y", reinterpret_cast<void*>(y)}};
  const int launches = 200;
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < launches; ++i) {
    if (ksearch::Status s = (*runner)->Launch(stream, tensors); !s.ok()) return Fail(s, 4);
  }
  cuda.cuStreamSynchronize(stream);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  // 6. A sanity check an engine might run once: every softmax row sums to 1.
  std::vector<float> output(input.size());
  cuda.cuMemcpyDtoH(output.data(), y, bytes);
  double worst = 0.0;
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0.0;
    for (int64_t c = 0; c < cols; ++c) sum += output[static_cast<size_t>(r * cols + c)];
    worst = std::max(worst, std::fabs(sum - 1.0));
  }
  std::printf("served %d launches in %.3f ms (%.4f ms each); worst row sum error %.2e\n", launches, seconds * 1e3,
              seconds * 1e3 / launches, worst);
  return worst < 1e-3 ? 0 : 1;
}
