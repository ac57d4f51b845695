// Helpers shared by ksearch's tests: temporary folders and a small valid
// problem (row softmax) that tests edit to provoke each error.
#ifndef KSEARCH_TESTS_TEST_UTIL_H_
#define KSEARCH_TESTS_TEST_UTIL_H_

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "ksearch/evaluator.h"
#include "ksearch/problem.h"

namespace ksearch::testing {

// A file or folder of the source tree, for the data tests read (problems/,
// tests/eval/data/, docs/schemas/ …): below $KSEARCH_TEST_SOURCE_DIR when it
// is set, else below the tree the tests were built from. A GPU bundle's tests
// run on another machine, from a repository at another path: its
// run-gpu-tests.sh sets the variable to the repository beside the bundle
// (docs/gpu-testing.md).
inline std::string SourcePath(const std::string& relative) {
  const char* env = std::getenv("KSEARCH_TEST_SOURCE_DIR");
  const std::string root = env && *env ? env : KSEARCH_SOURCE_DIR;
  return root + "/" + relative;
}

class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "ksearch_test_XXXXXX").string();
    path_ = ::mkdtemp(pattern.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string Write(const std::string& name, const std::string& text) const {
    std::string file = path_ + "/" + name;
    std::ofstream(file) << text;
    return file;
  }

 private:
  std::string path_;
};

// A row-wise softmax: one block per row, fp32 or fp64 accumulation.
inline std::string RowSoftmaxSource(const char* acc) {
  std::string a = acc;
  return R"(extern "C" __global__ void row_softmax(const float* x, float* y, int cols) {
  __shared__ )" + a + R"( red[256];
  const float* xr = x + (long long)blockIdx.x * cols;
  float* yr = y + (long long)blockIdx.x * cols;
  )" + a + R"( m = -1e30;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmax(m, ()" + a + R"()xr[c]);
  red[threadIdx.x] = m;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) red[threadIdx.x] = fmax(red[threadIdx.x], red[threadIdx.x + s]);
    __syncthreads();
  }
  m = red[0];
  __syncthreads();
  )" + a + R"( sum = 0;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) sum += exp(()" + a + R"()xr[c] - m);
  red[threadIdx.x] = sum;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
    __syncthreads();
  }
  sum = red[0];
  for (int c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = (float)(exp(()" + a + R"()xr[c] - m) / sum);
}
)";
}

inline const char kRowSoftmaxPlan[] =
    R"({"launches": [{"kernel": "row_softmax", "grid": ["rows", 1, 1], "block": [256, 1, 1],
        "args": ["x", "y", "cols:i32"]}]})";

// Problem JSON text; sources are inline so the text stands alone.
// `text` as the inside of a JSON string (quotes, backslashes, newlines).
inline std::string JsonEscape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

inline std::string RowSoftmaxProblemJson(int rows = 512, int cols = 4096) {
  std::string ref = JsonEscape(RowSoftmaxSource("double"));
  std::string ref32 = JsonEscape(RowSoftmaxSource("float"));
  return R"({"name": "row_softmax", "description": "softmax along dim 1",
    "dims": {"rows": )" + std::to_string(rows) + R"(, "cols": )" + std::to_string(cols) + R"(},
    "tensors": [{"name": "x", "dtype": "f32", "shape": ["rows", "cols"], "role": "input"},
                {"name": "y", "dtype": "f32", "shape": ["rows", "cols"], "role": "output"}],
    "flops": "5 * rows * cols", "bytes": "8 * rows * cols",
    "reference": {"source_text": ")" + ref + R"(", "plan": )" + kRowSoftmaxPlan + R"(},
    "reference_fp32": {"source_text": ")" + ref32 + R"(", "plan": )" + kRowSoftmaxPlan + R"(},
    "start": {"source_text": ")" + ref32 + R"(", "plan": )" + kRowSoftmaxPlan + R"(}})";
}

inline Problem RowSoftmaxProblem(int rows = 512, int cols = 4096) {
  auto p = Problem::FromJson(RowSoftmaxProblemJson(rows, cols), "", "row_softmax.json");
  if (!p.ok()) std::abort();
  return *p;
}

// Evaluator options for GPU tests: no compile cache, short timing, a replay
// seed (the same inputs on every run of the test).
inline EvaluatorOptions FastGpuOptions(uint64_t seed) {
  EvaluatorOptions o;
  o.compile_cache_dir = "off";
  o.max_timing_seconds = 0.3;
  o.warmup_ms = 5;
  o.watchdog_floor_seconds = 1.0;
  o.replay_input_seed = seed;
  return o;
}

// Skips the current test when no CUDA driver or GPU is present.
#define KSEARCH_REQUIRE_GPU()                                              \
  do {                                                                     \
    std::string ksearch_why;                                               \
    if (!::ksearch::CudaDriverAvailable(&ksearch_why)) {                   \
      GTEST_SKIP() << "needs a GPU: " << ksearch_why;                      \
    }                                                                      \
  } while (0)

}  // namespace ksearch::testing

#endif  // KSEARCH_TESTS_TEST_UTIL_H_
