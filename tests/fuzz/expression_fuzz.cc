// Fuzzes the expression grammar of launch plans and template constraints. The
// property: whatever the bytes, evaluation returns a value or an error; a trap
// (INT64_MIN / -1), a signed overflow (UBSan), a stack overflow or an
// out-of-bounds read (ASan) is a crash.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ksearch/candidate.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Values at the int64 edges, so that short inputs reach the overflow checks.
  static const std::vector<std::pair<std::string, int64_t>> kValues = {
      {"rows", 4096}, {"cols", 65536},   {"BLOCK", 256}, {"ZERO", 0},
      {"NEG", -1},    {"MAX", INT64_MAX}, {"MIN", INT64_MIN}};
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto value = ksearch::EvaluateExpression(text, kValues);
  auto condition = ksearch::EvaluateCondition(text, kValues);
  // A plain expression is a condition too, true when non-zero: the two entry
  // points share one parser, and must agree.
  if (value.ok() && (!condition.ok() || *condition != (*value != 0))) __builtin_trap();
  return 0;
}
