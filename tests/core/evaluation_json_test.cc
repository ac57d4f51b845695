#include "core/evaluation_json.h"

#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>

namespace ksearch::internal {
namespace {

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

uint64_t Bits(double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  return bits;
}

// Every field set to something other than its default, with doubles that a
// six-significant-digit writer would change.
Evaluation Full() {
  Evaluation e;
  e.candidate_id = "c\"1\n";
  e.content_hash = "abc";
  e.status = EvalStatus::kWrongResult;
  e.message = "outputs differ";
  e.details = "log \x01 line";
  e.device_log = "printf\n";
  e.checks_not_run = {"timing", "re-check after timing"};
  e.relaxed_tolerance = true;
  KernelResources r{"k", 40, 1024, 49152, 16, 8, 4, 1024};
  e.resources = {r, KernelResources{"k2"}};
  e.mismatch = Mismatch{"y", "shifted", "recheck", 3, 4096, 17, 0.1, kNan, kInf, 1.0 / 3.0,
                        1e-5};
  e.max_l2_rel_error = 5e-324;  // the smallest denormal
  e.allowed_l2_rel_error = 1.0000000000000002;
  e.timing = TimingStats{0.123456789012345, 0.1, 0.11, 0.2, 0.12, 0.13, 41};
  e.baseline_timing = TimingStats{DBL_MAX, -0.0, 0, 0, 0, 0, 1};
  e.speedup = Speedup{"cublas_sgemm", 1.7777777777777777, 1.7, 1.8, 40};
  e.floor_ms = 0.012345678901234;
  e.roofline_fraction = -kInf;
  e.device.name = "NVIDIA H200";
  e.device.ordinal = 1;
  e.device.cc_major = 10;
  e.device.cc_minor = 3;
  e.device.driver_version = 13000;
  e.device.nvrtc_version = "13.0";
  e.device.multiprocessors = 132;
  e.device.l2_bytes = 60 << 20;
  e.device.global_memory_bytes = int64_t{141} << 30;
  e.device.sm_clock_mhz = 1980;
  e.device.memory_clock_mhz = 3201;
  e.device.peak_bandwidth_gbps = 4023.456789;
  e.device.peak_gflops = 60123.4;
  e.device.peak_mma_gflops = {{"tf32_mma", 378000.5}, {"fp16_mma", kNan}};
  e.device.baseline_library = "cuBLAS 13.0.0";
  e.compile_cached = true;
  e.compile_ms = 81.00000000000001;
  e.check_ms = 2.5;
  e.timing_ms = 300.25;
  e.total_ms = 383.75000000000006;
  return e;
}

TEST(EvaluationJson, EveryFieldRoundTripsExactly) {
  Evaluation e = Full();
  auto back = EvaluationFromJson(e.ToJson(), "test");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->ToJson(), e.ToJson());
  EXPECT_EQ(back->Report(), e.Report());
  EXPECT_EQ(back->candidate_id, e.candidate_id);
  EXPECT_EQ(back->status, EvalStatus::kWrongResult);
  EXPECT_EQ(back->checks_not_run, e.checks_not_run);
  ASSERT_EQ(back->resources.size(), 2u);
  EXPECT_EQ(back->resources[0].max_dynamic_shared_bytes, 49152);
  EXPECT_EQ(back->resources[1].registers, -1);
  EXPECT_EQ(back->mismatch->phase, "recheck");
  EXPECT_EQ(Bits(back->mismatch->l2_rel_error), Bits(1.0 / 3.0));
  EXPECT_EQ(Bits(back->max_l2_rel_error), Bits(5e-324));
  EXPECT_EQ(Bits(back->allowed_l2_rel_error), Bits(1.0000000000000002));
  EXPECT_EQ(Bits(back->timing->median_ms), Bits(0.123456789012345));
  EXPECT_EQ(back->baseline_timing->median_ms, DBL_MAX);
  EXPECT_TRUE(std::signbit(back->baseline_timing->min_ms));
  EXPECT_EQ(Bits(back->speedup->ratio), Bits(1.7777777777777777));
  EXPECT_EQ(Bits(back->total_ms), Bits(383.75000000000006));
  EXPECT_EQ(back->device.cc_major, 10);
  EXPECT_EQ(back->device.cc_minor, 3);
  EXPECT_EQ(back->device.global_memory_bytes, int64_t{141} << 30);
  ASSERT_EQ(back->device.peak_mma_gflops.size(), 2u);
  EXPECT_EQ(back->device.peak_mma_gflops[0].second, 378000.5);
  EXPECT_TRUE(std::isnan(back->device.peak_mma_gflops[1].second));
}

TEST(EvaluationJson, NonFiniteNumbersAreStringsInValidJson) {
  Evaluation e = Full();
  std::string json = e.ToJson();
  boost::system::error_code ec;
  boost::json::value parsed = boost::json::parse(json, ec);
  ASSERT_FALSE(ec) << ec.message();
  const boost::json::object& mismatch = parsed.at("mismatch").as_object();
  EXPECT_EQ(mismatch.at("got"), "nan");
  EXPECT_EQ(mismatch.at("max_rel_error"), "inf");
  EXPECT_EQ(parsed.at("roofline_fraction"), "-inf");
  EXPECT_EQ(json.find("NaN"), std::string::npos);
  EXPECT_EQ(json.find("Infinity"), std::string::npos);
  EXPECT_EQ(json.find("1e99999"), std::string::npos);
  auto back = EvaluationFromJson(json, "test");
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(std::isnan(back->mismatch->got));
  EXPECT_EQ(back->mismatch->max_rel_error, kInf);
  EXPECT_EQ(back->roofline_fraction, -kInf);
}

// A shape case's figures keep their non-finite values too: a case whose
// speedup overflowed is not read back as a speedup of 0.
TEST(EvaluationJson, ShapeCaseFiguresKeepTheirNonFiniteValues) {
  Evaluation e = Full();
  CaseResult c;
  c.name = "decode";
  c.dims = {{"M", 1}};
  c.status = EvalStatus::kOk;
  c.median_ms = 0.5;
  c.speedup = kInf;
  c.baseline_median_ms = std::numeric_limits<double>::quiet_NaN();
  e.cases.push_back(c);
  std::string json = e.ToJson();
  EXPECT_NE(json.find("\"speedup\":\"inf\""), std::string::npos) << json;
  auto back = EvaluationFromJson(json, "test");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->cases.size(), 1u);
  EXPECT_EQ(back->cases[0].speedup, kInf);
  EXPECT_TRUE(std::isnan(back->cases[0].baseline_median_ms));
  EXPECT_EQ(back->cases[0].median_ms, 0.5);
  EXPECT_EQ(back->ToJson(), json);
}

