// The rules that a launch's arguments match its kernel's parameters and its
// cluster the kernel's, shared by the GPU judge (sizes and cluster from the
// driver) and the compile-only judge (read from the cubin,
// cuda/cubin_info.h).
//
// Thread safety: a pure function; safe from any thread.
#ifndef KSEARCH_CORE_PLAN_SIGNATURE_H_
#define KSEARCH_CORE_PLAN_SIGNATURE_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/plan_resolve.h"
#include "ksearch/candidate.h"
#include "ksearch/evaluation.h"

namespace ksearch::internal {

// Empty when `launch` (launches[index] of a plan, resolved from `spec`) passes
// exactly as many arguments as the kernel has parameters, each of the
// parameter's size in bytes (`param_sizes`, in declaration order). Otherwise
// the reason, for an invalid_plan verdict, naming the launch, the kernel and
// the argument as the plan writes it:
//   launches[0] (scale): the plan passes 2 arguments but the kernel takes 3
//   launches[0] (scale): argument 2 ("n:i32") is 8 bytes in the kernel but
//   the plan passes 4 (pointers are 8 bytes; scalars i32/f32 4, i64 8; tensor
//   maps 128)
// A tensor map (128 bytes) passed for a pointer, or a pointer or scalar for a
// 128-byte parameter, says which is which and how to declare or write it.
std::string ArgumentMismatch(size_t index, const LaunchSpec& spec, const ResolvedLaunch& launch,
                             std::span<const int64_t> param_sizes);

// Empty when launches[index]'s cluster agrees with its kernel: `compiled`
// is the kernel's __cluster_dims__ (all zero: none; from the driver's
// CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_* or the cubin, cuda/cubin_info.h) and
// `cc` the compute capability the kernel is built for (90 for sm_90).
// Otherwise the reason, for an invalid_plan verdict:
//   launches[0] (k): clusters need sm_90 or newer, and the kernel is built
//   for sm_80
//   launches[0] (k): the plan asks for cluster [4, 1, 1] but the kernel
//   declares __cluster_dims__(2, 1, 1); drop "cluster" from the plan or
//   make the two agree
//   launches[0] (k): grid [6, 1, 1] is not a whole number of the kernel's
//   __cluster_dims__(4, 1, 1) (x)
std::string ClusterMismatch(size_t index, const ResolvedLaunch& launch,
                            const std::array<uint32_t, 3>& compiled, int cc);

// Why launches[launch]'s kernel is missing, naming the candidate (for
// `ksearch eval`, the source file) and the entry points its source has:
//   launches[0]: kernel 'k' is not an entry point of 'c1' (its entry points:
//   a, b; is the kernel declared extern "C" __global__?)
std::string MissingKernel(size_t launch, const std::string& kernel, const std::string& candidate,
                          const std::vector<KernelResources>& found);

}  // namespace ksearch::internal

#endif  // KSEARCH_CORE_PLAN_SIGNATURE_H_
