// The cudnn_sdpa baseline: cuDNN's fused flash attention, reached through
// the backend (graph) API — the graph PyTorch's cuDNN attention builds:
// S = Q·Kᵀ, S·scale, the causal mask (generated indices, a comparison, a
// select of −inf), softmax (max, subtract, exp, sum, divide; the log-sum-exp
// statistics stay virtual) and O = P·V, with P in the input type as the
// engine requires. Engine configurations come from heuristics mode A; those
// whose execution plans finalize are timed on scratch tensors and the
// fastest is kept (fastest.h). Settings and shapes: see
// core/baseline_settings.h ("cudnn_sdpa") and docs/problems.md.
#ifndef KSEARCH_BASELINES_CUDNN_SDPA_H_
#define KSEARCH_BASELINES_CUDNN_SDPA_H_

#include <memory>

#include "baselines/library_baseline.h"

namespace ksearch::internal {

// Errors: kNotFound when libcudnn.so.9 cannot be loaded; kInvalidArgument
// when the settings do not bind; kUnimplemented when this cuDNN cannot do
// the configuration (no engine, or a mask it does not support: the message
// names the configuration and cuDNN's reason); kInternal when a call fails.
StatusOr<std::unique_ptr<LibraryBaseline>> CreateCudnnSdpa(const Problem& problem);

}  // namespace ksearch::internal

#endif  // KSEARCH_BASELINES_CUDNN_SDPA_H_
