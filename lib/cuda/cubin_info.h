// The parameter lists of a cubin's entry points, read from the cubin itself.
//
// The compile-only evaluator has no driver to ask (cuFuncGetParamInfo), so it
// reads what the driver reads: each entry point `name` has an ELF section
// `.nv.info.name` of attribute records; EIATTR_KPARAM_INFO (or _V2, which
// ptxas 13.0 emits once a kernel's parameters take more than about 4 KiB)
// gives each parameter's ordinal, offset and size, and EIATTR_CBANK_PARAM_SIZE
// the total. Checked against cuobjdump's decoding and cuFuncGetParamInfo on an
// H200 for pointers, scalars, structs by value, __grid_constant__ and 30 KB
// parameters. EIATTR_CTA_PER_CLUSTER gives a kernel's __cluster_dims__
// (read from ptxas 13.0 cubins for sm_90, with and without the attribute).
//
// The bytes come from a compiler run on untrusted source: every read is
// bounds-checked, and a layout that does not add up (records past the
// section's end, ordinals that are not 0..n-1, overlapping parameters, sizes
// beyond the declared total) is an error, never a guess.
//
// Thread safety: stateless functions; safe from any thread.
#ifndef KSEARCH_CUDA_CUBIN_INFO_H_
#define KSEARCH_CUDA_CUBIN_INFO_H_

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ksearch/status.h"

namespace ksearch::internal {

struct KernelParam {
  int64_t offset = 0;  // bytes from the start of the parameter block
  int64_t size = 0;    // bytes (8 for a pointer, sizeof(T) for a value)
};

struct KernelSignature {
  std::string name;                 // as in the symbol table (mangled unless extern "C")
  std::vector<KernelParam> params;  // in declaration order
  // EIATTR_CBANK_PARAM_SIZE: bytes of the whole parameter block; 0 when the
  // cubin does not say (a kernel without parameters).
  int64_t param_bytes = 0;
  // EIATTR_CTA_PER_CLUSTER: the __cluster_dims__ the kernel was compiled
  // with; all zero when it declares none.
  std::array<uint32_t, 3> cluster_dims{};
};

// Sizes of the parameters in declaration order.
std::vector<int64_t> ParamSizes(const KernelSignature& signature);

// The signatures of every entry point of `cubin` (a little-endian ELF64 cubin
// as NVRTC makes it), in section order.
// Errors: kInvalidArgument naming what cannot be read (not an ELF64 cubin, a
// section header or record past the end of the data, an unknown record
// format, a parameter layout that does not add up, a kernel described twice).
StatusOr<std::vector<KernelSignature>> ReadKernelSignatures(std::string_view cubin);

}  // namespace ksearch::internal

#endif  // KSEARCH_CUDA_CUBIN_INFO_H_
