#include <gtest/gtest.h>

#include "ksearch/problem.h"
#include "test_util.h"

namespace ksearch {
namespace {

using testing::RowSoftmaxProblem;
using testing::RowSoftmaxProblemJson;
using testing::TempDir;

std::string Replace(std::string text, const std::string& from, const std::string& to) {
  size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

std::string LoadError(const std::string& json) {
  TempDir dir;
  std::string path = dir.Write("problem.json", json);
  auto p = Problem::Load(path);
  EXPECT_FALSE(p.ok());
  std::string message = p.ok() ? "" : p.status().message();
  EXPECT_NE(message.find(path), std::string::npos) << "error does not name the file: " << message;
  return message;
}

TEST(Problem, LoadsFromJsonWithDefaults) {
  auto p = Problem::FromJson(RowSoftmaxProblemJson(), "", "mem");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->name, "row_softmax");
  EXPECT_EQ(p->input_sets.size(), 3u);
  EXPECT_EQ(p->input_sets[2].fallback, Distribution::Normal(100, 1));
  EXPECT_EQ(*p->Dim("cols"), 4096);
  EXPECT_EQ(*p->Flops(), 5.0 * 512 * 4096);
  EXPECT_EQ(p->tolerance.policy, TolerancePolicy::kStrict);
}

TEST(Problem, RoundTripsThroughSelfContainedJson) {
  auto p = Problem::FromJson(RowSoftmaxProblemJson(), "", "mem");
  ASSERT_TRUE(p.ok());
  auto q = Problem::FromJson(p->ToJson(), "", "again");
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_EQ(q->ToJson(), p->ToJson());
  EXPECT_EQ(q->Fingerprint(), p->Fingerprint());
}

// Caught by the round-trip check of tests/fuzz/problem_fuzz: distributions were
// written with six digits, so ToJson changed them, and this pair no longer
// loaded (LOW == HIGH).
TEST(Problem, RoundTripsDistributionsExactly) {
  std::string json = Replace(RowSoftmaxProblemJson(), R"j("flops")j", R"j("input_sets": [
      {"name": "narrow", "distribution": "uniform(0.1234561, 0.1234562)",
       "tensors": {"x": "normal(1e-300, 123456789.125)"}},
      {"name": "plain", "distribution": "normal(0, 1)"}], "flops")j");
  auto p = Problem::FromJson(json, "", "mem");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  auto q = Problem::FromJson(p->ToJson(), "", "again");
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  ASSERT_EQ(q->input_sets.size(), 2u);
  EXPECT_EQ(q->input_sets[0].fallback, Distribution::Uniform(0.1234561, 0.1234562));
  ASSERT_EQ(q->input_sets[0].per_tensor.size(), 1u);
  EXPECT_EQ(q->input_sets[0].per_tensor[0].second, Distribution::Normal(1e-300, 123456789.125));
  // Values that "%g" wrote exactly print as they always did, so fingerprints
  // of existing problems stay.
  EXPECT_EQ(q->input_sets[1].fallback.ToString(), "normal(0, 1)");
  EXPECT_EQ(Distribution::Uniform(-1, 0.1).ToString(), "uniform(-1, 0.1)");
  EXPECT_EQ(Distribution::Normal(1e6, 1e-7).ToString(), "normal(1e+06, 1e-07)");
}

// Readers disagree on which of two equal keys counts (the loader took the
// first, ToJson kept the last), so a repeated key is an error.
TEST(Problem, RefusesRepeatedKeys) {
  std::string json = Replace(RowSoftmaxProblemJson(), R"j("flops")j", R"j("input_sets": [
      {"name": "s", "distribution": "normal(0, 1)",
       "tensors": {"x": "normal(0, 1)", "x": "uniform(-1, 1)"}}], "flops")j");
  EXPECT_NE(LoadError(json).find("input_sets[0].tensors: duplicate key 'x'"), std::string::npos)
      << LoadError(json);
  json = Replace(RowSoftmaxProblemJson(), R"j("flops")j", R"j("name": "again", "flops")j");
  EXPECT_NE(LoadError(json).find("(top level): duplicate key 'name'"), std::string::npos)
      << LoadError(json);
}

