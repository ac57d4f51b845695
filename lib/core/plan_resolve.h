// Turns a LaunchPlan into concrete numbers for one problem: grid and block
// sizes, dynamic shared memory, workspace sizes and argument bindings. Shared by
// the evaluator (before any launch) and compile-only checks.
#ifndef KSEARCH_CORE_PLAN_RESOLVE_H_
#define KSEARCH_CORE_PLAN_RESOLVE_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "ksearch/candidate.h"
#include "ksearch/problem.h"
#include "ksearch/status.h"

namespace ksearch::internal {

struct ResolvedArg {
  enum class Kind { kTensor, kWorkspace, kI32, kI64, kF32 };
  Kind kind = Kind::kTensor;
  int index = -1;         // into Problem::tensors or the plan's workspace
  int64_t int_value = 0;  // kI32, kI64
  float float_value = 0;  // kF32
  // Bytes the kernel parameter occupies (8 for pointers).
  int64_t Size() const { return kind == Kind::kI32 || kind == Kind::kF32 ? 4 : 8; }
};

struct ResolvedLaunch {
  std::string kernel;
  std::array<uint32_t, 3> grid{};
  std::array<uint32_t, 3> block{};
  int64_t shared_bytes = 0;
  std::vector<ResolvedArg> args;
  int64_t Threads() const { return int64_t{block[0]} * block[1] * block[2]; }
};

struct ResolvedPlan {
  std::vector<int64_t> workspace_elements;
  std::vector<ResolvedLaunch> launches;
};

// Caps on the size of one plan. Plans come from remote models, so each
// dimension of a plan is bounded before anything is allocated or launched.
// The caps sit far above what a real kernel needs (the shipped plans use at
// most 5 launches, 2 workspaces, 15 arguments and 29-character names) and far
// below what would hurt the host or the device.
inline constexpr size_t kMaxLaunches = 64;
inline constexpr size_t kMaxWorkspaces = 32;
inline constexpr size_t kMaxArgsPerLaunch = 64;  // 64 × 8 bytes is well inside CUDA's 4 KiB of parameters
inline constexpr size_t kMaxParams = 64;
// Param, workspace and kernel names, and tensor or workspace names in args.
inline constexpr size_t kMaxNameLength = 128;
// All workspace buffers of a plan together, in bytes (elements × dtype size,
// checked 64-bit). 16 GiB is over 50 times the largest workspace of a built-in
// problem (under 300 MB), and about an eighth of an H200, so a hostile plan
// cannot take the device from the reference and the other evaluations.
inline constexpr int64_t kMaxWorkspaceBytes = int64_t{16} << 30;

// Checks the caps above and the length of every expression of the plan
// (kMaxExpressionLength). Errors: kInvalidArgument naming the field, the
// value and the cap ("launches: 65 launches (at most 64)",
// "launches[2].args: 70 arguments (at most 64)").
Status CheckPlanCaps(const LaunchPlan& plan);

// Dims followed by the plan's params: the names expressions may use.
std::vector<std::pair<std::string, int64_t>> PlanValues(const Problem& problem,
                                                        const LaunchPlan& plan);

// Errors: kInvalidArgument naming the field ("launches[1].grid[0]"), the
// expression and the reason: unknown names, an argument that names no tensor
// or workspace, sizes out of CUDA's limits (grid.x < 2^31, grid.y/z and
// block.z within 65535, at most 1024 threads per block), params shadowing
// dims, negative sizes, an expression that does not evaluate (overflow,
// division by zero, too long or too deep), a cap of CheckPlanCaps, workspace
// beyond kMaxWorkspaceBytes in all.
StatusOr<ResolvedPlan> ResolvePlan(const Problem& problem, const LaunchPlan& plan);

// -D defines for the plan's params ("-DBLOCK=256").
std::vector<std::string> ParamDefines(const LaunchPlan& plan);

// The parameters of one launch as cuLaunchKernel takes them: each argument's
// value in a 64-bit slot of `storage` and a pointer to that slot in `args`
// (both resized to the launch's argument count). Tensor and workspace
// arguments take the device addresses `tensor(index)` and
// `workspace(index)` give. Shared by the judge and KernelRunner, so that a
// kernel runs in an application exactly as it was judged.
template <typename TensorAddress, typename WorkspaceAddress>
void MarshalArguments(const ResolvedLaunch& launch, TensorAddress tensor,
                      WorkspaceAddress workspace, std::vector<uint64_t>* storage,
                      std::vector<void*>* args) {
  storage->assign(launch.args.size(), 0);
  args->assign(launch.args.size(), nullptr);
  for (size_t a = 0; a < launch.args.size(); ++a) {
    const ResolvedArg& arg = launch.args[a];
    uint64_t& slot = (*storage)[a];
    switch (arg.kind) {
      case ResolvedArg::Kind::kTensor: slot = tensor(static_cast<size_t>(arg.index)); break;
      case ResolvedArg::Kind::kWorkspace: slot = workspace(static_cast<size_t>(arg.index)); break;
      case ResolvedArg::Kind::kI32: {
        int32_t v = static_cast<int32_t>(arg.int_value);
        std::memcpy(&slot, &v, 4);
        break;
      }
      case ResolvedArg::Kind::kI64: std::memcpy(&slot, &arg.int_value, 8); break;
      case ResolvedArg::Kind::kF32: std::memcpy(&slot, &arg.float_value, 4); break;
    }
    (*args)[a] = &slot;
  }
}

}  // namespace ksearch::internal

#endif  // KSEARCH_CORE_PLAN_RESOLVE_H_
