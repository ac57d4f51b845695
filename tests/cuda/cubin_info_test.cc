#include "cuda/cubin_info.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <random>

#include "cuda/compiler.h"

namespace ksearch::internal {
namespace {

// Kernels of every parameter kind the evaluator may meet; each size below is
// what sizeof gives on the host and what cuFuncGetParamInfo reports.
const char kKernels[] = R"(
struct S12 { int a, b, c; };
struct S24 { double a; int b; char c[12]; };
struct Empty {};
struct alignas(16) A16 { float x; };
extern "C" __global__ void pointers(const float* x, float* y, int n) { if (n) y[0] = x[0]; }
extern "C" __global__ void scalars(int a, long long b, float c, double d, short e, char f, float* o) {
  o[0] = a + b + c + d + e + f;
}
extern "C" __global__ void structs(S12 s, S24 t, float* o) { o[0] = s.a + t.b + t.c[3]; }
extern "C" __global__ void grid_constant(const __grid_constant__ S24 t, float* o) { o[0] = t.a; }
extern "C" __global__ void aligned(char c, A16 a, Empty e, float* o) { o[0] = a.x + c; }
extern "C" __global__ void no_params() {}
extern "C" __global__ void unused(float* a, int b, double c) {}
extern "C" __global__ void many(int a0, int a1, int a2, int a3, int a4, int a5, int a6, int a7,
                                int a8, int a9, float* p0, float* p1, float* p2, float* p3,
                                float* p4, float* p5, float* p6, float* p7, int* o) {
  o[0] = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9;
}
template <typename T, int N>
__device__ void scale_impl(const T* x, T* y, int n) { if (n) y[0] = x[0] * N; }
template <typename T, int N>
__global__ void scale_tmpl(const T* x, T* y, int n) { scale_impl<T, N>(x, y, n); }
template __global__ void scale_tmpl<double, 3>(const double*, double*, int);
extern "C" __global__ void scale_f(const float* x, float* y, long long n) { scale_impl<float, 2>(x, y, (int)n); }
__global__ void mangled(char c, double d, short s, int* o) { o[0] = c + d + s; }
)";

// Past 4 KiB of parameters ptxas describes them with EIATTR_KPARAM_INFO_V2.
const char kLargeParams[] = R"(
struct Big { int v[5000]; };
struct Huge { char v[30000]; };
extern "C" __global__ void big(Big b, float* o) { o[0] = b.v[4999]; }
extern "C" __global__ void huge(const __grid_constant__ Huge h, int n, float* o) { o[0] = h.v[n]; }
)";

std::string Cubin(const std::string& source, const std::string& arch = "sm_90",
                  std::vector<std::string> options = {}) {
  CompilerOptions o;
  o.cache_dir = "";
  Compiler compiler(o);
  auto r = compiler.Compile({source, std::move(options), arch, "signatures.cu"});
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok()) return "";
  EXPECT_TRUE(r->ok) << r->log;
  return r->cubin;
}

std::map<std::string, std::vector<int64_t>> SizesByKernel(std::string_view cubin) {
  auto signatures = ReadKernelSignatures(cubin);
  EXPECT_TRUE(signatures.ok()) << signatures.status().ToString();
  std::map<std::string, std::vector<int64_t>> out;
  if (!signatures.ok()) return out;
  for (const KernelSignature& s : *signatures) out[s.name] = ParamSizes(s);
  return out;
}

using Sizes = std::vector<int64_t>;

TEST(CubinInfo, ReadsTheParameterSizesOfEveryEntryPoint) {
  for (const char* arch : {"sm_80", "sm_90", "sm_100"}) {
    SCOPED_TRACE(arch);
    auto sizes = SizesByKernel(Cubin(kKernels, arch));
    EXPECT_EQ(sizes.size(), 11u);
    EXPECT_EQ(sizes["pointers"], (Sizes{8, 8, 4}));
    EXPECT_EQ(sizes["scalars"], (Sizes{4, 8, 4, 8, 2, 1, 8}));
    EXPECT_EQ(sizes["structs"], (Sizes{12, 24, 8}));
    EXPECT_EQ(sizes["grid_constant"], (Sizes{24, 8}));
    EXPECT_EQ(sizes["aligned"], (Sizes{1, 16, 1, 8}));
    EXPECT_TRUE(sizes.count("no_params"));
    EXPECT_EQ(sizes["no_params"], Sizes{});
    EXPECT_EQ(sizes["unused"], (Sizes{8, 4, 8}));
    Sizes many(10, 4);
    many.insert(many.end(), 9, 8);
    EXPECT_EQ(sizes["many"], many);
    EXPECT_EQ(sizes["_Z10scale_tmplIdLi3EEvPKT_PS0_i"], (Sizes{8, 8, 4}));
    EXPECT_EQ(sizes["scale_f"], (Sizes{8, 8, 8}));
    EXPECT_EQ(sizes["_Z7mangledcdsPi"], (Sizes{1, 8, 2, 8}));
  }
}