TEST(Problem, FingerprintFollowsResultsNotProse) {
  auto p = *Problem::FromJson(RowSoftmaxProblemJson(), "", "mem");
  std::string fp = p.Fingerprint();
  EXPECT_EQ(fp.size(), 64u);
  Problem reworded = p;
  reworded.description = "other words";
  EXPECT_EQ(reworded.Fingerprint(), fp);
  auto smaller = p.WithDims({{"rows", 64}});
  ASSERT_TRUE(smaller.ok());
  EXPECT_NE(smaller->Fingerprint(), fp);
  Problem looser = p;
  looser.tolerance.policy = TolerancePolicy::kRelaxed;
  EXPECT_NE(looser.Fingerprint(), fp);
}

TEST(Problem, WithDimsRejectsUnknownAndNonPositive) {
  auto p = *Problem::FromJson(RowSoftmaxProblemJson(), "", "mem");
  EXPECT_NE(p.WithDims({{"rowz", 4}}).status().message().find("unknown dim 'rowz'"), std::string::npos);
  EXPECT_FALSE(p.WithDims({{"rows", 0}}).ok());
}

TEST(Problem, LoadsAFolderAndReadsNamedSources) {
  TempDir dir;
  dir.Write("ref.cu", testing::RowSoftmaxSource("double"));
  std::string plan = testing::kRowSoftmaxPlan;
  std::string text = R"({"name": "f", "dims": {"rows": 8, "cols": 64},
    "tensors": [{"name": "x", "dtype": "f32", "shape": ["rows", "cols"], "role": "input"},
                {"name": "y", "dtype": "f32", "shape": ["rows", "cols"], "role": "output"}],
    "flops": 1, "bytes": 1, "tolerance": {"policy": "relaxed"},
    "reference": {"source": "ref.cu", "plan": )" + plan + "}}";
  dir.Write("problem.json", text);
  auto loaded = Problem::Load(dir.path());
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->reference.source, testing::RowSoftmaxSource("double"));
  EXPECT_EQ(loaded->start.source, loaded->reference.source);
  EXPECT_EQ(loaded->directory, dir.path());
}

// An in-place op: y is read, then overwritten with 2y + x.
std::string InoutProblemJson() {
  return Replace(Replace(RowSoftmaxProblemJson(), R"("shape": ["rows", "cols"], "role": "output")",
                         R"("shape": ["rows", "cols"], "role": "inout")"),
                 R"("flops":)", R"j("input_sets": [{"name": "s", "distribution": "normal(0, 1)",
                                     "tensors": {"y": "uniform(-2, 2)"}}], "flops":)j");
}

