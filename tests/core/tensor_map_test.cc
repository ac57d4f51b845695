// Tensor-map plan arguments (docs/kernel-contract.md, "Tensor maps"): the
// JSON form, the values ResolvePlan computes for cuTensorMapEncodeTiled, every
// refusal naming its field and value, the signature rule and the marshalling.
#include <gtest/gtest.h>

#include <cstring>

#include "core/plan_resolve.h"
#include "core/plan_signature.h"
#include "ksearch/candidate.h"
#include "ksearch/problem.h"

namespace ksearch {
namespace {

using internal::ResolvedArg;
using internal::ResolvedTensorMap;

// Tensors shaped for each rule: a bf16 GEMM operand, an f32 matrix, rows of
// 7 f32 (28-byte strides), an integer tensor, a 6-D tensor and an output.
Problem MapProblem() {
  auto p = Problem::FromJson(R"({"name": "maps", "description": "tensor map tests",
    "dims": {"M": 100, "K": 72, "odd": 7},
    "tensors": [{"name": "A", "dtype": "bf16", "shape": ["M", "K"], "role": "input"},
                {"name": "x", "dtype": "f32", "shape": ["M", "K"], "role": "input"},
                {"name": "narrow", "dtype": "f32", "shape": ["M", "odd"], "role": "input"},
                {"name": "ids", "dtype": "i32", "shape": ["M", "K"], "role": "input"},
                {"name": "six", "dtype": "f32", "shape": [2, 2, 2, 2, 2, "K"], "role": "input"},
                {"name": "y", "dtype": "f32", "shape": ["M", "K"], "role": "output"}],
    "flops": "M * K", "bytes": "8 * M * K",
    "reference": {"source_text": "extern \"C\" __global__ void k() {}",
                  "plan": {"launches": [{"kernel": "k", "grid": [1], "block": [1], "args": []}]}},
    "reference_fp32": {"source_text": "extern \"C\" __global__ void k() {}",
                  "plan": {"launches": [{"kernel": "k", "grid": [1], "block": [1], "args": []}]}},
    "start": {"source_text": "extern \"C\" __global__ void k() {}",
              "plan": {"launches": [{"kernel": "k", "grid": [1], "block": [1], "args": []}]}}})",
                             "", "maps.json");
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return *p;
}

// A one-launch plan whose args are `args` (JSON array members).
std::string Plan(const std::string& args, const std::string& params = R"({"BM": 64, "BK": 64})") {
  return R"({"params": )" + params +
         R"(, "workspace": [{"name": "partial", "elements": 16}], "launches": [{"kernel": "k",
           "grid": [1], "block": [128], "args": [)" +
         args + "]}]}";
}

TEST(TensorMapArg, ParsesToCanonicalTextAndRoundTrips) {
  auto plan = LaunchPlan::FromJson(
      Plan(R"("x", {"box": ["BK", "BM"], "swizzle": "128B", "tensor_map": "A"}, "M:i32")"), "p.json");
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  const std::string& text = plan->launches[0].args[1];
  EXPECT_EQ(text,
            R"({"tensor_map":"A","box":["BK","BM"],"swizzle":"128B","l2_promotion":"none","oob_fill":"zero"})");
  EXPECT_TRUE(internal::IsTensorMapArg(text));
  EXPECT_FALSE(internal::IsTensorMapArg("x"));
  // Written back as an object, not as a string holding JSON.
  const std::string json = plan->ToJson();
  EXPECT_NE(json.find(R"("args":["x",{"tensor_map":"A")"), std::string::npos) << json;
  auto again = LaunchPlan::FromJson(json, "round trip");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(*again, *plan);
  // Integers stand for expressions, and a view keeps its dims.
  auto view = LaunchPlan::FromJson(
      Plan(R"({"tensor_map": "x", "dims": [8, "M * K / 8"], "box": [8, 16], "oob_fill": "nan",
               "l2_promotion": "256B"})"),
      "p.json");
  ASSERT_TRUE(view.ok()) << view.status().ToString();
  EXPECT_EQ(view->launches[0].args[0],
            R"({"tensor_map":"x","dims":["8","M * K / 8"],"box":["8","16"],"swizzle":"none","l2_promotion":"256B","oob_fill":"nan"})");
}

struct Bad {
  const char* args;
  const char* expected;
};