TEST(CubinInfo, ReadsOffsetsAndTheParameterBlockSize) {
  auto signatures = ReadKernelSignatures(Cubin(kKernels));
  ASSERT_TRUE(signatures.ok()) << signatures.status().ToString();
  auto structs = std::find_if(signatures->begin(), signatures->end(),
                              [](const KernelSignature& s) { return s.name == "structs"; });
  ASSERT_NE(structs, signatures->end());
  ASSERT_EQ(structs->params.size(), 3u);
  EXPECT_EQ(structs->params[0].offset, 0);
  EXPECT_EQ(structs->params[1].offset, 16);  // S24 is 8-aligned
  EXPECT_EQ(structs->params[2].offset, 40);
  EXPECT_EQ(structs->param_bytes, 48);
}

TEST(CubinInfo, ReadsParametersPastFourKibibytes) {
  for (const char* arch : {"sm_90", "sm_100"}) {
    SCOPED_TRACE(arch);
    auto sizes = SizesByKernel(Cubin(kLargeParams, arch));
    EXPECT_EQ(sizes["big"], (Sizes{20000, 8}));
    EXPECT_EQ(sizes["huge"], (Sizes{30000, 4, 8}));
  }
}

// A Hopper TMA kernel takes its tensor map by value as a __grid_constant__
// parameter: 128 bytes, 64-byte aligned (CUtensorMap's layout; cuda.h is a
// host header NVRTC cannot include). The plan's tensor-map argument is
// checked against this size.
TEST(CubinInfo, ReadsATensorMapParameterAs128Bytes) {
  const char source[] = R"(
struct __align__(64) TensorMap { unsigned long long opaque[16]; };
extern "C" __global__ void tma(int n, const __grid_constant__ TensorMap map, float* o) {
  asm volatile("prefetch.tensormap [%0];" :: "l"(reinterpret_cast<unsigned long long>(&map)) : "memory");
  if (n) o[0] = 1.0f;
}
)";
  auto signatures = ReadKernelSignatures(Cubin(source));
  ASSERT_TRUE(signatures.ok()) << signatures.status().ToString();
  ASSERT_EQ(signatures->size(), 1u);
  const KernelSignature& s = signatures->front();
  EXPECT_EQ(ParamSizes(s), (Sizes{4, 128, 8}));
  ASSERT_EQ(s.params.size(), 3u);
  // 48, not 64: the block starts at 0x210 of the constant bank on sm_90,
  // and 0x210 + 48 is the 64-byte boundary the descriptor needs.
  EXPECT_EQ(s.params[1].offset, 48);
  EXPECT_EQ(s.params[2].offset, 176);
}

// The __cluster_dims__ a kernel was compiled with, which a plan's cluster
// must agree with (the compile-only judge has no driver to ask).
TEST(CubinInfo, ReadsTheClusterDimsAKernelDeclares) {
  const char source[] = R"(
extern "C" __global__ void __cluster_dims__(2, 1, 1) pair(float* y) { y[threadIdx.x] = 1.f; }
extern "C" __global__ void __cluster_dims__(4, 2, 1) __launch_bounds__(128) grid42(float* y) { y[0] = 2.f; }
extern "C" __global__ void plain(float* y) { y[0] = 3.f; }
)";
  for (const char* arch : {"sm_90", "sm_100"}) {
    SCOPED_TRACE(arch);
    auto signatures = ReadKernelSignatures(Cubin(source, arch));
    ASSERT_TRUE(signatures.ok()) << signatures.status().ToString();
    std::map<std::string, std::array<uint32_t, 3>> dims;
    for (const KernelSignature& s : *signatures) dims[s.name] = s.cluster_dims;
    EXPECT_EQ(dims["pair"], (std::array<uint32_t, 3>{2, 1, 1}));
    EXPECT_EQ(dims["grid42"], (std::array<uint32_t, 3>{4, 2, 1}));
    EXPECT_EQ(dims["plain"], (std::array<uint32_t, 3>{0, 0, 0}));
  }
}