TEST(Problem, ErrorsNameFileFieldAndValue) {
  std::string good = RowSoftmaxProblemJson();
  struct Case {
    std::string json;
    std::string expected;
  } cases[] = {
      {Replace(good, R"("dtype": "f32", "shape": ["rows", "cols"], "role": "output")",
               R"("dtype": "f33", "shape": ["rows", "cols"], "role": "output")"),
       "tensors[1].dtype: unknown dtype 'f33'"},
      {Replace(good, R"("shape": ["rows", "cols"], "role": "input")", R"("shape": ["rows", "colz"], "role": "input")"),
       "tensors[0].shape[1]: expression 'colz': unknown name 'colz'"},
      {Replace(good, R"("rows": 512)", R"("rows": -4)"), "dims.rows: a dim must be a positive integer, got -4"},
      {Replace(good, R"("shape": ["rows", "cols"], "role": "input")",
               R"("shape": ["rows", "cols", 1099511627776, 1099511627776], "role": "input")"),
       "overflows 64 bits"},
      {Replace(good, R"("reference": {"source_text":)", R"("reference": {"source": "missing.cu", "x_":)"),
       "reference.x_: unknown field"},
      {Replace(good, R"("flops": "5 * rows * cols")", R"("flops": "5 * rowz")"), "flops: expression '5 * rowz'"},
      {Replace(good, R"("role": "input")", R"("role": "both")"),
       "tensors[0].role: expected \"input\", \"output\" or \"inout\", got \"both\""},
      {Replace(good, R"("name": "row_softmax")", R"("name": "Row Softmax")"), "name: a problem name uses"},
      {Replace(good, R"("flops":)", R"j("input_sets": [{"name": "s", "distribution": "gamma(1, 2)"}], "flops":)j"),
       "input_sets[0].distribution: unknown distribution 'gamma'"},
      {Replace(good, R"("flops":)", R"j("input_sets": [{"name": "s", "distribution": "normal(0, -1)"}], "flops":)j"),
       "standard deviation must be positive"},
      {Replace(good, R"("flops":)", R"("baseline": {"library": "mkl"}, "flops":)"), "unknown baseline library \"mkl\""},
      {Replace(InoutProblemJson(), R"("dtype": "f32", "shape": ["rows", "cols"], "role": "inout")",
               R"("dtype": "i32", "shape": ["rows", "cols"], "role": "inout")"),
       "tensors[1].dtype: inout tensors must be floating point, got i32"},
      {Replace(InoutProblemJson(), R"("role": "inout")", R"("role": "input")"),
       "tensors: at least one output or inout tensor is needed"},
      {Replace(Replace(good, R"("role": "input")", R"("role": "output")"), R"("flops":)",
               R"("tolerance": {"policy": "relaxed"}, "flops":)"),
       "tensors: at least one input or inout tensor is needed"},
      {good.substr(0, good.size() / 2), "malformed JSON"},
  };
  for (const Case& c : cases) {
    std::string message = LoadError(c.json);
    EXPECT_NE(message.find(c.expected), std::string::npos)
        << "got: " << message << "\nexpected to contain: " << c.expected;
  }
}

TEST(Problem, LoadsInoutTensors) {
  auto p = Problem::FromJson(InoutProblemJson(), "", "mem");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->tensors[1].role, TensorRole::kInout);
  EXPECT_EQ(ToString(TensorRole::kInout), "inout");
  EXPECT_TRUE(IsGenerated(TensorRole::kInout) && IsWritten(TensorRole::kInout));
  EXPECT_TRUE(IsGenerated(TensorRole::kInput) && !IsWritten(TensorRole::kInput));
  EXPECT_TRUE(!IsGenerated(TensorRole::kOutput) && IsWritten(TensorRole::kOutput));
  EXPECT_EQ(p->input_sets[0].For("y"), Distribution::Uniform(-2, 2)) << "an inout tensor takes a distribution";
  auto q = Problem::FromJson(p->ToJson(), "", "again");
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_EQ(q->tensors[1].role, TensorRole::kInout);
  EXPECT_EQ(q->Fingerprint(), p->Fingerprint());
  auto plain = Problem::FromJson(Replace(InoutProblemJson(), R"("role": "inout")", R"("role": "output")"), "", "m");
  ASSERT_FALSE(plain.ok()) << "y is an output there, so its distribution is refused";
  EXPECT_NE(plain.status().message().find("input_sets[0].tensors.y: not an input or inout tensor"), std::string::npos)
      << plain.status().message();
}

// The role joined the fingerprint's JSON as a third value: problems without
// inout tensors keep the fingerprint they had (this is main's value from
// before inout existed), so their cached kernels stay valid.
TEST(Problem, InoutLeavesExistingFingerprintsAlone) {
  auto p = Problem::FromJson(RowSoftmaxProblemJson(), "", "mem");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->Fingerprint(), "409b33561c1ca76dc66ead8987431d3741fcfac5bc1e96a3799556e8d1c6e480");
  auto inout = Problem::FromJson(InoutProblemJson(), "", "mem");
  ASSERT_TRUE(inout.ok());
  EXPECT_NE(inout->Fingerprint(), p->Fingerprint());
}

