// Exporting a kernel: the C++ header that embeds a cubin with a launch
// function, and ExportRunKernel, which writes a run's kernel to a folder.
#include <sys/stat.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/file_util.h"
#include "core/plan_resolve.h"
#include "cuda/compiler.h"
#include "cuda/cubin_info.h"
#include "cuda/plan_executor.h"
#include "ksearch/kernel_cache.h"
#include "ksearch/store.h"
#include "ksearch/version.h"
#include "store/records.h"

namespace ksearch {
namespace {

std::string Identifier(std::string_view name) {
  std::string out;
  for (char c : name) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0]))) out = "k_" + out;
  return out;
}

// Plan expressions are C++ integer expressions once the grammar's three
// functions are renamed to the header's helpers and every value is int64_t.
std::string CppExpression(std::string_view expression) {
  std::string out;
  size_t i = 0;
  while (i < expression.size()) {
    char c = expression[i];
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t j = i;
      while (j < expression.size() &&
             (std::isalnum(static_cast<unsigned char>(expression[j])) || expression[j] == '_')) {
        ++j;
      }
      std::string word(expression.substr(i, j - i));
      if (word == "ceil_div" || word == "min" || word == "max") word = "ks_" + word;
      out += word;
      i = j;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t j = i;
      while (j < expression.size() && std::isalnum(static_cast<unsigned char>(expression[j]))) ++j;
      // 64-bit literals: the grammar computes in int64, C++ would use int.
      out += "int64_t(" + std::string(expression.substr(i, j - i)) + ")";
      i = j;
    } else {
      out += c;
      ++i;
    }
  }
  return out;
}

std::string PointerType(const TensorSpec& t) {
  std::string base;
  switch (t.dtype) {
    case DType::kF32: base = "float"; break;
    case DType::kF64: base = "double"; break;
    case DType::kI32: base = "int32_t"; break;
    case DType::kI64: base = "int64_t"; break;
    case DType::kU8: base = "uint8_t"; break;
    case DType::kF16:
    case DType::kBF16: base = "void"; break;  // __half / __nv_bfloat16 without their headers
  }
  return (t.role == TensorRole::kInput ? "const " : "") + base + "*";
}

std::string Shape(const TensorSpec& t) {
  std::string out = "[";
  for (size_t i = 0; i < t.shape.size(); ++i) out += (i ? ", " : "") + t.shape[i];
  return out + "]";
}

std::string Double(double value) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.4g", value);
  return text;
}

// The statements that encode tensor-map argument `var` (a CUtensorMap) over
// its tensor at the caller's dims, as the judge's executor does: the map's
// extents are the tensor's shape (or the plan's view) innermost first, the
// strides row-major. The judge's checks held at the judged dims; at others
// the driver's own checks decide (a refusal is Launch's result).
std::string TensorMapStatements(const Problem& problem, const internal::TensorMapSpec& spec,
                                const internal::ResolvedTensorMap& map, const std::string& var) {
  const TensorSpec* tensor = problem.FindTensor(spec.tensor);
  std::vector<std::string> extents = spec.dims;
  if (extents.empty()) extents.assign(tensor->shape.rbegin(), tensor->shape.rend());
  const size_t rank = extents.size();
  auto list = [&](const std::vector<std::string>& exprs, const char* type) {
    std::string out;
    for (size_t d = 0; d < exprs.size(); ++d) {
      out += (d ? ", " : "") + ("static_cast<" + std::string(type) + ">(" + CppExpression(exprs[d]) + ")");
    }
    return out;
  };
  std::string ones;
  for (size_t d = 0; d < rank; ++d) ones += d ? ", 1" : "1";
  const std::string r = std::to_string(rank);
  std::string h;
  h += "    CUtensorMap " + var + ";  // tensor map over " + spec.tensor + "\n    {\n";
  h += "      const cuuint64_t dims[" + r + "] = {" + list(extents, "cuuint64_t") + "};\n";
  h += "      cuuint64_t strides[" + std::to_string(rank > 1 ? rank - 1 : 1) + "] = {};\n";
  h += "      cuuint64_t stride = " + std::to_string(SizeOf(tensor->dtype)) + ";\n";
  h += "      for (int d = 1; d < " + r + "; ++d) strides[d - 1] = stride *= dims[d - 1];\n";
  h += "      const cuuint32_t box[" + r + "] = {" + list(spec.box, "cuuint32_t") + "};\n";
  h += "      const cuuint32_t element_strides[" + r + "] = {" + ones + "};\n";
  h += "      ks_result = cuTensorMapEncodeTiled(&" + var + ", " + internal::TensorMapType(tensor->dtype).name + ", " + r +
       ", const_cast<void*>(static_cast<const void*>(ks_tensors." + spec.tensor +
       ")), dims, strides, box, element_strides,\n"
       "                                         CU_TENSOR_MAP_INTERLEAVE_NONE, " +
       internal::TensorMapSwizzle(map.swizzle).name + ", " + internal::TensorMapL2(map.l2_promotion).name + ",\n" +
       "                                         " + internal::TensorMapOobFill(map.oob_fill).name + ");\n";
  h += "      if (ks_result != CUDA_SUCCESS) return ks_result;\n    }\n";
  return h;
}

