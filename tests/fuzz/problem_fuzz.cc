// Fuzzes the problem.json loader (parsing and Validate, which resolves every
// plan and evaluates every shape, flops and constraint expression). The
// properties: no crash (ASan, UBSan, stack), and a problem that loads loads
// again from its self-contained JSON, to the same JSON.
//
// File names in the input resolve against a folder that does not exist, so
// relative .cu and plan files are simply missing; scripts/fuzz.sh gives the
// fuzzer /dev/null as standard input so that an absolute "/dev/stdin" cannot
// block it.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "ksearch/problem.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view json(reinterpret_cast<const char*>(data), size);
  auto problem = ksearch::Problem::FromJson(json, "/nonexistent/ksearch-fuzz", "fuzz.json");
  if (!problem.ok()) return 0;
  std::string text = problem->ToJson();
  auto again = ksearch::Problem::FromJson(text, "", "canonical problem");
  if (!again.ok() || again->ToJson() != text) __builtin_trap();
  return 0;
}
