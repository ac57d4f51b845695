// Problem: what a search optimizes.
//
// A problem names its dims, its input and output tensors, the distributions its
// inputs are drawn from, a trusted reference kernel (accumulating in fp64 where
// sums are long) and its plain-fp32 twin (used to measure the strict tolerance),
// a starting kernel, optional tunable templates, an optional library baseline,
// the flops and bytes of the op for the roofline, the text a language model
// is shown and, optionally, the shape cases it is judged at and the dispatch
// buckets a search keeps a kernel for (ShapeCase, DispatchSpec). It is plain
// data: it round-trips through JSON (docs/problems.md), so
// a remote worker can rebuild it from the text alone.
//
// Loading:
//   auto problem = ksearch::Problem::Load("problems/softmax/problem.json");
//   if (!problem.ok()) { std::cerr << problem.status().ToString() << "\n"; }
//
// Errors name the file, the field and the value ("problems/x/problem.json:
// tensors[1].dtype: unknown dtype 'f33' (expected f32, f64, f16, bf16, i32, i64,
// u8)").
//
// Thread safety: plain values.
#ifndef KSEARCH_PROBLEM_H_
#define KSEARCH_PROBLEM_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ksearch/candidate.h"
#include "ksearch/status.h"
#include "ksearch/tensor.h"

namespace ksearch {

enum class TolerancePolicy {
  // The candidate must be about as accurate as plain fp32 arithmetic: the
  // evaluator measures the L2 relative error of the fp32 reference against the
  // fp64 one on the same inputs and allows `strict_multiple` times that, with
  // an elementwise atol scaled to the output's RMS.
  kStrict,
  // atol = rtol = 1e-2 (the looser convention of published benchmarks). Every
  // figure obtained under it is labelled "relaxed".
  kRelaxed,
  // As inexact as the problem's library baseline (baseline.library), and no
  // more: at every check the evaluator runs the library on the candidate's
  // inputs and measures its error against the same reference (L2 relative
  // error, share of half-precision elements off the correctly rounded value,
  // and its worst element's error past the strict relative bound, in atols);
  // the candidate may have library_margin times the first two and
  // library_worst_margin times the third (or times the library's worst
  // element over 8 fresh inputs of the set, measured once when the
  // evaluator starts, where that is larger). Never stricter than
  // kStrict. For ops whose vendor library is not correctly rounded (fused
  // attention rounds P to bf16): what an engine accepts when it swaps the
  // library call for a kernel. Needs baseline.library and reference_fp32.
  kLibrary,
};
std::string_view ToString(TolerancePolicy policy);

struct Tolerance {
  TolerancePolicy policy = TolerancePolicy::kStrict;
  // kStrict: allowed L2 relative error = strict_multiple × the measured fp32
  // error (never below strict_floor).
  double strict_multiple = 8.0;
  double strict_floor = 1e-6;
  // kStrict: elementwise atol = atol_rms_fraction × RMS(expected output).
  double atol_rms_fraction = 1e-5;
  // kRelaxed only.
  double rtol = 1e-2;
  double atol = 1e-2;
  // kLibrary only: multiples of the library's measured L2 error and share of
  // inexact elements, and of its worst element's error.
  double library_margin = 1.25;
  double library_worst_margin = 2.0;

  friend bool operator==(const Tolerance&, const Tolerance&) = default;
};

// A kernel the problem ships (reference, starting kernel): source + plan.
struct KernelSpec {
  std::string source_file;  // relative to the problem's folder; informative
  std::string source;       // the CUDA text itself
  LaunchPlan plan;

  // A Candidate with this source and plan.
  Candidate ToCandidate(std::string id, std::string generator) const;

  friend bool operator==(const KernelSpec&, const KernelSpec&) = default;
};

// A tunable template: a kernel whose params range over declared values.
struct TemplateSpec {
  std::string name;
  KernelSpec kernel;  // plan.params hold the default point
  // Each param's allowed values, in declaration order.
  std::vector<std::pair<std::string, std::vector<int64_t>>> space;
  // Conditions over params and dims that every point must satisfy
  // (EvaluateCondition grammar).
  std::vector<std::string> constraints;

  friend bool operator==(const TemplateSpec&, const TemplateSpec&) = default;
};

// A vendor library the candidate is also timed against, run in-process through
// dlopen, and how it binds to this problem's tensors and dims. Known names:
// "cublas_sgemm" (fp32, TF32 off), "cublaslt_gemm" (bf16/f16 with fp32
// accumulation), "cudnn_conv_fwd" (fp32; optionally fused with ReLU and
// followed by max pooling). An empty name means the fp32 twin (or the
// reference) is the baseline. docs/problems.md "The baseline" lists each
// library's settings.
struct BaselineSpec {
  std::string library;
  // Setting → value, in order: a tensor name ("a": "A"), an integer or an
  // expression over the dims ("m": "M", "padding": "2"), or a word
  // ("activation": "relu"). Checked against the library when the problem is
  // validated.
  std::vector<std::pair<std::string, std::string>> settings;

  friend bool operator==(const BaselineSpec&, const BaselineSpec&) = default;
};

// One shape an engine calls the op at (docs/problems.md, "Shape sets"). A
// problem that declares shape cases is judged at each of them: checked at
// every case, timed at every timed case, its objective the weighted time.
struct ShapeCase {
  std::string name;  // a-z, 0-9, '_', '-'; unique in the problem
  // Values for some of Problem::dims; the dims a case does not name keep the
  // problem's value.
  std::vector<std::pair<std::string, int64_t>> dims;
  // The case's share of the engine's calls: the objective is
  // sum(weight × median time) / sum(weight) over the timed cases. Positive;
  // a check-only case has none.
  double weight = 1.0;
  // false: check-only (correctness at this shape, never timed). Awkward sizes
  // that break tiling (1, 17, a prime) make natural check-only cases.
  bool timed = true;

