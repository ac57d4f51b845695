#include "core/plan_signature.h"

#include <algorithm>

namespace ksearch::internal {

std::string ArgumentMismatch(size_t index, const LaunchSpec& spec, const ResolvedLaunch& launch,
                             std::span<const int64_t> param_sizes) {
  const std::string where = "launches[" + std::to_string(index) + "] (" + launch.kernel + ")";
  if (param_sizes.size() != launch.args.size()) {
    return where + ": the plan passes " + std::to_string(launch.args.size()) +
           " arguments but the kernel takes " + std::to_string(param_sizes.size());
  }
  for (size_t a = 0; a < param_sizes.size(); ++a) {
    const ResolvedArg& arg = launch.args[a];
    if (param_sizes[a] == arg.Size()) continue;
    // A tensor map's text is JSON already: shown as it is, not quoted.
    std::string text;
    if (a < spec.args.size()) {
      text = IsTensorMapArg(spec.args[a]) ? " (" + spec.args[a] + ")" : " (\"" + spec.args[a] + "\")";
    }
    std::string head = where + ": argument " + std::to_string(a) + text + " is " +
                       std::to_string(param_sizes[a]) + " bytes in the kernel but the plan passes ";
    if (arg.kind == ResolvedArg::Kind::kTensorMap) {
      return head + "a tensor map (" + std::to_string(kTensorMapBytes) +
             " bytes by value); declare the parameter const __grid_constant__ CUtensorMap";
    }
    if (param_sizes[a] == kTensorMapBytes) {
      return head + std::to_string(arg.Size()) +
             (arg.kind == ResolvedArg::Kind::kTensor || arg.kind == ResolvedArg::Kind::kWorkspace
                  ? " (a pointer)"
                  : "") +
             "; a 128-byte parameter (a CUtensorMap) takes a tensor map, written "
             "{\"tensor_map\": TENSOR, \"box\": [...]}";
    }
    return head + std::to_string(arg.Size()) +
           " (pointers are 8 bytes; scalars i32/f32 4, i64 8; tensor maps 128)";
  }
  return "";
}

std::string MissingKernel(size_t launch, const std::string& kernel, const std::string& candidate,
                          const std::vector<KernelResources>& found) {
  std::vector<std::string> sorted;
  for (const KernelResources& r : found) sorted.push_back(r.kernel);
  std::sort(sorted.begin(), sorted.end());
  std::string names;
  for (const std::string& name : sorted) names += (names.empty() ? "" : ", ") + name;
  return "launches[" + std::to_string(launch) + "]: kernel '" + kernel + "' is not an entry point of " +
         (candidate.empty() ? std::string("the source") : "'" + candidate + "'") + " (" +
         (names.empty() ? std::string("it has no extern \"C\" __global__ function")
                        : "its entry points: " + names) +
         "; is the kernel declared extern \"C\" __global__?)";
}

namespace {

std::string Dim3Text(const std::array<uint32_t, 3>& d, const char* open, const char* close) {
  return open + std::to_string(d[0]) + ", " + std::to_string(d[1]) + ", " + std::to_string(d[2]) + close;
}

}  // namespace

std::string ClusterMismatch(size_t index, const ResolvedLaunch& launch,
                            const std::array<uint32_t, 3>& compiled, int cc) {
  const std::string where = "launches[" + std::to_string(index) + "] (" + launch.kernel + ")";
  const bool declared = compiled[0] > 0;
  if (launch.HasCluster() && cc > 0 && cc < 90) {
    return where + ": clusters need sm_90 or newer, and the kernel is built for sm_" +
           std::to_string(cc);
  }
  if (launch.HasCluster() && declared && launch.cluster != compiled) {
    return where + ": the plan asks for cluster " + Dim3Text(launch.cluster, "[", "]") +
           " but the kernel declares " + Dim3Text(compiled, "__cluster_dims__(", ")") +
           "; drop \"cluster\" from the plan or make the two agree";
  }
  if (declared) {
    static constexpr const char* kAxis[3] = {"x", "y", "z"};
    for (int d = 0; d < 3; ++d) {
      if (launch.grid[d] % compiled[d] != 0) {
        return where + ": grid " + Dim3Text(launch.grid, "[", "]") +
               " is not a whole number of the kernel's " +
               Dim3Text(compiled, "__cluster_dims__(", ")") + " (" + kAxis[d] + ")";
      }
    }
  }
  return "";
}

}  // namespace ksearch::internal
