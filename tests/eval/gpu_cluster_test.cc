// Thread-block clusters asked for by the plan, on a GPU: a row softmax whose
// row is split over the CL blocks of a cluster, which exchange their partial
// maxima and sums through distributed shared memory
// (cluster.map_shared_rank), passes the strict check when the plan launches
// it with "cluster": ["CL", 1, 1] (cuLaunchKernelEx) — at CL 2, 4 and 8, from
// one source. A kernel compiled with __cluster_dims__ runs through a plan
// that gives none or the same, and one that contradicts it is an
// invalid_plan before any launch.
#include <gtest/gtest.h>

#include "ksearch/evaluator.h"
#include "test_util.h"

namespace ksearch {
namespace {

// Row `blockIdx.x / CL`, columns [rank · cols / CL, (rank + 1) · cols / CL).
constexpr char kClusterSoftmax[] = R"(
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

__device__ float BlockReduce(float v, float* red, bool take_max) {
  red[threadIdx.x] = v;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) {
      red[threadIdx.x] = take_max ? fmaxf(red[threadIdx.x], red[threadIdx.x + s])
                                  : red[threadIdx.x] + red[threadIdx.x + s];
    }
    __syncthreads();
  }
  float out = red[0];
  __syncthreads();
  return out;
}

extern "C" __global__ void CLUSTER_ATTRIBUTE cluster_softmax(const float* x, float* y, int cols) {
  cg::cluster_group cluster = cg::this_cluster();
  const unsigned rank = cluster.block_rank();
  const unsigned blocks = cluster.num_blocks();
  const int row = blockIdx.x / blocks;
  const int slice = cols / blocks;
  const float* xr = x + static_cast<size_t>(row) * cols + rank * slice;
  float* yr = y + static_cast<size_t>(row) * cols + rank * slice;
  __shared__ float red[256];
  __shared__ float stats[2];  // this block's max and sum, read by the others
  float m = -__int_as_float(0x7f800000);
  for (int i = threadIdx.x; i < slice; i += blockDim.x) m = fmaxf(m, xr[i]);
  m = BlockReduce(m, red, true);
  if (threadIdx.x == 0) stats[0] = m;
  cluster.sync();
  float row_max = -__int_as_float(0x7f800000);
  for (unsigned r = 0; r < blocks; ++r) row_max = fmaxf(row_max, *cluster.map_shared_rank(&stats[0], r));
  float s = 0.f;
  for (int i = threadIdx.x; i < slice; i += blockDim.x) s += expf(xr[i] - row_max);
  s = BlockReduce(s, red, false);
  if (threadIdx.x == 0) stats[1] = s;
  cluster.sync();
  float row_sum = 0.f;
  for (unsigned r = 0; r < blocks; ++r) row_sum += *cluster.map_shared_rank(&stats[1], r);
  for (int i = threadIdx.x; i < slice; i += blockDim.x) yr[i] = expf(xr[i] - row_max) / row_sum;
  // No block may leave while another still reads its shared memory.
  cluster.sync();
}
)";

class GpuCluster : public ::testing::Test {
 protected:
  void SetUp() override {
    KSEARCH_REQUIRE_GPU();
    problem_ = testing::RowSoftmaxProblem(512, 4096);
    auto e = CreateLocalEvaluator(problem_, testing::FastGpuOptions(23));
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    evaluator_ = std::move(*e);
    if (evaluator_->device().cc_major < 9) GTEST_SKIP() << "clusters need sm_90 or newer";
  }

  Evaluation Judge(const std::string& id, const std::string& attribute, int cl, const std::string& cluster) {
    Candidate c;
    c.id = id;
    c.source = "#define CLUSTER_ATTRIBUTE " + attribute + "\n" + kClusterSoftmax;
    auto plan = LaunchPlan::FromJson(
        R"({"params": {"CL": )" + std::to_string(cl) +
            R"(}, "launches": [{"kernel": "cluster_softmax", "grid": ["rows * CL", 1, 1], "block": [256, 1, 1], )" +
            cluster + R"( "args": ["x", "y", "cols:i32"]}]})",
        id);
    EXPECT_TRUE(plan.ok()) << plan.status().ToString();
    if (plan.ok()) c.plan = *plan;
    Evaluation e = evaluator_->Evaluate(std::span<const Candidate>(&c, 1)).front();
    std::printf("[%s] %s", id.c_str(), e.Report().c_str());
    return e;
  }

  Problem problem_;
  std::unique_ptr<Evaluator> evaluator_;
};

TEST_F(GpuCluster, DistributedSharedMemoryThroughThePlansClusterPassesTheStrictCheck) {
  for (int cl : {2, 4, 8}) {
    Evaluation e = Judge("cl" + std::to_string(cl), "", cl, R"("cluster": ["CL", 1, 1],)");
    EXPECT_EQ(e.status, EvalStatus::kOk) << e.Report() << e.details;
    EXPECT_TRUE(e.timing.has_value()) << e.Report();
  }
}

TEST_F(GpuCluster, AKernelsOwnClusterDimsRunWithoutOrWithTheSamePlanCluster) {
  Evaluation e = Judge("declared", "__cluster_dims__(4, 1, 1)", 4, "");
  EXPECT_EQ(e.status, EvalStatus::kOk) << e.Report() << e.details;
  e = Judge("declared_same", "__cluster_dims__(4, 1, 1)", 4, R"("cluster": [4, 1, 1],)");
  EXPECT_EQ(e.status, EvalStatus::kOk) << e.Report() << e.details;
}

TEST_F(GpuCluster, APlanClusterThatContradictsTheKernelIsAnInvalidPlan) {
  Evaluation e = Judge("contradicts", "__cluster_dims__(2, 1, 1)", 4, R"("cluster": ["CL", 1, 1],)");
  EXPECT_EQ(e.status, EvalStatus::kInvalidPlan) << e.Report();
  EXPECT_NE(e.message.find("the plan asks for cluster [4, 1, 1] but the kernel declares __cluster_dims__(2, 1, 1)"),
            std::string::npos)
      << e.message;
  // The judge goes on.
  e = Judge("after", "", 2, R"("cluster": ["CL", 1, 1],)");
  EXPECT_EQ(e.status, EvalStatus::kOk) << e.Report() << e.details;
}

}  // namespace
}  // namespace ksearch