TEST(TensorMapArg, ParseErrorsNameTheFieldAndValue) {
  const Bad cases[] = {
      {R"({"tensor_map": "A"})", "p.json: launches[0].args[0]: missing required field 'box'"},
      {R"({"tensor_map": "A", "box": [64, 64], "swizle": "128B"})",
       "launches[0].args[0].swizle: unknown field"},
      {R"({"tensor_map": "A", "box": [64, 64], "swizzle": "256B"})",
       "launches[0].args[0].swizzle: '256B' is not one of none, 32B, 64B, 128B"},
      {R"({"tensor_map": "A", "box": [64, 64], "l2_promotion": "512B"})",
       "launches[0].args[0].l2_promotion: '512B' is not one of none, 64B, 128B, 256B"},
      {R"({"tensor_map": "A", "box": [64, 64], "oob_fill": "ones"})",
       "launches[0].args[0].oob_fill: 'ones' is not one of zero, nan"},
      {R"({"tensor_map": "A", "box": [1, 1, 1, 1, 1, 1]})",
       "launches[0].args[0].box: a tensor map has 1 to 5 dimensions, got 6 entries"},
      {R"({"tensor_map": "A", "box": []})", "launches[0].args[0].box: a tensor map has 1 to 5"},
      {R"({"tensor_map": "A", "dims": [7200], "box": [8, 8]})",
       "launches[0].args[0].box: the box has 2 entries but dims has 1"},
      {R"({"tensor_map": 3, "box": [8]})", "launches[0].args[0].tensor_map: expected a string"},
      {R"({"tensor_map": "A", "box": [1.5]})", "launches[0].args[0].box[0]: expected an integer or an expression"},
      {R"("{not json")", "launches[0].args[0]: expected a tensor or workspace name, EXPR:TYPE or a tensor map"},
  };
  for (const Bad& c : cases) {
    auto plan = LaunchPlan::FromJson(Plan(c.args), "p.json");
    ASSERT_FALSE(plan.ok()) << c.args;
    EXPECT_NE(plan.status().message().find(c.expected), std::string::npos)
        << "got: " << plan.status().message() << "\nexpected: " << c.expected;
  }
}

StatusOr<internal::ResolvedPlan> Resolve(const Problem& problem, const std::string& args,
                                         const std::string& params = R"({"BM": 64, "BK": 64})") {
  auto plan = LaunchPlan::FromJson(Plan(args, params), "p.json");
  if (!plan.ok()) return plan.status();
  return internal::ResolvePlan(problem, *plan);
}

TEST(TensorMapArg, ResolvesTheTensorsExtentInnermostFirst) {
  Problem p = MapProblem();
  auto r = Resolve(p, R"("y", {"tensor_map": "A", "box": ["BK", "BM"], "swizzle": "128B",
                               "l2_promotion": "128B"}, "M:i32")");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const auto& args = r->launches[0].args;
  ASSERT_EQ(args.size(), 3u);
  EXPECT_EQ(args[0].Size(), 8);
  ASSERT_EQ(args[1].kind, ResolvedArg::Kind::kTensorMap);
  EXPECT_EQ(args[1].Size(), 128);
  EXPECT_EQ(args[1].index, 0);  // A
  const ResolvedTensorMap& m = args[1].tensor_map;
  EXPECT_EQ(m.dtype, DType::kBF16);
  EXPECT_EQ(m.rank, 2);
  EXPECT_EQ(m.dims[0], 72u);   // K, the contiguous dimension
  EXPECT_EQ(m.dims[1], 100u);  // M
  EXPECT_EQ(m.strides[0], 144u);  // one row of 72 bf16
  EXPECT_EQ(m.box[0], 64u);
  EXPECT_EQ(m.box[1], 64u);
  EXPECT_EQ(m.swizzle, ResolvedTensorMap::Swizzle::k128B);
  EXPECT_EQ(m.l2_promotion, ResolvedTensorMap::L2Promotion::k128B);
  EXPECT_EQ(m.oob_fill, ResolvedTensorMap::OobFill::kZero);

  // A 3-D view of the 7200 f32 of x [M, K]: [M, 18, 4], innermost first.
  auto view = Resolve(p, R"({"tensor_map": "x", "dims": [4, 18, "M"], "box": [4, 18, 2], "oob_fill": "nan"})");
  ASSERT_TRUE(view.ok()) << view.status().ToString();
  const ResolvedTensorMap& v = view->launches[0].args[0].tensor_map;
  EXPECT_EQ(v.rank, 3);
  EXPECT_EQ(v.dims[0], 4u);
  EXPECT_EQ(v.dims[1], 18u);
  EXPECT_EQ(v.dims[2], 100u);
  EXPECT_EQ(v.strides[0], 16u);
  EXPECT_EQ(v.strides[1], 288u);
  EXPECT_EQ(v.oob_fill, ResolvedTensorMap::OobFill::kNan);
  // min() bounds a box by a small dim (decode shapes).
  auto bounded = Resolve(p, R"j({"tensor_map": "x", "box": [8, "min(BM, M)"]})j", R"({"BM": 128})");
  ASSERT_TRUE(bounded.ok()) << bounded.status().ToString();
  EXPECT_EQ(bounded->launches[0].args[0].tensor_map.box[1], 100u);
}