// The library policy: a candidate is held to the library's own error, so a
// problem without a library cannot use it, and its margins belong to it.
TEST(Problem, TheLibraryPolicyNeedsALibraryAndOwnsItsMargins) {
  std::string good = RowSoftmaxProblemJson();
  std::string with_library = Replace(good, R"("flops":)", R"("tolerance": {"policy": "library"}, "flops":)");
  EXPECT_NE(LoadError(with_library).find("\"library\" judges against the problem's library baseline, but the "
                                         "problem names none"),
            std::string::npos);
  std::string margin_on_strict =
      Replace(good, R"("flops":)", R"("tolerance": {"policy": "strict", "library_margin": 2}, "flops":)");
  EXPECT_NE(LoadError(margin_on_strict).find("tolerance.library_margin: applies only to the \"library\" policy"),
            std::string::npos);
  std::string unknown = Replace(good, R"("flops":)", R"("tolerance": {"policy": "engine"}, "flops":)");
  EXPECT_NE(LoadError(unknown).find("expected \"strict\", \"relaxed\" or \"library\", got \"engine\""),
            std::string::npos);

  // attention_small names cudnn_sdpa: the policy loads there, with its
  // margins in the JSON (and so in the fingerprint), bounded.
  auto attention = Problem::Load(testing::SourcePath("tests/eval/data/attention_small"));
  ASSERT_TRUE(attention.ok()) << attention.status().ToString();
  EXPECT_EQ(attention->ToJson().find("library_margin"), std::string::npos)
      << "a strict problem's JSON (and fingerprint) must not change";
  TempDir dir;
  std::string json = attention->ToJson();
  json = Replace(json, R"("policy":"strict")", R"("policy":"library","library_margin":1.5)");
  auto library = Problem::FromJson(json, dir.path(), "library.json");
  ASSERT_TRUE(library.ok()) << library.status().ToString();
  EXPECT_EQ(library->tolerance.policy, TolerancePolicy::kLibrary);
  EXPECT_EQ(library->tolerance.library_margin, 1.5);
  EXPECT_EQ(library->tolerance.library_worst_margin, 2.0);
  EXPECT_NE(library->Fingerprint(), attention->Fingerprint());
  auto again = Problem::FromJson(library->ToJson(), dir.path(), "again.json");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->tolerance, library->tolerance);
  auto too_loose = Problem::FromJson(Replace(json, R"("library_margin":1.5)", R"("library_margin":100)"),
                                     dir.path(), "loose.json");
  ASSERT_FALSE(too_loose.ok());
  EXPECT_NE(too_loose.status().message().find("tolerance.library_margin: expected a multiple from 1 to 16, got 100"),
            std::string::npos)
      << too_loose.status().message();
  Problem no_twin = *library;
  no_twin.reference_fp32 = KernelSpec();
  EXPECT_NE(no_twin.Validate().message().find("needs reference_fp32"), std::string::npos);
}

TEST(Problem, MissingFilesAreNotFound) {
  auto p = Problem::Load("/nonexistent/ksearch/problem.json");
  EXPECT_EQ(p.status().code(), StatusCode::kNotFound);
  EXPECT_NE(p.status().message().find("/nonexistent/ksearch/problem.json"), std::string::npos);
  TempDir dir;
  std::string text = R"({"name": "f", "dims": {"n": 8},
    "tensors": [{"name": "x", "dtype": "f32", "shape": ["n"], "role": "input"},
                {"name": "y", "dtype": "f32", "shape": ["n"], "role": "output"}],
    "flops": 1, "bytes": 1, "tolerance": {"policy": "relaxed"},
    "reference": {"source": "nope.cu", "plan": {"launches": [{"kernel": "k", "grid": [1], "block": [1], "args": []}]}}})";
  std::string message = LoadError(text);
  auto missing = Problem::Load(dir.path());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound) << missing.status().ToString();
  EXPECT_NE(message.find("reference.source"), std::string::npos) << message;
  EXPECT_NE(message.find("nope.cu"), std::string::npos) << message;
}

