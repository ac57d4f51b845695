// Kernels written by an adversary who has read the judge (docs/evaluation.md,
// "The adversary has read this page"): each is given what such an adversary
// knows — how input seeds were once derived, the timing cap, the number of
// checks before timing, the stop rule — and each is followed by an honest
// kernel that must still pass. GPU tests (label `gpu`).
//
// The problem is a small row softmax (32 rows of 1024), so that a kernel can
// keep many precomputed answers in a __device__ array. A kernel counts its
// own launches per block (every block sees the same count): the first six
// are the checks (three input sets, each run twice for determinism).
#include <gtest/gtest.h>

#include <string>

#include "ksearch/evaluator.h"
#include "test_util.h"

namespace ksearch {
namespace {

using testing::RowSoftmaxProblem;
using testing::RowSoftmaxSource;

constexpr int kRows = 32;
constexpr int kCols = 1024;
// Launches before the timing phase: 3 input sets, each checked twice.
constexpr int kCheckLaunches = 6;

EvaluatorOptions Options() {
  EvaluatorOptions o;
  o.compile_cache_dir = "off";
  o.max_timing_seconds = 0.5;
  o.warmup_ms = 5;
  o.watchdog_floor_seconds = 1.0;
  return o;  // no replay seed: the judge's secrets, as in `ksearch run`
}

Evaluation JudgeOne(Evaluator& evaluator, const Problem& problem, const std::string& id,
                    const std::string& source) {
  Candidate c = problem.start.ToCandidate(id, "test");
  c.source = source;
  Evaluation e = evaluator.Evaluate(std::span<const Candidate>(&c, 1)).front();
  std::printf("[%s] %s\n%s\n", id.c_str(), e.Report().c_str(), e.details.c_str());
  return e;
}

// Helpers every adversary below shares: the honest row softmax of one block
// (from `in`, which may be shared memory), a spin of about `ns` nanoseconds,
// and the block's own launch count.
const char kCommon[] = R"(
#define ROWS 32
#define COLS 1024
__device__ unsigned int ks_launch_of_block[ROWS];

__device__ void ks_softmax_row(const float* in, float* out, int cols) {
  __shared__ float red[256];
  float m = -1e30f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, in[c]);
  red[threadIdx.x] = m;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + s]);
    __syncthreads();
  }
  m = red[0];
  __syncthreads();
  float sum = 0.0f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) sum += expf(in[c] - m);
  red[threadIdx.x] = sum;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
    __syncthreads();
  }
  sum = red[0];
  __syncthreads();
  for (int c = threadIdx.x; c < cols; c += blockDim.x) out[c] = expf(in[c] - m) / sum;
  __syncthreads();
}

__device__ void ks_spin(long long ns) {
  long long t0 = clock64();
  while (clock64() - t0 < ns * 2) {}
}

// 1-based; the same in every block of one launch.
__device__ unsigned int ks_launch() {
  __shared__ unsigned int n;
  if (threadIdx.x == 0) n = ++ks_launch_of_block[blockIdx.x];
  __syncthreads();
  return n;
}

__device__ void ks_garbage_row(float* out, int cols) {
  for (int c = threadIdx.x; c < cols; c += blockDim.x) out[c] = 1.0f / cols;
}
)";

std::string Kernel(const std::string& body) {
  return std::string(kCommon) + R"(
extern "C" __global__ void row_softmax(const float* x, float* y, int cols) {
  const float* xr = x + (long long)blockIdx.x * cols;
  float* yr = y + (long long)blockIdx.x * cols;
  const unsigned int launch = ks_launch();
)" + body + "\n}\n";
}

// The honest kernel, padded by a spin of `ns` per block.
std::string Honest(long long ns) {
  return Kernel("  (void)launch;\n  ks_spin(" + std::to_string(ns) + ");\n  ks_softmax_row(xr, yr, cols);");
}

class GpuInformedAdversary : public ::testing::Test {
 protected:
  void SetUp() override { KSEARCH_REQUIRE_GPU(); }
  std::unique_ptr<Evaluator> Make(const EvaluatorOptions& options) {
    auto e = CreateLocalEvaluator(problem_, options);
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    return e.ok() ? std::move(*e) : nullptr;
  }
  Problem problem_ = RowSoftmaxProblem(kRows, kCols);
};