// Whether the cubin's kernel `name` was compiled with __cluster_dims__.
bool DeclaresCluster(const std::vector<internal::KernelSignature>& signatures, const std::string& name) {
  for (const internal::KernelSignature& s : signatures) {
    if (s.name == name) return s.cluster_dims[0] > 0;
  }
  return false;
}

// launches[l] with its plan's cluster, as the judge's executor launches it:
// cuLaunchKernelEx with CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, after
// allowing the non-portable size when the plan asks for it.
std::string ClusterLaunchStatements(const LaunchSpec& launch, size_t l, const std::string& args) {
  const std::string f = "ks_module.functions[" + std::to_string(l) + "]";
  std::string h;
  if (launch.non_portable_cluster_size) {
    h += "    ks_result = cuFuncSetAttribute(" + f + ", CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1);\n"
         "    if (ks_result != CUDA_SUCCESS) return ks_result;\n";
  }
  h += "    CUlaunchAttribute cluster = {};\n"
       "    cluster.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;\n";
  static constexpr const char* kAxis[3] = {"x", "y", "z"};
  for (size_t d = 0; d < 3; ++d) {
    h += "    cluster.value.clusterDim." + std::string(kAxis[d]) + " = static_cast<unsigned>(" +
         CppExpression(d < launch.cluster.size() ? launch.cluster[d] : "1") + ");\n";
  }
  h += "    CUlaunchConfig config = {};\n"
       "    config.gridDimX = grid[0];\n    config.gridDimY = grid[1];\n    config.gridDimZ = grid[2];\n"
       "    config.blockDimX = block[0];\n    config.blockDimY = block[1];\n    config.blockDimZ = block[2];\n"
       "    config.sharedMemBytes = shared;\n    config.hStream = ks_stream;\n"
       "    config.attrs = &cluster;\n    config.numAttrs = 1;\n";
  h += "    ks_result = cuLaunchKernelEx(&config, " + f + ", " + args + ", nullptr);\n";
  return h;
}

}  // namespace