TEST(Problem, UnknownBuiltinListsTheKnownOnes) {
  auto p = LoadProblem("no_such_problem");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kNotFound);
  EXPECT_NE(p.status().message().find("softmax"), std::string::npos) << p.status().message();
}

std::string WithShapes(const std::string& shapes, const std::string& dispatch = "") {
  return Replace(RowSoftmaxProblemJson(), R"j("flops")j",
                 "\"shapes\": " + shapes + ", " + (dispatch.empty() ? "" : "\"dispatch\": " + dispatch + ", ") +
                     "\"flops\"");
}

constexpr char kThreeCases[] = R"j([
    {"name": "prefill", "dims": {"rows": 4096}, "weight": 0.25},
    {"name": "decode", "dims": {"rows": 8}, "weight": 0.75},
    {"name": "odd", "dims": {"rows": 17, "cols": 4095}, "timed": false}])j";

TEST(ShapeSets, ParseCasesWithWeightsAndCheckOnlyCases) {
  auto p = Problem::FromJson(WithShapes(kThreeCases, R"j({"dim": "rows", "buckets": [16]})j"), "", "mem");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_EQ(p->Cases().size(), 3u);
  EXPECT_EQ(p->shapes[0], (ShapeCase{"prefill", {{"rows", 4096}}, 0.25, true}));
  EXPECT_EQ(p->shapes[2], (ShapeCase{"odd", {{"rows", 17}, {"cols", 4095}}, 1.0, false}));
  // A case's dims override the problem's; the rest keep the problem's value.
  EXPECT_EQ(p->CaseDims(1), (std::vector<std::pair<std::string, int64_t>>{{"rows", 8}, {"cols", 4096}}));
  auto decode = p->AtCase(1);
  ASSERT_TRUE(decode.ok()) << decode.status().ToString();
  EXPECT_EQ(*decode->Dim("rows"), 8);
  EXPECT_TRUE(decode->shapes.empty());
  EXPECT_FALSE(decode->dispatch.enabled());
  EXPECT_EQ(*decode->Flops(), 5.0 * 8 * 4096);
  EXPECT_FALSE(p->AtCase(3).ok());
  EXPECT_EQ(p->dispatch.BucketOf(1), 0u);
  EXPECT_EQ(p->dispatch.BucketOf(16), 0u);
  EXPECT_EQ(p->dispatch.BucketOf(17), 1u);
  EXPECT_EQ(p->dispatch.BucketName(0), "rows<=16");
  EXPECT_EQ(p->dispatch.BucketName(1), "rows>16");
  // Round trip, and shapes are part of what the results depend on.
  auto q = Problem::FromJson(p->ToJson(), "", "again");
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_EQ(q->shapes, p->shapes);
  EXPECT_EQ(q->dispatch, p->dispatch);
  EXPECT_EQ(q->Fingerprint(), p->Fingerprint());
  EXPECT_NE(p->Fingerprint(), RowSoftmaxProblem().Fingerprint());
  Problem reweighted = *p;
  reweighted.shapes[0].weight = 0.5;
  EXPECT_NE(reweighted.Fingerprint(), p->Fingerprint());
}

