#include "ksearch/tensor.h"

#include <cstdio>
#include <cstdlib>
#include <string>

namespace ksearch {

std::string_view ToString(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "f32";
    case DType::kF64: return "f64";
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
    case DType::kI32: return "i32";
    case DType::kI64: return "i64";
    case DType::kU8: return "u8";
  }
  return "?";
}

StatusOr<DType> ParseDType(std::string_view name) {
  for (DType d : {DType::kF32, DType::kF64, DType::kF16, DType::kBF16, DType::kI32, DType::kI64,
                  DType::kU8}) {
    if (ToString(d) == name) return d;
  }
  return InvalidArgumentError("unknown dtype '" + std::string(name) +
                              "' (expected f32, f64, f16, bf16, i32, i64, u8)");
}

int64_t SizeOf(DType dtype) {
  switch (dtype) {
    case DType::kF64:
    case DType::kI64: return 8;
    case DType::kF32:
    case DType::kI32: return 4;
    case DType::kF16:
    case DType::kBF16: return 2;
    case DType::kU8: return 1;
  }
  return 0;
}

bool IsFloating(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kF64 || dtype == DType::kF16 ||
         dtype == DType::kBF16;
}

std::string_view ToString(TensorRole role) {
  switch (role) {
    case TensorRole::kInput: return "input";
    case TensorRole::kOutput: return "output";
    case TensorRole::kInout: return "inout";
  }
  return "input";
}

namespace {

// "%g" when it reads back as the same double, else the first of %.15g and
// %.17g that does. "%g" alone kept six digits, so uniform(0.1234561,
// 0.1234562) came back from ToJson as uniform(0.123456, 0.123456) and no
// longer loaded (the round-trip check of the problem fuzz target). Values that
// "%g" wrote exactly print as before, so fingerprints of existing problems stay.
std::string ExactNumber(double value) {
  char text[32];
  for (const char* format : {"%g", "%.15g", "%.17g"}) {
    std::snprintf(text, sizeof(text), format, value);
    if (std::strtod(text, nullptr) == value) break;
  }
  return text;
}

}  // namespace

Distribution Distribution::ScaledPer(ScaleAxis axis, double low, double high) const {
  Distribution d = *this;
  d.scale_axis = axis;
  d.scale_low = low;
  d.scale_high = high;
  return d;
}

std::string Distribution::ToString() const {
  std::string text = std::string(kind == Kind::kNormal ? "normal" : "uniform") + "(" +
                     ExactNumber(a) + ", " + ExactNumber(b) + ")";
  if (scale_axis == ScaleAxis::kNone) return text;
  return text + " * 10^uniform(" + ExactNumber(scale_low) + ", " + ExactNumber(scale_high) + ") per " +
         (scale_axis == ScaleAxis::kRow ? "row" : "column");
}

const Distribution& InputSet::For(std::string_view tensor) const {
  for (const auto& [name, distribution] : per_tensor) {
    if (name == tensor) return distribution;
  }
  return fallback;
}

std::vector<InputSet> DefaultInputSets() {
  return {InputSet{"normal", Distribution::Normal(0, 1), {}},
          InputSet{"uniform", Distribution::Uniform(-1, 1), {}},
          InputSet{"shifted", Distribution::Normal(100, 1), {}}};
}

}  // namespace ksearch