TEST(TensorMapArg, ResolveRefusesMapsTheDriverOrTheTensorWouldNot) {
  Problem p = MapProblem();
  const Bad cases[] = {
      {R"({"tensor_map": "B", "box": [8, 8]})",
       "launches[0].args[0].tensor_map: 'B' is not a tensor of the problem (tensors: A, x, narrow, ids, six, y)"},
      {R"({"tensor_map": "partial", "box": [8]})",
       "launches[0].args[0].tensor_map: 'partial' is a workspace buffer; a tensor map is over one of the "
       "problem's tensors"},
      {R"({"tensor_map": "A", "box": [64, 512]})", "launches[0].args[0].box[1]: '512' = 512 (must be 1..256)"},
      {R"({"tensor_map": "A", "box": [64, 0]})", "launches[0].args[0].box[1]: '0' = 0 (must be 1..256)"},
      {R"({"tensor_map": "A", "box": ["BK * 2", 64]})",
       "launches[0].args[0].box[0]: 'BK * 2' = 128 is larger than dimension 0 of the map over tensor 'A' "
       "[100, 72] bf16 (72)"},
      {R"({"tensor_map": "A", "box": [4, 64]})",
       "launches[0].args[0].box[0]: '4' = 4 bf16 elements = 8 bytes; the box's inner dimension must be a "
       "multiple of 16 bytes"},
      {R"({"tensor_map": "A", "box": [64, 64], "swizzle": "64B"})",
       "launches[0].args[0].swizzle: '64B' needs the box's inner dimension within 64 bytes, but box[0] = 64 "
       "bf16 elements = 128 bytes"},
      {R"({"tensor_map": "x", "box": [64, 64], "swizzle": "128B"})",
       "'128B' needs the box's inner dimension within 128 bytes, but box[0] = 64 f32 elements = 256 bytes"},
      {R"({"tensor_map": "narrow", "box": [4, 8]})",
       "launches[0].args[0]: the stride of dimension 1 of the map over tensor 'narrow' [100, 7] f32 "
       "(innermost first: [7, 100]) is 28 bytes; TMA needs a multiple of 16 bytes"},
      {R"({"tensor_map": "six", "box": [8, 2, 2, 2, 2]})",
       "launches[0].args[0]: tensor 'six' [2, 2, 2, 2, 2, 72] f32 has 6 dimensions; a tensor map has 1 to 5"},
      {R"({"tensor_map": "A", "box": [64]})",
       "launches[0].args[0].box: 1 entries, but the map over tensor 'A' [100, 72] bf16 has 2 dimensions"},
      {R"({"tensor_map": "x", "dims": [8, 8, "M"], "box": [8, 8, 8]})",
       "launches[0].args[0].dims: [8, 8, 100] views 6400 elements, but tensor 'x' [100, 72] f32 has 7200"},
      {R"({"tensor_map": "x", "dims": [0, "M * K"], "box": [8, 8]})",
       "launches[0].args[0].dims[0]: '0' = 0 (must be positive)"},
      {R"({"tensor_map": "x", "dims": ["Q", "M * K"], "box": [8, 8]})", "launches[0].args[0].dims[0]"},
      {R"({"tensor_map": "ids", "box": [8, 8], "oob_fill": "nan"})",
       "launches[0].args[0].oob_fill: 'nan' needs a floating-point tensor; tensor 'ids' [100, 72] i32 is not"},
  };
  for (const Bad& c : cases) {
    auto r = Resolve(p, c.args);
    ASSERT_FALSE(r.ok()) << c.args;
    EXPECT_NE(r.status().message().find(c.expected), std::string::npos)
        << "got: " << r.status().message() << "\nexpected: " << c.expected;
  }
}

TEST(TensorMapArg, ResolveChecksTextBuiltInCode) {
  // A LaunchSpec built in C++ skips FromJson: ResolvePlan parses the text.
  Problem p = MapProblem();
  LaunchPlan plan;
  LaunchSpec l;
  l.kernel = "k";
  l.grid = {"1", "1", "1"};
  l.block = {"1", "1", "1"};
  l.args = {R"({"tensor_map": "x", "box": [8, 8], "swizzle": "16B"})"};
  plan.launches.push_back(l);
  auto r = internal::ResolvePlan(p, plan);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "launches[0].args[0].swizzle: '16B' is not one of none, 32B, 64B, 128B");
  plan.launches[0].args = {R"({"tensor_map": "x", "box": [8, 8)"};
  r = internal::ResolvePlan(p, plan);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("malformed JSON"), std::string::npos) << r.status().message();
  plan.launches[0].args = {R"({"tensor_map": "x", "box": [8, 8]})"};
  EXPECT_TRUE(internal::ResolvePlan(p, plan).ok());
}

