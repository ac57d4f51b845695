// Candidate: one kernel to judge — CUDA source for NVRTC, a launch plan, compile
// options and where it came from.
//
// The kernel contract (docs/kernel-contract.md has it whole): the source is one NVRTC
// translation unit of device code only, with `extern "C" __global__` entry
// points. The launch plan says how to run it:
//
//   { "params":    {"BLOCK": 256, "VEC": 4},
//     "workspace": [{"name": "partial", "dtype": "f32", "elements": "rows * 32"}],
//     "launches":  [{"kernel": "row_partials", "grid": ["rows", 32, 1],
//                    "block": ["BLOCK", 1, 1], "shared_bytes": "BLOCK * 4",
//                    "args": ["x", "partial", "cols:i32"]}] }
//
// A launch may also carry "cluster": [x, y, z] (expressions: blocks per
// thread-block cluster, sm_90 and newer) and "non_portable_cluster_size":
// true (clusters above 8 blocks).
// `params` become `-D NAME=VALUE` defines and may appear in expressions.
// Expressions: integer literals, problem dims, params, + - * / %, parentheses,
// ceil_div(a, b), min(a, b), max(a, b). `args` name tensors, workspace buffers
// (bound as device pointers) or scalars written `EXPR:TYPE` with TYPE one of
// i32, i64, f32 (a scalar's EXPR is an expression or, for f32, a literal), or
// are tensor maps {"tensor_map": TENSOR, "box": [...], ...}: a CUtensorMap
// for TMA that the evaluator encodes over the tensor (docs/kernel-contract.md).
//
// Thread safety: plain values.
#ifndef KSEARCH_CANDIDATE_H_
#define KSEARCH_CANDIDATE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ksearch/status.h"
#include "ksearch/tensor.h"

namespace ksearch {

// A scratch buffer the plan asks the evaluator to allocate. It is poisoned
// (NaN for float types) before every candidate run, like the outputs.
struct WorkspaceSpec {
  std::string name;
  DType dtype = DType::kF32;
  std::string elements;  // an expression: the element count

  friend bool operator==(const WorkspaceSpec&, const WorkspaceSpec&) = default;
};

// One kernel launch of a plan. Launches run in order on one stream.
struct LaunchSpec {
  std::string kernel;                // an extern "C" __global__ name in the source
  std::vector<std::string> grid;     // 3 expressions
  std::vector<std::string> block;    // 3 expressions
  std::string shared_bytes = "0";    // dynamic shared memory, an expression
  // Thread-block cluster dimensions, 3 expressions (blocks per cluster in x,
  // y, z); empty: no cluster at launch. Launched with cuLaunchKernelEx and
  // CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION (sm_90 and newer); each grid
  // dimension must be a multiple of the cluster's, and a cluster holds at
  // most 8 blocks (the portable size) unless non_portable_cluster_size.
  std::vector<std::string> cluster;
  // Allows clusters above 8 blocks where the GPU has them (16 on the H100
  // and H200): sets CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED.
  bool non_portable_cluster_size = false;
  // Tensor/workspace names, "EXPR:TYPE", or a tensor map as its canonical
  // JSON text ({"tensor_map":...}; FromJson writes it, ToJson writes it back
  // as the object).
  std::vector<std::string> args;

  friend bool operator==(const LaunchSpec&, const LaunchSpec&) = default;
};

struct LaunchPlan {
  // Integer parameters, in declaration order; passed as -D defines.
  std::vector<std::pair<std::string, int64_t>> params;
  std::vector<WorkspaceSpec> workspace;
  std::vector<LaunchSpec> launches;

  // Parses the JSON form above. `origin` names the text in errors (a file name,
  // "candidate c12 plan"). Errors: kInvalidArgument naming the field and value
  // (missing "launches", a grid of 2 entries, a non-integer param, an unknown
  // dtype, malformed JSON with its offset, a plan over one of the caps on
  // launches, workspaces, arguments, params and name or expression lengths
  // that docs/problems.md lists).
  static StatusOr<LaunchPlan> FromJson(std::string_view json, std::string_view origin);
  // Canonical JSON (stable key order), the inverse of FromJson.
  std::string ToJson() const;

  // The value of a param, or `fallback` when it is not declared.
  int64_t Param(std::string_view name, int64_t fallback) const;
  // Sets (or adds) a param.
  void SetParam(std::string_view name, int64_t value);

  friend bool operator==(const LaunchPlan&, const LaunchPlan&) = default;
};

// Who made a candidate and from what.
struct Provenance {
  std::string parent_id;   // empty for a problem's starting kernel
  std::string idea_id;     // empty when no idea was involved
  int round = 0;
  std::string generator;   // "start", "template", "llm:MODEL", "mutation", "user"
};

struct Candidate {
  std::string id;                          // unique within a run; set by the searcher
  std::string source;                      // CUDA source (device code only)
  LaunchPlan plan;
  std::vector<std::string> compile_options;  // extra NVRTC options, e.g. "--use_fast_math"
  Provenance provenance;

  // Stable content hash (hex SHA-256) of source, plan and options: identical
  // kernels hash alike whatever their id or provenance.
  std::string ContentHash() const;
};

// Limits on one expression, far above any real plan or constraint (the
// longest shipped constraint is about 300 characters, 10 levels deep): they
// exist so that an expression written by a remote model cannot exhaust the
// stack or memory. Depth counts nested parentheses, function calls and unary
// operators together.
inline constexpr size_t kMaxExpressionLength = 4096;  // characters
inline constexpr int kMaxExpressionDepth = 64;

// Evaluates an integer expression of the plan grammar against named values
// (dims and params). All arithmetic is checked 64-bit: a result out of range
// (INT64_MAX + 1, INT64_MIN / -1, INT64_MIN % -1, a product that overflows) is
// an error, not a wrapped value. Errors: kInvalidArgument naming the
// expression and the unknown name, the syntax error, division or remainder by
// zero, the 64-bit overflow, or the length or depth limit that was passed.
StatusOr<int64_t> EvaluateExpression(
    std::string_view expression,
    const std::vector<std::pair<std::string, int64_t>>& values);

// Evaluates a constraint such as "BLOCK * VEC <= 4096 && BLOCK % 32 == 0"
// (comparisons, &&, ||, ! on top of the expression grammar). Errors as above.
StatusOr<bool> EvaluateCondition(
    std::string_view condition,
    const std::vector<std::pair<std::string, int64_t>>& values);

}  // namespace ksearch

#endif  // KSEARCH_CANDIDATE_H_