StatusOr<std::string> GenerateKernelHeader(const Problem& problem, const CachedKernel& kernel,
                                           std::string_view name_space) {
  // Resolving at the tuned dims proves every expression is well formed and
  // every argument names a tensor, workspace or typed scalar.
  auto resolved = internal::ResolvePlan(problem, kernel.plan);
  if (!resolved.ok()) return resolved.status().WithContext("the kernel's plan");
  const LaunchPlan& plan = kernel.plan;
  const std::string name = Identifier(problem.name);
  const std::string ns = name_space.empty() ? "ksearch_kernels::" + name : std::string(name_space);
  std::string guard = "KSEARCH_EXPORTED_";
  for (size_t i = 0; i < ns.size(); ++i) {
    if (ns.compare(i, 2, "::") == 0) {
      guard += '_';
      ++i;
    } else {
      const unsigned char c = static_cast<unsigned char>(ns[i]);
      guard += std::isalnum(c) ? static_cast<char>(std::toupper(c)) : '_';
    }
  }
  guard += "_H_";

  std::string h;
  h += "// Generated by ksearch " + std::string(Version()) + ": the kernel for problem '" + problem.name +
       "'";
  if (kernel.run_id > 0) h += " from run " + std::to_string(kernel.run_id);
  if (!kernel.candidate_id.empty()) h += ", candidate " + kernel.candidate_id;
  h += ".\n// Problem fingerprint " + kernel.key.problem_fingerprint + ".\n";
  h += "// cubin for " + kernel.arch + " (NVRTC " + kernel.key.nvrtc_version + ")";
  const Evaluation& e = kernel.evaluation;
  if (!e.device.name.empty()) h += "; judged on " + e.device.name;
  if (e.timing) h += ": median " + Double(e.timing->median_ms) + " ms";
  if (e.speedup) h += ", " + Double(e.speedup->ratio) + "x vs " + e.speedup->baseline;
  h += ".\n//\n";
  h += "// Use: fill Tensors with device pointers and call Launch(stream, tensors) with the\n"
       "// context that owns them current (the CUDA runtime's primary context is). The\n"
       "// module is loaded on the first call. Link with -lcuda. Dims other than the\n"
       "// tuned ones are accepted but were not checked by the search.\n";
  h += "#ifndef " + guard + "\n#define " + guard + "\n\n";
  h += "#include <cuda.h>\n\n#include <cstddef>\n#include <cstdint>\n\n";
  h += "namespace " + ns + " {\n\n";
  h += "// The dims the kernel was tuned at.\nstruct Dims {\n";
  for (const auto& [dim, value] : problem.dims) {
    h += "  int64_t " + dim + " = " + std::to_string(value) + ";\n";
  }
  h += "};\n\n// Device pointers of the problem's tensors.\nstruct Tensors {\n";
  for (const TensorSpec& t : problem.tensors) {
    h += "  " + PointerType(t) + " " + t.name + " = nullptr;  // " + std::string(ToString(t.role)) + " " +
         std::string(ToString(t.dtype)) + " " + Shape(t) + "\n";
  }
  h += "};\n\n";
  h += "inline constexpr char kArch[] = \"" + kernel.arch + "\";\n";
  h += "alignas(64) inline constexpr unsigned char kCubin[] = {";
  for (size_t i = 0; i < kernel.cubin.size(); ++i) {
    if (i % 16 == 0) h += "\n   ";
    char byte[8];
    std::snprintf(byte, sizeof(byte), " 0x%02x,", static_cast<unsigned char>(kernel.cubin[i]));
    h += byte;
  }
  h += "\n};\n\n";
  h += "namespace detail {\n"
       "inline int64_t ks_ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }\n"
       "inline int64_t ks_min(int64_t a, int64_t b) { return a < b ? a : b; }\n"
       "inline int64_t ks_max(int64_t a, int64_t b) { return a > b ? a : b; }\n"
       "inline int64_t ks_align(int64_t bytes) { return (bytes + 255) / 256 * 256; }\n"
       "}  // namespace detail\n\n";
  // The names every expression may use: dims, then the plan's params.
  std::string values;
  for (const auto& [dim, value] : problem.dims) {
    values += "  [[maybe_unused]] const int64_t " + dim + " = ks_dims." + dim + ";\n";
  }
  for (const auto& [param, value] : plan.params) {
    values += "  [[maybe_unused]] constexpr int64_t " + param + " = " + std::to_string(value) + ";\n";
  }
  values += "  using namespace detail;\n";

  h += "// Bytes of workspace Launch needs at these dims (each buffer 256-byte aligned).\n";
  h += "inline size_t WorkspaceBytes(const Dims& ks_dims = Dims{}) {\n" + values;
  h += "  int64_t ks_bytes = 0;\n";
  for (const WorkspaceSpec& w : plan.workspace) {
    h += "  ks_bytes += ks_align((" + CppExpression(w.elements) + ") * " + std::to_string(SizeOf(w.dtype)) +
         ");  // " + w.name + "\n";
  }
  h += "  return static_cast<size_t>(ks_bytes);\n}\n\n";

  // A kernel compiled with __cluster_dims__ launches with its own; only a
  // cluster the kernel does not declare goes through cuLaunchKernelEx.
  auto read = internal::ReadKernelSignatures(kernel.cubin);
  const std::vector<internal::KernelSignature> signatures =
      read.ok() ? std::move(*read) : std::vector<internal::KernelSignature>{};
  const size_t n = plan.launches.size();
  h += "// Enqueues the plan on `ks_stream`. `ks_workspace` must hold WorkspaceBytes(ks_dims)\n"
       "// bytes when that is not zero. Returns the first failing driver call's result.\n";
  h += "inline CUresult Launch(CUstream ks_stream, const Tensors& ks_tensors, const Dims& ks_dims = Dims{},\n"
       "                       void* ks_workspace = nullptr) {\n";
  h += "  struct Module {\n    CUresult status = CUDA_SUCCESS;\n    CUmodule module = nullptr;\n";
  h += "    CUfunction functions[" + std::to_string(n) + "] = {};\n";
  h += "    Module() {\n      status = cuModuleLoadData(&module, kCubin);\n";
  h += "      const char* names[" + std::to_string(n) + "] = {";
  for (size_t l = 0; l < n; ++l) h += (l ? ", " : "") + ("\"" + plan.launches[l].kernel + "\"");
  h += "};\n";
  h += "      for (int i = 0; status == CUDA_SUCCESS && i < " + std::to_string(n) + "; ++i) {\n"
       "        status = cuModuleGetFunction(&functions[i], module, names[i]);\n      }\n    }\n  };\n";
  h += "  // Loaded once per process, into the context current at the first call.\n";
  h += "  static Module ks_module;\n  if (ks_module.status != CUDA_SUCCESS) return ks_module.status;\n";
  h += values;
  h += "  [[maybe_unused]] CUdeviceptr ks_next = reinterpret_cast<CUdeviceptr>(ks_workspace);\n";
  for (const WorkspaceSpec& w : plan.workspace) {
    h += "  const CUdeviceptr " + w.name + " = ks_next;\n";
    h += "  ks_next += static_cast<CUdeviceptr>(ks_align((" + CppExpression(w.elements) + ") * " +
         std::to_string(SizeOf(w.dtype)) + "));\n";
  }
  h += "  CUresult ks_result = CUDA_SUCCESS;\n";
  for (size_t l = 0; l < n; ++l) {
    const LaunchSpec& launch = plan.launches[l];
    h += "  {  // launches[" + std::to_string(l) + "]: " + launch.kernel + "\n";
    auto dim3 = [&](const std::vector<std::string>& d) {
      std::string out;
      for (size_t i = 0; i < 3; ++i) {
        out += (i ? ", " : "") + ("static_cast<unsigned>(" + CppExpression(i < d.size() ? d[i] : "1") + ")");
      }
      return out;
    };
    h += "    const unsigned grid[3] = {" + dim3(launch.grid) + "};\n";
    h += "    const unsigned block[3] = {" + dim3(launch.block) + "};\n";
    h += "    const unsigned shared = static_cast<unsigned>(" + CppExpression(launch.shared_bytes) + ");\n";
    h += "    if (shared > 48 * 1024) {\n"
         "      ks_result = cuFuncSetAttribute(ks_module.functions[" + std::to_string(l) +
         "], CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, static_cast<int>(shared));\n"
         "      if (ks_result != CUDA_SUCCESS) return ks_result;\n    }\n";
    std::string pointers;
    for (size_t a = 0; a < launch.args.size(); ++a) {
      const std::string& arg = launch.args[a];
      const std::string var = "a" + std::to_string(a);
      size_t colon = arg.rfind(':');
      if (internal::IsTensorMapArg(arg)) {
        // ResolvePlan above parsed it and checked its tensor.
        auto spec = internal::ParseTensorMapArg(arg, "the kernel's plan", "args");
        if (!spec.ok()) return spec.status();
        h += TensorMapStatements(problem, *spec, resolved->launches[l].args[a].tensor_map, var);
      } else if (colon != std::string::npos) {
        std::string expr = arg.substr(0, colon), type = arg.substr(colon + 1);
        std::string ctype = type == "i32" ? "int32_t" : type == "i64" ? "int64_t" : "float";
        std::string value = type == "f32" && expr.find_first_not_of("0123456789+-.eE") == std::string::npos
                                ? expr
                                : CppExpression(expr);
        h += "    " + ctype + " " + var + " = static_cast<" + ctype + ">(" + value + ");\n";
      } else if (problem.FindTensor(arg)) {
        h += "    auto " + var + " = ks_tensors." + arg + ";\n";
      } else {
        h += "    CUdeviceptr " + var + " = " + arg + ";\n";
      }
      pointers += (a ? ", " : "") + ("&" + var);
    }
    h += "    void* args[] = {" + (pointers.empty() ? std::string("nullptr") : pointers) + "};\n";
    const std::string args = pointers.empty() ? "nullptr" : "args";
    if (!launch.cluster.empty() && !DeclaresCluster(signatures, launch.kernel)) {
      h += ClusterLaunchStatements(launch, l, args);
    } else {
      h += "    ks_result = cuLaunchKernel(ks_module.functions[" + std::to_string(l) +
           "], grid[0], grid[1], grid[2], block[0], block[1], block[2], shared, ks_stream, " + args +
           ", nullptr);\n";
    }
    h += "    if (ks_result != CUDA_SUCCESS) return ks_result;\n  }\n";
  }
  h += "  return CUDA_SUCCESS;\n}\n\n}  // namespace " + ns + "\n\n#endif  // " + guard + "\n";
  return h;
}