TEST(TensorMapArg, SignatureTakesA128ByteParameterOnly) {
  Problem p = MapProblem();
  const std::string args = R"("x", {"tensor_map": "A", "box": [64, 64]}, "M:i32")";
  auto plan = LaunchPlan::FromJson(Plan(args), "p.json");
  ASSERT_TRUE(plan.ok());
  auto r = internal::ResolvePlan(p, *plan);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const LaunchSpec& spec = plan->launches[0];
  const auto& launch = r->launches[0];
  const int64_t matching[] = {8, 128, 4};
  EXPECT_EQ(internal::ArgumentMismatch(0, spec, launch, matching), "");
  // The kernel takes a pointer where the plan passes a map.
  const int64_t pointer[] = {8, 8, 4};
  std::string why = internal::ArgumentMismatch(0, spec, launch, pointer);
  EXPECT_NE(why.find("launches[0] (k): argument 1 ({\"tensor_map\":\"A\""), std::string::npos) << why;
  EXPECT_NE(why.find("is 8 bytes in the kernel but the plan passes a tensor map (128 bytes by value); "
                     "declare the parameter const __grid_constant__ CUtensorMap"),
            std::string::npos)
      << why;
  // The kernel takes a CUtensorMap where the plan passes a pointer.
  const int64_t map_first[] = {128, 128, 4};
  why = internal::ArgumentMismatch(0, spec, launch, map_first);
  EXPECT_NE(why.find("argument 0 (\"x\") is 128 bytes in the kernel but the plan passes 8 (a pointer); a "
                     "128-byte parameter (a CUtensorMap) takes a tensor map"),
            std::string::npos)
      << why;
}

TEST(TensorMapArg, MarshalsEachMapIntoAnAlignedSlotOfItsOwn) {
  Problem p = MapProblem();
  auto plan = LaunchPlan::FromJson(
      Plan(R"("x", {"tensor_map": "A", "box": [64, 64]}, "M:i32", {"tensor_map": "y", "box": [16, 16]})"),
      "p.json");
  ASSERT_TRUE(plan.ok());
  auto r = internal::ResolvePlan(p, *plan);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::vector<internal::ArgumentSlot> storage;
  std::vector<void*> pointers;
  std::vector<std::pair<int, uint64_t>> encoded;  // tensor index, address
  auto tensor = [](size_t t) -> uint64_t { return 0x1000 * (t + 1); };
  auto workspace = [](size_t) -> uint64_t { return 0; };
  int refused = internal::MarshalArguments(
      r->launches[0], tensor, workspace,
      [&](const ResolvedArg& arg, uint64_t address, void* slot) {
        EXPECT_EQ(reinterpret_cast<uintptr_t>(slot) % 64, 0u);
        encoded.emplace_back(arg.index, address);
        std::memset(slot, 0xab, 128);
        return true;
      },
      &storage, &pointers);
  EXPECT_EQ(refused, -1);
  ASSERT_EQ(pointers.size(), 4u);
  ASSERT_EQ(encoded.size(), 2u);
  EXPECT_EQ(encoded[0], std::make_pair(0, uint64_t{0x1000}));  // A
  EXPECT_EQ(encoded[1], std::make_pair(5, uint64_t{0x6000}));  // y
  uint64_t x = 0;
  std::memcpy(&x, pointers[0], 8);
  EXPECT_EQ(x, 0x2000u);
  EXPECT_EQ(static_cast<const unsigned char*>(pointers[1])[127], 0xab);
  int32_t m = 0;
  std::memcpy(&m, pointers[2], 4);
  EXPECT_EQ(m, 100);
  // A refused map stops the marshalling at its index.
  refused = internal::MarshalArguments(
      r->launches[0], tensor, workspace, [](const ResolvedArg&, uint64_t, void*) { return false; },
      &storage, &pointers);
  EXPECT_EQ(refused, 1);
}

TEST(TensorMapArg, IsCappedInLength) {
  // 11 expressions' worth of text; one box entry of 46000 characters is past it.
  const std::string expr = "1" + std::string(45999, ' ');
  auto plan = LaunchPlan::FromJson(Plan(R"({"tensor_map": "x", "box": [")" + expr + R"(", 8]})"), "p.json");
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("launches[0].args[0]: "), std::string::npos) << plan.status().message();
  EXPECT_NE(plan.status().message().find("characters long (at most 45056)"), std::string::npos)
      << plan.status().message();
}

}  // namespace
}  // namespace ksearch
