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
#include <string_view>
#include <utility>
#include <vector>

#include "ksearch/candidate.h"
#include "ksearch/problem.h"
#include "ksearch/status.h"

namespace ksearch::internal {

// A tensor-map argument as a plan writes it (docs/kernel-contract.md):
//
//   {"tensor_map": "A", "box": ["BK", "BM"], "swizzle": "128B"}
//
// a TMA descriptor (CUtensorMap) over one of the problem's tensors, which the
// executor encodes from the tensor's real buffer and extent before every
// launch. All lists are innermost dimension first, as the driver takes them.
// In LaunchSpec::args such an argument is its canonical JSON text
// (TensorMapSpec::ToJson), so a plan's arguments stay one list of strings.
struct TensorMapSpec {
  std::string tensor;             // a problem tensor (not a workspace)
  std::vector<std::string> dims;  // optional view: 1..5 extents whose product is the tensor's size
  std::vector<std::string> box;   // one expression per dimension of the map
  std::string swizzle = "none";   // none, 32B, 64B, 128B
  std::string l2_promotion = "none";  // none, 64B, 128B, 256B
  std::string oob_fill = "zero";      // zero, nan (float tensors only)

  // Canonical JSON: keys in the order above, "dims" only when given.
  std::string ToJson() const;
  friend bool operator==(const TensorMapSpec&, const TensorMapSpec&) = default;
};

// Whether an argument text is a tensor map (a JSON object) rather than a name
// or a scalar.
inline bool IsTensorMapArg(std::string_view arg) { return !arg.empty() && arg.front() == '{'; }

// Parses a tensor-map argument. `origin` and `path` name it in errors
// ("plan.json: launches[0].args[1].swizzle: 'wide' is not one of none, 32B,
// 64B, 128B"). Checks the form only (keys, types, value names, 1..5 box
// entries, dims and box of one length); ResolvePlan checks the values.
StatusOr<TensorMapSpec> ParseTensorMapArg(std::string_view json, std::string_view origin,
                                          std::string_view path);

// The same for an argument inside a plan being parsed (LaunchPlan::FromJson).
class JsonNode;
StatusOr<TensorMapSpec> ParseTensorMapNode(const JsonNode& node);

// The most characters of a tensor-map argument's text (CheckPlanCaps): room
// for eleven expressions of kMaxExpressionLength (five of dims, five of box
// and the keys).
inline constexpr size_t kMaxTensorMapArgLength = 11 * kMaxExpressionLength;

// A tensor map resolved at one set of dims: what cuTensorMapEncodeTiled takes,
// less the address, which the executor adds at launch.
struct ResolvedTensorMap {
  enum class Swizzle { kNone, k32B, k64B, k128B };
  enum class L2Promotion { kNone, k64B, k128B, k256B };
  enum class OobFill { kZero, kNan };
  DType dtype = DType::kF32;
  int rank = 0;                             // 1..5
  std::array<uint64_t, 5> dims{};           // elements, innermost first
  std::array<uint64_t, 4> strides{};        // bytes, of dims 1..rank-1
  std::array<uint32_t, 5> box{};            // elements, innermost first
  Swizzle swizzle = Swizzle::kNone;
  L2Promotion l2_promotion = L2Promotion::kNone;
  OobFill oob_fill = OobFill::kZero;