// A case needs its name and status, and its members their types; each error
// names the member. A key it does not know is ignored, as in the evaluation.
TEST(EvaluationJson, AShapeCaseWithoutNameOrStatusIsRefusedAndUnknownKeysAreIgnored) {
  struct Bad {
    const char* json;
    const char* error;
  } bad[] = {
      {R"({"status": "ok", "cases": [{"status": "ok"}]})", "cases[0]"},
      {R"({"status": "ok", "cases": [{"name": "a", "status": "ok"}, {"name": "b"}]})", "cases[1]"},
      {R"({"status": "ok", "cases": [{"name": "a", "status": null}]})", "cases[0].status"},
      {R"({"status": "ok", "cases": [{"name": 3, "status": "ok"}]})", "cases[0].name"},
      {R"({"status": "ok", "cases": [{"name": "a", "status": "ok", "dims": {"M": 1.5}}]})", "cases[0].dims"},
      {R"({"status": "ok", "cases": [{"name": "a", "status": "ok", "repetitions": 1e12}]})",
       "cases[0].repetitions"},
  };
  for (const Bad& b : bad) {
    auto back = EvaluationFromJson(b.json, "test");
    ASSERT_FALSE(back.ok()) << b.json;
    EXPECT_EQ(back.status().code(), StatusCode::kInvalidArgument) << b.json;
    EXPECT_NE(back.status().message().find(b.error), std::string::npos) << back.status().message();
  }
  auto good = EvaluationFromJson(R"({"status": "ok", "cases": [{"name": "a", "status": "ok",
      "dims": {"M": 16}, "timed": false, "from_a_newer_version": [1]}]})", "test");
  ASSERT_TRUE(good.ok()) << good.status().ToString();
  ASSERT_EQ(good->cases.size(), 1u);
  EXPECT_FALSE(good->cases[0].timed);
  EXPECT_EQ(good->cases[0].dims, (std::vector<std::pair<std::string, int64_t>>{{"M", 16}}));
}