  friend bool operator==(const ShapeCase&, const ShapeCase&) = default;
};

// Buckets over one dim that a search keeps a best kernel for and KernelRunner
// dispatches by. Bucket 0 holds values <= upper_bounds[0], bucket i values in
// (upper_bounds[i-1], upper_bounds[i]], the last bucket values above
// upper_bounds.back(). Every bucket must hold a timed shape case.
struct DispatchSpec {
  std::string dim;                    // empty: no dispatch
  std::vector<int64_t> upper_bounds;  // strictly increasing, positive

  bool enabled() const { return !dim.empty(); }
  size_t bucket_count() const { return enabled() ? upper_bounds.size() + 1 : 1; }
  // The bucket `value` falls in (0 when dispatch is off).
  size_t BucketOf(int64_t value) const;
  // "M<=16", "16<M<=256", "M>256"; "all" when dispatch is off.
  std::string BucketName(size_t bucket) const;

  friend bool operator==(const DispatchSpec&, const DispatchSpec&) = default;
};

struct Problem {
  std::string name;
  std::string description;  // the text a language model is shown
  std::string torch_equivalent;  // the PyTorch one-liner, for people and prompts
  std::vector<std::pair<std::string, int64_t>> dims;  // in declaration order
  std::vector<TensorSpec> tensors;
  std::vector<InputSet> input_sets;  // defaults: DefaultInputSets()
  Tolerance tolerance;
  // The arithmetic a kernel may use and still meet the tolerance: "fp32_fma"
  // (always allowed) and, for split-precision schemes that keep fp32
  // accuracy, the tensor-core paths "tf32_mma", "fp16_mma", "bf16_mma". The
  // judge measures each allowed path's peak at start; a time below the
  // floor of the fastest one (with the bandwidth floor) is kSuspiciousSpeed.
  std::vector<std::string> arithmetic_paths;  // empty: {"fp32_fma"}
  std::string flops;  // an expression over dims: floating-point operations
  std::string bytes;  // an expression over dims: minimum bytes moved
  KernelSpec reference;       // trusted; fp64 accumulation where sums are long
  KernelSpec reference_fp32;  // the same op in plain fp32 (strict tolerance)
  KernelSpec start;           // round 0 of a search
  std::vector<TemplateSpec> templates;
  BaselineSpec baseline;
  // The shapes the problem is judged at; empty: the one shape `dims`.
  std::vector<ShapeCase> shapes;
  DispatchSpec dispatch;      // off unless declared (needs `shapes`)
  std::string directory;      // where it was loaded from (empty if built in code)

  // Reads `path` (a problem JSON, or a folder holding problem.json) and the
  // .cu files it names, and validates the result (Validate). Errors:
  // kNotFound / kPermissionDenied for files; kInvalidArgument for content.
  static StatusOr<Problem> Load(std::string_view path);
  // Parses problem JSON text; `directory` resolves the .cu file names and
  // `origin` names the text in errors.
  static StatusOr<Problem> FromJson(std::string_view json, std::string_view directory,
                                    std::string_view origin);
  // Self-contained JSON: sources are embedded, so the text alone rebuilds the
  // problem (FromJson(ToJson(), "", …) == *this, directory aside).
  std::string ToJson() const;

  // Checks names, dtypes, shape and plan expressions, overflow of 64-bit byte
  // counts, template spaces; shape cases (known dims, positive values and
  // weights, a timed case, no two alike) and, at each case's dims, all of
  // the above; dispatch buckets. Errors: kInvalidArgument naming field and
  // value.
  Status Validate() const;

  // Stable hex SHA-256 of everything that affects results (dims, tensors, input
  // sets, tolerance, reference kernels, flops/bytes, baseline, shape cases and
  // dispatch buckets when declared); not the
  // description, the starting kernel or the templates.
  std::string Fingerprint() const;

  // The same problem with some dims replaced (small shapes for tests); shape
  // cases keep the values they name. Errors:
  // kInvalidArgument for an unknown dim or a non-positive value.
  StatusOr<Problem> WithDims(const std::vector<std::pair<std::string, int64_t>>& dims) const;

  // The shape cases judged: `shapes`, or one timed case named "default" at
  // `dims` when none are declared.
  std::vector<ShapeCase> Cases() const;
  // The problem at case `index` of Cases(): its dims set, with no shape
  // cases or dispatch of its own. Errors: kInvalidArgument (index out of
  // range, or the problem is not valid at the case's dims).
  StatusOr<Problem> AtCase(size_t index) const;
  // The dims of case `index` of Cases() (problem dims with the case's values).
  std::vector<std::pair<std::string, int64_t>> CaseDims(size_t index) const;

  // Dim lookup; nullopt when absent.
  std::optional<int64_t> Dim(std::string_view name) const;
  const TensorSpec* FindTensor(std::string_view name) const;
  // Element count of a tensor (product of its evaluated shape).
  StatusOr<int64_t> Elements(const TensorSpec& tensor) const;
  StatusOr<double> Flops() const;
  StatusOr<double> Bytes() const;
};

// Built-in problems shipped with ksearch (problems/ in the source tree,
// share/ksearch/problems when installed).
std::vector<std::string> BuiltinProblemNames();
// The folder built-in problems are read from: $KSEARCH_PROBLEMS_DIR when set,
// else the source tree or install location found at build time.
std::string BuiltinProblemsDirectory();
// Loads `name_or_path`: a built-in name ("softmax") or a path to a problem JSON
// or folder. Errors: kNotFound listing the built-in names.
StatusOr<Problem> LoadProblem(std::string_view name_or_path);

}  // namespace ksearch

#endif  // KSEARCH_PROBLEM_H_