TEST(ShapeSets, AProblemWithOneShapeIsUnchanged) {
  Problem p = RowSoftmaxProblem();
  // No new keys in its JSON: its Fingerprint is what it was before shape sets.
  EXPECT_EQ(p.ToJson().find("\"shapes\""), std::string::npos);
  EXPECT_EQ(p.ToJson().find("\"dispatch\""), std::string::npos);
  ASSERT_EQ(p.Cases().size(), 1u);
  EXPECT_EQ(p.Cases()[0].name, "default");
  EXPECT_TRUE(p.Cases()[0].timed);
  EXPECT_EQ(p.CaseDims(0), p.dims);
  auto only = p.AtCase(0);
  ASSERT_TRUE(only.ok());
  EXPECT_EQ(only->Fingerprint(), p.Fingerprint());
}

TEST(ShapeSets, ErrorsNameTheFieldAndTheValue) {
  struct Case {
    std::string shapes, dispatch, message;
  } cases[] = {
      {R"j([{"name": "a", "dims": {"rowz": 4}}])j", "",
       "shapes[0].dims.rowz: not a dim of the problem (dims: rows, cols)"},
      {R"j([{"name": "a", "dims": {"rows": 0}}])j", "",
       "shapes[0].dims.rows: a dim must be a positive integer, got 0"},
      {R"j([{"name": "a", "dims": {"rows": 4}, "weight": -1}])j", "",
       "shapes[0].weight: a weight must be a positive number, got -1"},
      {R"j([{"name": "a", "dims": {"rows": 4}, "weight": 0}])j", "",
       "shapes[0].weight: a weight must be a positive number, got 0"},
      {R"j([{"name": "a", "dims": {"rows": 4}, "timed": false, "weight": 2}])j", "",
       "shapes[0].weight: a check-only case"},
      {R"j([{"name": "a", "dims": {"rows": 4}, "timed": false}])j", "",
       "shapes: no case is timed, so there is no objective"},
      {R"j([{"name": "a", "dims": {"rows": 4}}, {"name": "a", "dims": {"rows": 5}}])j", "",
       "shapes[1].name: duplicate case 'a'"},
      {R"j([{"name": "a", "dims": {"rows": 4}}, {"name": "b", "dims": {"rows": 4, "cols": 4096}}])j", "",
       "shapes[1] (case 'b'): the same dims as shapes[0] (case 'a')"},
      {R"j([{"name": "A b", "dims": {"rows": 4}}])j", "",
       "shapes[0].name: a case name uses a-z, 0-9, '_' and '-' only, got \"A b\""},
      {R"j([{"name": "a", "dims": {"rows": 4, "rows": 5}}])j", "", "shapes[0].dims: duplicate key 'rows'"},
      {R"j([{"name": "a", "dims": {"rows": 4}, "speed": 1}])j", "", "shapes[0].speed: unknown field"},
      {R"j([])j", "", "shapes: declare at least one shape case"},
      {R"j([{"name": "huge", "dims": {"rows": 4611686018427387904}}])j", "",
       "shapes[0] (case 'huge'): tensors[0].shape: the byte count of 'x' overflows 64 bits"},
      {kThreeCases, R"j({"dim": "depth", "buckets": [16]})j",
       "dispatch.dim: 'depth' is not a dim of the problem (dims: rows, cols)"},
      {kThreeCases, R"j({"dim": "rows", "buckets": []})j", "dispatch.buckets: give at least one upper bound"},
      {kThreeCases, R"j({"dim": "rows", "buckets": [256, 16]})j",
       "dispatch.buckets[1]: bounds must increase, got 16 after 256"},
      {kThreeCases, R"j({"dim": "rows", "buckets": [-3]})j",
       "dispatch.buckets[0]: a bound must be a positive integer, got -3"},
      {kThreeCases, R"j({"dim": "rows", "buckets": [16, 256]})j",
       "dispatch.buckets: bucket 16<rows<=256 holds no timed shape case"},
      {R"j([{"name": "decode", "dims": {"rows": 8}}, {"name": "odd", "dims": {"rows": 4096}, "timed": false}])j",
       R"j({"dim": "rows", "buckets": [16]})j", "dispatch.buckets: bucket rows>16 holds no timed shape case"},
  };
  std::string many = "[";
  for (int i = 0; i < 65; ++i) {
    many += std::string(i ? ", " : "") + "{\"name\": \"c" + std::to_string(i) + "\", \"dims\": {\"rows\": " +
            std::to_string(i + 1) + "}}";
  }
  many += "]";
  EXPECT_NE(LoadError(WithShapes(many)).find("shapes: 65 cases (at most 64)"), std::string::npos);
  for (const Case& c : cases) {
    std::string message = LoadError(WithShapes(c.shapes, c.dispatch));
    EXPECT_NE(message.find(c.message), std::string::npos) << c.shapes << "\n" << message;
  }
  std::string json = Replace(RowSoftmaxProblemJson(), R"j("flops")j",
                             R"j("dispatch": {"dim": "rows", "buckets": [16]}, "flops")j");
  EXPECT_NE(LoadError(json).find("dispatch: buckets need shape cases"), std::string::npos) << LoadError(json);
}