StatusOr<ExportedKernel> ExportRunKernel(Store& store, int64_t run_id, const ExportOptions& options) {
  KSEARCH_ASSIGN_OR_RETURN(RunHistory history, store.LoadRunHistory(run_id, false));
  const HistoryEntry* entry = nullptr;
  const std::string run_name = "run " + std::to_string(run_id);
  if (!options.candidate_id.empty()) {
    for (const HistoryEntry& e : history.entries) {
      if (e.candidate.id == options.candidate_id) entry = &e;
    }
    if (!entry) return NotFoundError(run_name + " has no judged candidate '" + options.candidate_id + "'");
  } else {
    entry = history.Best();
    if (!entry) return NotFoundError(run_name + " has no correct kernel to export");
  }
  auto problem = Problem::FromJson(history.run.problem_json, "", run_name + " problem");
  if (!problem.ok()) return DataLossError(store.path() + ": " + problem.status().message());
  DeviceInfo device;
  device.name = history.run.device_name;
  device.driver_version = history.run.driver_version;
  const std::string arch = options.arch.empty() ? history.run.device_arch : options.arch;
  if (!options.arch.empty() && !internal::ParseArch(arch, &device.cc_major, &device.cc_minor)) {
    return InvalidArgumentError("arch '" + arch +
                                "' is not a GPU architecture (expected sm_XY, e.g. sm_90)");
  }
  if (arch.empty() || !internal::ParseArch(arch, &device.cc_major, &device.cc_minor)) {
    return FailedPreconditionError(run_name + " recorded no GPU architecture; give one (e.g. sm_90)");
  }
  KernelCache::Options cache_options;
  cache_options.compile_cache_dir = options.compile_cache_dir;
  KernelCache cache(store, cache_options);
  KSEARCH_ASSIGN_OR_RETURN(CachedKernel kernel, cache.Build(*problem, device, *entry));
  kernel.run_id = run_id;
  KSEARCH_ASSIGN_OR_RETURN(std::string header, GenerateKernelHeader(*problem, kernel));

  std::error_code ec;
  std::filesystem::create_directories(options.directory, ec);
  if (ec) return PermissionDeniedError(options.directory + ": cannot create the folder: " + ec.message());
  const std::string base = internal::JoinPath(options.directory, Identifier(problem->name));
  ExportedKernel out;
  out.candidate_id = entry->candidate.id;
  out.never_run = entry->evaluation.status == EvalStatus::kCompiled;
  out.source_path = base + ".cu";
  out.plan_path = base + ".plan.json";
  out.cubin_path = base + ".cubin";
  out.header_path = base + ".h";
  out.evaluation_path = base + ".evaluation.json";
  KSEARCH_RETURN_IF_ERROR(internal::WriteFileAtomically(out.source_path, entry->candidate.source));
  KSEARCH_RETURN_IF_ERROR(internal::WriteFileAtomically(out.plan_path, entry->candidate.plan.ToJson() + "\n"));
  KSEARCH_RETURN_IF_ERROR(internal::WriteFileAtomically(out.cubin_path, kernel.cubin));
  KSEARCH_RETURN_IF_ERROR(internal::WriteFileAtomically(out.header_path, header));
  KSEARCH_RETURN_IF_ERROR(internal::WriteFileAtomically(out.evaluation_path, entry->evaluation.ToJson() + "\n"));
  return out;
}

}  // namespace ksearch
