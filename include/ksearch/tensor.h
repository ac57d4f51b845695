// Element types, tensor specifications and input distributions of a Problem.
//
// Thread safety: plain values.
#ifndef KSEARCH_TENSOR_H_
#define KSEARCH_TENSOR_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ksearch/status.h"

namespace ksearch {

enum class DType { kF32, kF64, kF16, kBF16, kI32, kI64, kU8 };

// "f32", "f64", "f16", "bf16", "i32", "i64", "u8".
std::string_view ToString(DType dtype);
// Accepts the names above. Errors: kInvalidArgument naming the value.
StatusOr<DType> ParseDType(std::string_view name);
// Bytes per element.
int64_t SizeOf(DType dtype);
bool IsFloating(DType dtype);

// kInout: generated like an input, overwritten by the kernel in place and
// compared like an output (docs/problems.md "Tensors").
enum class TensorRole { kInput, kOutput, kInout };
// "input", "output", "inout".
std::string_view ToString(TensorRole role);
// The kernel reads it: generated from the input set (input, inout).
inline bool IsGenerated(TensorRole role) { return role != TensorRole::kOutput; }
// The kernel writes it: compared with the reference (output, inout).
inline bool IsWritten(TensorRole role) { return role != TensorRole::kInput; }

struct TensorSpec {
  std::string name;                 // a C identifier; unique in the problem
  DType dtype = DType::kF32;
  std::vector<std::string> shape;   // expressions over the problem's dims
  TensorRole role = TensorRole::kInput;

  friend bool operator==(const TensorSpec&, const TensorSpec&) = default;
};

// A distribution inputs are drawn from, on the device, by a counter-based RNG.
//
// Optionally each row (or each column) of a tensor is scaled by its own
// factor 10^u, u drawn once per row from uniform(scale_low, scale_high):
// "normal(0, 1) * 10^uniform(-4, 0) per row". A row is one run of the last
// axis (x[..., :]); a column is one index of the last axis across all rows
// (the channels of a [tokens, channels] activation, where outliers live).
struct Distribution {
  enum class Kind {
    kNormal,   // mean a, standard deviation b
    kUniform,  // low a, high b
  };
  enum class ScaleAxis {
    kNone,
    kRow,     // one factor per row (shared along the last axis)
    kColumn,  // one factor per index of the last axis
  };
  Kind kind = Kind::kNormal;
  double a = 0.0;
  double b = 1.0;
  ScaleAxis scale_axis = ScaleAxis::kNone;
  double scale_low = 0.0;   // decimal exponents: factors 10^scale_low ..
  double scale_high = 0.0;  // 10^scale_high

  static Distribution Normal(double mean, double stddev) { return {Kind::kNormal, mean, stddev}; }
  static Distribution Uniform(double low, double high) { return {Kind::kUniform, low, high}; }
  // This distribution with a factor 10^uniform(low, high) per row or column.
  Distribution ScaledPer(ScaleAxis axis, double low, double high) const;
  // "normal(0, 1)", "uniform(-1, 1)", "normal(0, 1) * 10^uniform(-4, 0) per row".
  std::string ToString() const;

  friend bool operator==(const Distribution&, const Distribution&) = default;
};

// One family of inputs the candidate is checked on: a default distribution for
// every input tensor, with per-tensor overrides (a layer norm's weight near 1,
// say).
struct InputSet {
  std::string name;
  Distribution fallback;
  std::vector<std::pair<std::string, Distribution>> per_tensor;

  // The distribution for tensor `name`.
  const Distribution& For(std::string_view tensor) const;

  friend bool operator==(const InputSet&, const InputSet&) = default;
};

// normal(0,1), uniform(-1,1) and normal(100,1): the default input sets (docs/problems.md).
std::vector<InputSet> DefaultInputSets();

}  // namespace ksearch

#endif  // KSEARCH_TENSOR_H_