TEST(CubinInfo, ReadsDebugBuilds) {
  auto sizes = SizesByKernel(Cubin(kKernels, "sm_90", {"-G"}));
  EXPECT_EQ(sizes["scalars"], (Sizes{4, 8, 4, 8, 2, 1, 8}));
  EXPECT_EQ(sizes["_Z7mangledcdsPi"], (Sizes{1, 8, 2, 8}));
}

TEST(CubinInfo, RejectsWhatIsNotACubin) {
  EXPECT_EQ(ReadKernelSignatures("").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadKernelSignatures("not a cubin at all").status().code(),
            StatusCode::kInvalidArgument);
  const std::string cubin = Cubin(kKernels);
  ASSERT_GT(cubin.size(), 1000u);
  std::string elf32 = cubin;
  elf32[4] = 1;  // EI_CLASS
  auto r = ReadKernelSignatures(elf32);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("64-bit"), std::string::npos) << r.status().message();
  std::string no_sections = cubin;
  no_sections[0x3c] = no_sections[0x3d] = 0;  // e_shnum
  r = ReadKernelSignatures(no_sections);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("no readable section headers"), std::string::npos)
      << r.status().message();
}

TEST(CubinInfo, RejectsATruncatedCubin) {
  const std::string cubin = Cubin(kKernels);
  ASSERT_GT(cubin.size(), 1000u);
  uint64_t section_headers = 0;
  std::memcpy(&section_headers, cubin.data() + 0x28, 8);  // e_shoff
  ASSERT_LT(section_headers, cubin.size());
  for (size_t keep : {size_t{64}, cubin.size() / 2, static_cast<size_t>(section_headers) + 100}) {
    auto r = ReadKernelSignatures(std::string_view(cubin).substr(0, keep));
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << keep;
    EXPECT_NE(r.status().message().find("past the end"), std::string::npos) << r.status().message();
  }
}

TEST(CubinInfo, RejectsAParameterTableThatDoesNotAddUp) {
  std::string cubin = Cubin("extern \"C\" __global__ void k(float* x, int n) { x[0] = n; }");
  // The first KPARAM_INFO record: format 4, attribute 0x17, 12 bytes.
  size_t record = cubin.find(std::string("\x04\x17\x0c\x00", 4));
  ASSERT_NE(record, std::string::npos);
  std::string duplicate_ordinal = cubin;
  duplicate_ordinal[record + 8] ^= 1;  // the two parameters now share an ordinal
  auto r = ReadKernelSignatures(duplicate_ordinal);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("kernel 'k'"), std::string::npos) << r.status().message();
  std::string unknown_format = cubin;
  unknown_format[record] = 0x07;
  r = ReadKernelSignatures(unknown_format);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("unknown record format"), std::string::npos)
      << r.status().message();
  std::string too_long = cubin;
  too_long[record + 3] = 0x7f;  // the record now claims 32 KiB
  r = ReadKernelSignatures(too_long);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("past the end"), std::string::npos) << r.status().message();
}

// Random corruption must give a result or an error, never a crash or a read
// outside the data (run under a sanitizer to see the latter).
TEST(CubinInfo, SurvivesRandomCorruption) {
  const std::string cubin = Cubin(kKernels);
  ASSERT_FALSE(cubin.empty());
  std::mt19937_64 rng(14);
  int errors = 0;
  for (int round = 0; round < 400; ++round) {
    std::string mutated = cubin;
    int flips = 1 + static_cast<int>(rng() % 8);
    for (int f = 0; f < flips; ++f) {
      // Half the flips land in the headers and .nv.info sections (the first
      // 6 KiB and the last 2.5 KiB), where they change what is parsed.
      size_t at =
          rng() % 2
              ? rng() % mutated.size()
              : (rng() % 2 ? rng() % std::min<size_t>(6144, mutated.size())
                           : mutated.size() - 1 - rng() % std::min<size_t>(2500, mutated.size()));
      mutated[at] = static_cast<char>(rng());
    }
    if (round % 10 == 0) mutated.resize(rng() % mutated.size());
    auto r = ReadKernelSignatures(mutated);
    if (!r.ok()) {
      ++errors;
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
      continue;
    }
    for (const KernelSignature& s : *r) {
      for (const KernelParam& p : s.params) {
        EXPECT_GT(p.size, 0);
        EXPECT_LE(p.offset + p.size, s.param_bytes);
      }
    }
  }
  EXPECT_GT(errors, 40);  // the corruption does reach what is parsed
}

}  // namespace
}  // namespace ksearch::internal
