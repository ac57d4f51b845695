// The vendor-library baselines a problem can name, and how a problem binds
// one to its own tensors and dims through `baseline.settings`
// (docs/problems.md "The baseline"). The libraries themselves live in
// lib/baselines; this table is here so that a problem is checked when it is
// loaded, without a GPU, and so that lib/baselines names no tensor or dim of
// any problem.
//
// Thread safety: the table is immutable; the functions are pure.
#ifndef KSEARCH_CORE_BASELINE_SETTINGS_H_
#define KSEARCH_CORE_BASELINE_SETTINGS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ksearch/problem.h"
#include "ksearch/status.h"

namespace ksearch::internal {

struct BaselineSetting {
  enum class Kind {
    kTensor,  // the value names one of the problem's tensors
    kSize,    // an integer or an expression over the problem's dims, > 0
    kChoice,  // one word of `choices`
  };
  std::string_view key;
  Kind kind = Kind::kSize;
  // Absent optional settings take `fallback` (kSize, kChoice) or are unbound
  // (kTensor).
  bool required = true;
  std::string_view fallback;
  std::vector<std::string_view> choices;  // kChoice
  // kTensor: the role the tensor must have, exactly: an inout tensor binds to
  // no key (a library reads its inputs and writes its outputs, not in place).
  TensorRole role = TensorRole::kInput;
};

class BaselineBinding;

struct BaselineLibrary {
  std::string_view name;     // "cublas_sgemm", …
  std::string_view summary;  // one line for docs and errors
  std::vector<BaselineSetting> settings;
  // The element counts and dtypes the library computes with (see
  // CheckBaselineShapes).
  Status (*check_shapes)(const Problem& problem, const BaselineBinding& binding) = nullptr;
};

// Every known library, in a fixed order.
const std::vector<BaselineLibrary>& BaselineLibraries();
// nullptr when `name` is not a known library.
const BaselineLibrary* FindBaselineLibrary(std::string_view name);
// "cublas_sgemm, cublaslt_gemm, …" for error messages.
std::string BaselineLibraryNames();

// A problem's settings resolved against its library: tensors as indices into
// Problem::tensors, sizes evaluated at the problem's dims.
class BaselineBinding {
 public:
  // Index of the tensor bound to `key`, or -1 when an optional tensor is
  // unbound.
  int Tensor(std::string_view key) const;
  int64_t Size(std::string_view key) const;
  std::string Choice(std::string_view key) const;

 private:
  friend StatusOr<BaselineBinding> BindBaseline(const Problem& problem);
  std::vector<std::pair<std::string, int>> tensors_;
  std::vector<std::pair<std::string, int64_t>> sizes_;
  std::vector<std::pair<std::string, std::string>> choices_;
};

// Checks problem.baseline against its library's settings and resolves them:
// an unknown library or key, a missing required key, a tensor that does not
// exist or has the wrong role, a size that does not evaluate to a positive
// integer, a word not among the choices. The shapes the library implies
// (m × k elements for a GEMM's a, …) are checked by the library's own
// CheckShapes below. Errors: kInvalidArgument naming "baseline.settings.KEY"
// and the value. An empty library name binds nothing.
StatusOr<BaselineBinding> BindBaseline(const Problem& problem);

// Checks that the tensors bound by `binding` have the element counts and
// dtypes the library computes with (e.g. a GEMM's c has m × n elements; a
// half-precision GEMM's a and b are both bf16 or both f16). Errors:
// kInvalidArgument naming the setting, the tensor and both counts.
Status CheckBaselineShapes(const Problem& problem, const BaselineBinding& binding);

}  // namespace ksearch::internal

#endif  // KSEARCH_CORE_BASELINE_SETTINGS_H_