// Class 1: the future is predictable. The kernel knows how the judge derives
// a run's seed from a replay seed (splitmix of seed + golden ratio × counter)
// and how it fills inputs; it finds which counter and input set made its
// current inputs, answers from its store when it computed them in advance,
// and otherwise runs its slow honest path and computes the answers for the
// next 24 counters of every set. Given the replay seed it is fast and
// correct: the attack is real. Under the judge's secrets (the default) no
// counter matches, and it is timed on its honest path.
std::string Predictor(unsigned long long assumed_seed) {
  return std::string(kCommon) + R"(
#define AHEAD 24
#define SLOTS 64
#define MAXC 4096
__device__ float ks_store[SLOTS][3][ROWS * COLS];
__device__ unsigned long long ks_tag[SLOTS][3][ROWS];

__device__ __forceinline__ unsigned long long ks_fin(unsigned long long z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
__device__ __forceinline__ unsigned long long ks_mix(unsigned long long z) { return ks_fin(z + 0x9e3779b97f4a7c15ull); }
__device__ __forceinline__ double ks_unit(unsigned long long bits) {
  return ((double)(bits >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}
// Element i of the input x (tensor 0) of the run with replay counter c, for
// the default input sets: 0 normal(0, 1), 1 uniform(-1, 1), 2 normal(100, 1).
__device__ float ks_predicted(unsigned long long c, int set, long long i) {
  unsigned long long seed = ks_fin()" + std::to_string(assumed_seed) + R"(ull + 0x9e3779b97f4a7c15ull * c);
  unsigned long long s = seed ^ 0x5851f42d4c957f2dull;
  unsigned long long r1 = ks_mix(s ^ ks_mix((unsigned long long)i * 2ull));
  if (set == 1) return (float)(-1.0 + 2.0 * ks_unit(r1));
  unsigned long long r2 = ks_mix(s ^ ks_mix((unsigned long long)i * 2ull + 1ull));
  double a = set == 2 ? 100.0 : 0.0;
  return (float)(a + sqrt(-2.0 * log(ks_unit(r1))) * cospi(2.0 * ks_unit(r2)));
}

extern "C" __global__ void row_softmax(const float* x, float* y, int cols) {
  __shared__ int found_c, found_set;
  __shared__ float row[COLS];
  const int r = blockIdx.x;
  const float* xr = x + (long long)r * cols;
  float* yr = y + (long long)r * cols;
  if (threadIdx.x == 0) found_c = -1;
  __syncthreads();
  const float x0 = x[0], x1 = x[1];
  for (int c = 1 + threadIdx.x; c <= MAXC; c += blockDim.x) {
    for (int set = 0; set < 3; ++set) {
      if (ks_predicted(c, set, 0) == x0 && ks_predicted(c, set, 1) == x1) {
        found_c = c;
        found_set = set;
      }
    }
  }
  __syncthreads();
  const int c = found_c, set = found_set;
  if (c > 0 && ks_tag[c % SLOTS][set][r] == (unsigned long long)c) {
    const float* stored = ks_store[c % SLOTS][set] + (long long)r * COLS;
    for (int k = threadIdx.x; k < cols; k += blockDim.x) yr[k] = stored[k];
    return;
  }
  ks_spin(300000);
  ks_softmax_row(xr, yr, cols);
  if (c <= 0) return;
  for (int ahead = 1; ahead <= AHEAD; ++ahead) {
    const int future = c + ahead;
    for (int fset = 0; fset < 3; ++fset) {
      for (int k = threadIdx.x; k < cols; k += blockDim.x) row[k] = ks_predicted(future, fset, (long long)r * cols + k);
      __syncthreads();
      ks_softmax_row(row, ks_store[future % SLOTS][fset] + (long long)r * COLS, cols);
      if (threadIdx.x == 0) ks_tag[future % SLOTS][fset][r] = future;
      __syncthreads();
    }
  }
}
)";
}

TEST_F(GpuInformedAdversary, PredictingTheNextInputsWorksOnlyWithAReplaySeed) {
  constexpr unsigned long long kKnownSeed = 1;  // `ksearch run`'s old default
  EvaluatorOptions replay = Options();
  replay.replay_input_seed = kKnownSeed;
  auto predictable = Make(replay);
  ASSERT_TRUE(predictable);
  Evaluation attack = JudgeOne(*predictable, problem_, "predictor_replay", Predictor(kKnownSeed));
  Evaluation honest = JudgeOne(*predictable, problem_, "honest_replay", Honest(300000));
  ASSERT_EQ(attack.status, EvalStatus::kOk) << attack.Report();
  ASSERT_EQ(honest.status, EvalStatus::kOk) << honest.Report();
  // The attack is real: with the seed known, the timed runs were answered
  // from the store (the honest path spins 0.3 ms per block).
  EXPECT_LT(attack.timing->median_ms, 0.5 * honest.timing->median_ms)
      << "the predictor found no run in advance even with the seed known: the test proves nothing";

  auto secret = Make(Options());
  ASSERT_TRUE(secret);
  Evaluation blind = JudgeOne(*secret, problem_, "predictor_secret", Predictor(kKnownSeed));
  Evaluation honest_secret = JudgeOne(*secret, problem_, "honest_secret", Honest(300000));
  ASSERT_EQ(honest_secret.status, EvalStatus::kOk) << honest_secret.Report();
  if (blind.status == EvalStatus::kOk) {
    EXPECT_GT(blind.timing->median_ms, 0.8 * honest_secret.timing->median_ms)
        << "a run was predicted under the judge's secrets";
  } else {
    ADD_FAILURE() << "the predictor computes honestly when it predicts nothing: " << blind.Report();
  }
}

// Class 2: the timing loop starved. The kernel knows the checks take six
// launches and that warm-up once counted against the timing cap: it spins
// 0.4 s on its first warm-up launch (the cap is 0.5 s), then shortcuts two
// timed runs of every three, hoping that the few runs left are mostly
// unchecked. The warm-up is bounded on its own, the timed runs keep their
// cap, and the first timed runs are all checked.
TEST_F(GpuInformedAdversary, SpendingTheBudgetInWarmUpDoesNotShrinkTheCheckedSample) {
  auto evaluator = Make(Options());
  ASSERT_TRUE(evaluator);
  std::string source = Kernel(R"(
  if (launch == )" + std::to_string(kCheckLaunches + 1) + R"() ks_spin(400000000LL);
  if (launch > )" + std::to_string(kCheckLaunches + 1) + R"( && launch % 3 != 0) { ks_garbage_row(yr, cols); return; }
  ks_softmax_row(xr, yr, cols);)");
  Evaluation e = JudgeOne(*evaluator, problem_, "starver", source);
  EXPECT_EQ(e.status, EvalStatus::kWrongResult) << e.Report();
  ASSERT_TRUE(e.mismatch);
  EXPECT_EQ(e.mismatch->phase, "timing");
  EXPECT_EQ(JudgeOne(*evaluator, problem_, "honest", Honest(0)).status, EvalStatus::kOk);
}

// Class 2 again: a kernel whose runs do not fit. An honest kernel of 80 ms
// per run fits about six timed runs in a 0.5 s cap: it is not judged on
// that sample (whose median a kernel could choose) but is a timeout that
// says how many runs fit.
TEST_F(GpuInformedAdversary, AKernelWhoseRunsDoNotFitTheCapIsATimeout) {
  auto evaluator = Make(Options());
  ASSERT_TRUE(evaluator);
  Evaluation e = JudgeOne(*evaluator, problem_, "slow", Honest(80000000));
  EXPECT_EQ(e.status, EvalStatus::kTimeout) << e.Report();
  EXPECT_NE(e.message.find("of the 10 timed runs a figure needs"), std::string::npos) << e.message;
  EXPECT_FALSE(e.timing) << "a timeout carries no figures";
  EXPECT_EQ(JudgeOne(*evaluator, problem_, "honest", Honest(0)).status, EvalStatus::kOk);
}

// Class 3: the sample chosen. Honest on the checks, then honest on every
// fifth launch only: whatever the stop rule, a shortcut run meets a check.
TEST_F(GpuInformedAdversary, ShortcuttingAllButEveryFifthRunIsCaught) {
  auto evaluator = Make(Options());
  ASSERT_TRUE(evaluator);
  std::string source = Kernel(R"(
  if (launch > )" + std::to_string(kCheckLaunches) + R"( && launch % 5 != 0) { ks_garbage_row(yr, cols); return; }
  ks_softmax_row(xr, yr, cols);)");
  Evaluation e = JudgeOne(*evaluator, problem_, "every_fifth", source);
  EXPECT_EQ(e.status, EvalStatus::kWrongResult) << e.Report();
  ASSERT_TRUE(e.mismatch);
  EXPECT_EQ(e.mismatch->phase, "timing");
  EXPECT_EQ(JudgeOne(*evaluator, problem_, "honest", Honest(0)).status, EvalStatus::kOk);
}

// Class 3 with the stop rule known: honest (and noisy, so that the median
// does not settle) for the 24 runs that are surely checked and a generous
// warm-up, then shortcuts every run. Either a shortcut run is checked
// (wrong_result) or the loop stopped on honest runs: it never gets a median
// from its shortcuts.
TEST_F(GpuInformedAdversary, KnowingTheStopRuleBuysNoUncheckedMedian) {
  auto evaluator = Make(Options());
  ASSERT_TRUE(evaluator);
  std::string source = Kernel(R"(
  if (launch > 60) { ks_garbage_row(yr, cols); return; }
  ks_spin(100000 + (long long)((launch * 2654435761u) % 400000u));
  ks_softmax_row(xr, yr, cols);)");
  Evaluation e = JudgeOne(*evaluator, problem_, "stop_rule", source);
  if (e.status == EvalStatus::kOk) {
    ASSERT_TRUE(e.timing);
    EXPECT_GT(e.timing->median_ms, 0.1) << "the median came from shortcut runs";
  } else {
    EXPECT_EQ(e.status, EvalStatus::kWrongResult) << e.Report();
  }
  EXPECT_EQ(JudgeOne(*evaluator, problem_, "honest", Honest(0)).status, EvalStatus::kOk);
}

}  // namespace
}  // namespace ksearch