std::string WithSet(const std::string& distribution) {
  return Replace(RowSoftmaxProblemJson(), R"j("flops")j",
                 R"j("input_sets": [{"name": "s", "distribution": ")j" + distribution + R"j("}], "flops")j");
}

TEST(ScaledDistributions, ParsePerRowAndPerColumnScales) {
  auto p = Problem::FromJson(WithSet("normal(0, 1) * 10^uniform(-4, 0) per row"), "", "mem");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->input_sets[0].fallback,
            Distribution::Normal(0, 1).ScaledPer(Distribution::ScaleAxis::kRow, -4, 0));
  EXPECT_EQ(p->input_sets[0].fallback.ToString(), "normal(0, 1) * 10^uniform(-4, 0) per row");
  auto q = Problem::FromJson(WithSet("uniform(-1,1)*10^uniform(-2.5,3)per column"), "", "mem");
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_EQ(q->input_sets[0].fallback,
            Distribution::Uniform(-1, 1).ScaledPer(Distribution::ScaleAxis::kColumn, -2.5, 3));
  auto again = Problem::FromJson(q->ToJson(), "", "again");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->input_sets, q->input_sets);
  EXPECT_NE(q->Fingerprint(), Problem::FromJson(WithSet("uniform(-1, 1)"), "", "m")->Fingerprint());
}

TEST(ScaledDistributions, ErrorsNameTheSetAndTheText) {
  struct Case {
    std::string distribution, message;
  } cases[] = {
      {"normal(0, 1) * 10^uniform(0, -4) per row", "uniform(LOW, HIGH) needs LOW < HIGH"},
      {"normal(0, 1) * 10^normal(0, 1) per row", "a scale's decimal exponent is drawn from uniform(LOW, HIGH), got 'normal'"},
      {"normal(0, 1) * 10^uniform(-4, 0) per plane", "a scale applies 'per row' or 'per column'"},
      {"normal(0, 1) * 10^uniform(-4, 0)", "a scale applies 'per row' or 'per column'"},
      {"normal(0, 1) * 2^uniform(-4, 0) per row", "a scale is written '* 10^uniform(LOW, HIGH) per row'"},
      {"normal(0, 1) + 3", "a scale is written"},
      {"normal(0, 1) * 10^uniform(-60, 0) per row", "must lie in [-38, 38]"},
      {"normal(0, 1) * 10^uniform(a, 0) per row", "distribution parameters must be numbers"},
      {"normal(0, 1) * 10^uniform(-4, 0 per row", "a scale is written"},
  };
  for (const Case& c : cases) {
    std::string message = LoadError(WithSet(c.distribution));
    EXPECT_NE(message.find("input_sets[0].distribution: "), std::string::npos) << message;
    EXPECT_NE(message.find(c.message), std::string::npos) << c.distribution << "\n" << message;
  }
}

}  // namespace
}  // namespace ksearch
