// The GEMM sequences' elementwise kernels (baselines/gemm_sequence.h) are
// compiled with NVRTC when a sequence baseline is created on the GPU; a
// compile error there would leave the fused problems without their
// baseline. They must compile here, without a GPU, for the archs ksearch
// runs on, with every entry point the baselines launch.
#include "baselines/gemm_sequence.h"

#include <gtest/gtest.h>

#include <string>

namespace ksearch {
namespace {

TEST(GemmSequenceKernels, CompileWithEveryEntryPointTheBaselinesLaunch) {
  for (const char* arch : {"sm_80", "sm_90"}) {
    internal::CompileResult compiled = internal::CompileGemmSequenceKernels(arch);
    ASSERT_TRUE(compiled.ok) << arch << ":\n" << compiled.log;
    EXPECT_FALSE(compiled.cubin.empty());
    for (const char* op : {"ks_swiglu", "ks_residual", "ks_rope"}) {
      for (const char* type : {"_f32", "_bf16"}) {
        const std::string name = std::string(op) + type;
        bool found = false;
        for (const KernelResources& r : compiled.resources) found = found || r.kernel == name;
        EXPECT_TRUE(found) << arch << ": no entry point " << name;
      }
    }
    for (const KernelResources& r : compiled.resources) {
      EXPECT_EQ(r.spill_store_bytes, 0) << arch << " " << r.kernel;
    }
  }
}

TEST(GemmSequenceKernels, EveryNamedSequenceIsOne) {
  for (const char* name :
       {"cublaslt_gemm+swiglu", "cublaslt_gemm+residual", "cublaslt_gemm+rope"}) {
    EXPECT_TRUE(internal::IsGemmSequence(name)) << name;
  }
  EXPECT_FALSE(internal::IsGemmSequence("cublaslt_gemm"));
  EXPECT_FALSE(internal::IsGemmSequence("cublaslt_gemm+gelu"));
}

}  // namespace
}  // namespace ksearch