  friend bool operator==(const ResolvedTensorMap&, const ResolvedTensorMap&) = default;
};

// The bytes of a CUtensorMap, and its alignment (cuda.h declares 128; the
// driver requires 64 of the descriptor it encodes).
inline constexpr int64_t kTensorMapBytes = 128;
inline constexpr size_t kTensorMapAlignment = 128;

struct ResolvedArg {
  enum class Kind { kTensor, kWorkspace, kI32, kI64, kF32, kTensorMap };
  Kind kind = Kind::kTensor;
  int index = -1;         // into Problem::tensors (kTensor, kTensorMap) or the plan's workspace
  int64_t int_value = 0;  // kI32, kI64
  float float_value = 0;  // kF32
  ResolvedTensorMap tensor_map;  // kTensorMap
  // Bytes the kernel parameter occupies (8 for pointers, 128 for a tensor map).
  int64_t Size() const {
    if (kind == Kind::kTensorMap) return kTensorMapBytes;
    return kind == Kind::kI32 || kind == Kind::kF32 ? 4 : 8;
  }
};

// Blocks per thread-block cluster: the most every GPU with clusters runs
// (CUDA's portable size), and the most any GPU runs with the non-portable
// opt-in (sm_90 and sm_100: 16).
inline constexpr int64_t kPortableClusterSize = 8;
inline constexpr int64_t kMaxClusterSize = 16;

struct ResolvedLaunch {
  std::string kernel;
  std::array<uint32_t, 3> grid{};
  std::array<uint32_t, 3> block{};
  int64_t shared_bytes = 0;
  // Blocks per cluster in x, y, z; all zero when the plan asks for none.
  std::array<uint32_t, 3> cluster{};
  bool non_portable_cluster_size = false;
  std::vector<ResolvedArg> args;
  int64_t Threads() const { return int64_t{block[0]} * block[1] * block[2]; }
  bool HasCluster() const { return cluster[0] > 0; }
  int64_t ClusterSize() const { return int64_t{cluster[0]} * cluster[1] * cluster[2]; }
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
// beyond kMaxWorkspaceBytes in all; and a tensor map over an unknown tensor
// (or a workspace), of rank outside 1..5, whose "dims" view does not cover
// the tensor exactly, whose strides are not multiples of 16 bytes (or reach
// 2^40), with a box entry outside 1..256 or larger than the map's dimension,
// a box whose inner dimension is not a multiple of 16 bytes or exceeds the
// swizzle span (32, 64 or 128 bytes), or NaN fill over an integer tensor;
// and a cluster with a dimension below 1, one that does not divide the
// grid's, or more blocks than kPortableClusterSize (kMaxClusterSize with
// non_portable_cluster_size).
StatusOr<ResolvedPlan> ResolvePlan(const Problem& problem, const LaunchPlan& plan);

// -D defines for the plan's params ("-DBLOCK=256").
std::vector<std::string> ParamDefines(const LaunchPlan& plan);

// One kernel parameter's bytes: room for the largest (a CUtensorMap) at the
// alignment the driver requires of a tensor map.
struct alignas(kTensorMapAlignment) ArgumentSlot {
  unsigned char bytes[kTensorMapBytes];
};

// The parameters of one launch as cuLaunchKernel takes them: each argument's
// value in a slot of `storage` and a pointer to that slot in `args` (both
// resized to the launch's argument count). Tensor and workspace arguments
// take the device addresses `tensor(index)` and `workspace(index)` give; a
// tensor map is written into its slot by `encode(arg, tensor(index), slot)`,
// which returns false when the driver refuses it. Returns the index of the
// first argument `encode` refused, or -1. Shared by the judge and
// KernelRunner, so that a kernel runs in an application exactly as it was
// judged.
template <typename TensorAddress, typename WorkspaceAddress, typename EncodeTensorMap>
int MarshalArguments(const ResolvedLaunch& launch, TensorAddress tensor, WorkspaceAddress workspace,
                     EncodeTensorMap encode, std::vector<ArgumentSlot>* storage,
                     std::vector<void*>* args) {
  storage->assign(launch.args.size(), ArgumentSlot{});
  args->assign(launch.args.size(), nullptr);
  for (size_t a = 0; a < launch.args.size(); ++a) {
    const ResolvedArg& arg = launch.args[a];
    unsigned char* slot = (*storage)[a].bytes;
    switch (arg.kind) {
      case ResolvedArg::Kind::kTensor: {
        uint64_t address = tensor(static_cast<size_t>(arg.index));
        std::memcpy(slot, &address, 8);
        break;
      }
      case ResolvedArg::Kind::kWorkspace: {
        uint64_t address = workspace(static_cast<size_t>(arg.index));
        std::memcpy(slot, &address, 8);
        break;
      }
      case ResolvedArg::Kind::kI32: {
        int32_t v = static_cast<int32_t>(arg.int_value);
        std::memcpy(slot, &v, 4);
        break;
      }
      case ResolvedArg::Kind::kI64: std::memcpy(slot, &arg.int_value, 8); break;
      case ResolvedArg::Kind::kF32: std::memcpy(slot, &arg.float_value, 4); break;
      case ResolvedArg::Kind::kTensorMap:
        if (!encode(arg, tensor(static_cast<size_t>(arg.index)), static_cast<void*>(slot))) {
          return static_cast<int>(a);
        }
        break;
    }
    (*args)[a] = slot;
  }
  return -1;
}

}  // namespace ksearch::internal

#endif  // KSEARCH_CORE_PLAN_RESOLVE_H_
