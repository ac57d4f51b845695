// The GEMM sequences: the unfused way an engine computes a projection with an
// elementwise epilogue, as one baseline timed as a whole. A cuBLASLt GEMM
// (cublaslt_matmul.h) writes the projection into a buffer of the baseline's
// own, then one elementwise launch (a small kernel compiled with NVRTC when
// the baseline is created) reads it and writes the problem's outputs:
//
//   cublaslt_gemm+swiglu    c = silu(h[:, :n]) · h[:, n:],  h = a · bᵀ, b = [Wg; Wu]
//   cublaslt_gemm+residual  c = h + r,                      h = a · bᵀ
//   cublaslt_gemm+rope      q, key = rope(t), value = t,   t = a · bᵀ, b = [Wq; Wk; Wv]
//
// The buffer's type is the setting `intermediate`: "f32" (the default) rounds
// each output once, as the fused op does; "bf16" is what an engine that
// stores the projection in bf16 computes, rounded twice. Settings and shapes:
// core/baseline_settings.h; what each includes: docs/problems.md.
#ifndef KSEARCH_BASELINES_GEMM_SEQUENCE_H_
#define KSEARCH_BASELINES_GEMM_SEQUENCE_H_

#include <memory>
#include <string>
#include <string_view>

#include "baselines/library_baseline.h"
#include "cuda/compiler.h"

namespace ksearch::internal {

// True for the names above.
bool IsGemmSequence(std::string_view library);

// Errors: as CreateLibraryBaseline; kInternal also when the elementwise
// kernel does not compile (NVRTC's log) or load.
StatusOr<std::unique_ptr<LibraryBaseline>> CreateGemmSequence(const Problem& problem);

// Every sequence's elementwise kernels compiled for `arch` ("sm_90") with
// NVRTC in this process (no GPU needed): the entry points
// ks_{swiglu,residual,rope}_{f32,bf16}, the suffix the intermediate type.
CompileResult CompileGemmSequenceKernels(const std::string& arch);

}  // namespace ksearch::internal

#endif  // KSEARCH_BASELINES_GEMM_SEQUENCE_H_
