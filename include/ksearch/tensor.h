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

enum class TensorRole { kInput, kOutput };
std::string_view ToString(TensorRole role);

struct TensorSpec {
  std::string name;                 // a C identifier; unique in the problem
  DType dtype = DType::kF32;
  std::vector<std::string> shape;   // expressions over the problem's dims
  TensorRole role = TensorRole::kInput;

  friend bool operator==(const TensorSpec&, const TensorSpec&) = default;
};

// A distribution inputs are drawn from, on the device, by a counter-based RNG.
struct Distribution {
  enum class Kind {
    kNormal,   // mean a, standard deviation b
    kUniform,  // low a, high b
  };
  Kind kind = Kind::kNormal;
  double a = 0.0;
  double b = 1.0;

  static Distribution Normal(double mean, double stddev) { return {Kind::kNormal, mean, stddev}; }
  static Distribution Uniform(double low, double high) { return {Kind::kUniform, low, high}; }
  // "normal(0, 1)", "uniform(-1, 1)".
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