TEST(EvaluationJson, ReadsTheLayoutEarlierVersionsWrote) {
  // As main's writer left records before this codec: non-finite numbers as
  // null, the device as its arch only, a speedup against the reference.
  const char* old = R"({"candidate_id":"c3","content_hash":"h","status":"wrong_result",
    "message":"m","details":"","device_log":"","checks_not_run":[],"relaxed_tolerance":false,
    "resources":[{"kernel":"k","registers":32,"static_shared_bytes":0,
                  "max_dynamic_shared_bytes":-1,"local_bytes":0,"spill_store_bytes":0,
                  "spill_load_bytes":0,"max_threads_per_block":-1}],
    "mismatch":{"tensor":"y","input_set":"normal","phase":"check","bad_count":1,"elements":8,
                "worst_index":2,"expected":1.5E0,"got":null,"max_rel_error":null,
                "l2_rel_error":null,"allowed_l2_rel_error":1E-5},
    "max_l2_rel_error":null,"allowed_l2_rel_error":1E-5,
    "speedup":{"baseline":"b","ratio":1.5E0,"ci_low":1.4E0,"ci_high":1.6E0,"pairs":9},
    "speedup_vs_reference":{"baseline":"reference","ratio":2E0,"ci_low":1.9E0,"ci_high":2.1E0,"pairs":9},
    "floor_ms":0E0,"roofline_fraction":0E0,
    "device":{"name":"NVIDIA H200","ordinal":0,"arch":"sm_90","driver_version":13000,
              "nvrtc_version":"13.0","multiprocessors":132,"l2_bytes":62914560,"sm_clock_mhz":0,
              "memory_clock_mhz":0,"peak_bandwidth_gbps":4E3,"peak_gflops":6E4,
              "baseline_library":""},
    "compile_cached":false,"compile_ms":8E1,"check_ms":1E0,"timing_ms":0E0,"total_ms":8.1E1})";
  auto e = EvaluationFromJson(old, "old record");
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->status, EvalStatus::kWrongResult);
  EXPECT_TRUE(std::isnan(e->mismatch->got));
  EXPECT_TRUE(std::isnan(e->max_l2_rel_error));
  EXPECT_EQ(e->device.Arch(), "sm_90");
  EXPECT_EQ(e->device.l2_bytes, 62914560);
  EXPECT_EQ(e->speedup->ratio, 1.5);
  EXPECT_FALSE(e->timing.has_value());
  // An object written as null is absent.
  auto nulls = EvaluationFromJson(R"({"status":"ok","timing":null,"device":null})", "t");
  ASSERT_TRUE(nulls.ok()) << nulls.status().ToString();
  EXPECT_FALSE(nulls->timing.has_value());
}

TEST(EvaluationJson, ErrorsNameTheOriginTheFieldAndTheValue) {
  auto expect_error = [](const std::string& json, const std::string& want) {
    auto e = EvaluationFromJson(json, "rec.json");
    ASSERT_FALSE(e.ok()) << json;
    EXPECT_EQ(e.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(e.status().message().find(want), std::string::npos)
        << e.status().message() << " lacks " << want;
  };
  expect_error(R"({"message":"no status"})", "rec.json: (top level): missing required field 'status'");
  expect_error(R"({"status":null})", "rec.json: status: expected an evaluation status, got null");
  expect_error(R"({"status":"great"})", "rec.json: status: unknown evaluation status \"great\"");
  expect_error(R"({"status":"ok","timing":{"median_ms":"fast"}})",
               "rec.json: timing.median_ms: expected a number (or \"nan\", \"inf\", \"-inf\"), got \"fast\"");
  expect_error(R"({"status":"ok","timing":{"median_ms":"NaN"}})", "timing.median_ms");
  expect_error(R"({"status":"ok","resources":[{"registers":4294967296}]})",
               "rec.json: resources[0].registers: 4294967296 does not fit in 32 bits");
  expect_error(R"({"status":"ok","resources":{}})", "rec.json: resources: expected an array");
  expect_error(R"({"status":"ok","device":[1]})", "rec.json: device: expected an object");
  expect_error(R"({"status":"ok","checks_not_run":[1]})", "rec.json: checks_not_run[0]: expected a string");
  expect_error(R"({"status":"ok","compile_cached":"yes"})", "rec.json: compile_cached: expected true or false");
  expect_error(R"([])", "rec.json: (top level): expected an evaluation object");
  expect_error(R"({"status":"ok",)", "rec.json: malformed JSON");
}

TEST(EvaluationJson, UnknownFieldsAreIgnored) {
  auto e = EvaluationFromJson(R"({"status":"ok","from_a_newer_version":{"x":[1]}})", "t");
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->status, EvalStatus::kOk);
}

TEST(EvaluationJson, PartsHaveTheSameFormAsInsideAnEvaluation) {
  Evaluation e = Full();
  boost::json::object whole = EvaluationToJson(e);
  EXPECT_EQ(boost::json::value(ResourcesToJson(e.resources)), whole.at("resources"));
  EXPECT_EQ(boost::json::value(TimingToJson(*e.timing)), whole.at("timing"));
  EXPECT_EQ(boost::json::value(DeviceInfoToJson(e.device)), whole.at("device"));
  EXPECT_EQ(whole.at("device").at("arch"), "sm_103");
}

TEST(ParseArch, ReadsRealArchsAndRefusesTheRest) {
  int major = 0, minor = 0;
  EXPECT_TRUE(ParseArch("sm_90", &major, &minor));
  EXPECT_EQ(major, 9);
  EXPECT_EQ(minor, 0);
  EXPECT_TRUE(ParseArch("sm_100a", &major, &minor));
  EXPECT_EQ(major, 10);
  EXPECT_EQ(minor, 0);
  EXPECT_FALSE(ParseArch("compute_90", &major, &minor));
  EXPECT_FALSE(ParseArch("sm_9", &major, &minor));
  EXPECT_FALSE(ParseArch("sm_9x0", &major, &minor));
  EXPECT_FALSE(ParseArch("sm_99999999999", &major, &minor));
}

}  // namespace
}  // namespace ksearch::internal
