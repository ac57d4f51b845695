// The worker protocol without processes: framing (split reads, version
// mismatch, truncation, garbage, absurd lengths), blocking reads on a real
// socket pair, and the messages' JSON both ways.
#include "worker/protocol.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmath>
#include <limits>
#include <string>

#include "core/evaluation_json.h"
#include "test_util.h"
#include "worker/messages.h"

namespace ksearch::internal::worker {
namespace {

Frame SampleFrame() {
  Frame f;
  f.type = MessageType::kJudge;
  f.json = R"({"seq":"1"})";
  f.attachment = std::string(
      "\x7f"
      "ELF\0\0\x01\xff",
      8);
  return f;
}

TEST(Framing, DecodesAFrameFedOneByteAtATime) {
  std::string bytes = EncodeFrame(SampleFrame());
  FrameDecoder decoder;
  for (char c : bytes) {
    EXPECT_FALSE(decoder.Next().has_value());
    ASSERT_TRUE(decoder.Feed(std::string_view(&c, 1)).ok());
  }
  auto frame = decoder.Next();
  ASSERT_TRUE(frame.has_value());
  EXPECT_EQ(frame->type, MessageType::kJudge);
  EXPECT_EQ(frame->json, SampleFrame().json);
  EXPECT_EQ(frame->attachment, SampleFrame().attachment);
  EXPECT_TRUE(decoder.Finish().ok());
}

TEST(Framing, SplitsSeveralFramesDeliveredTogether) {
  Frame a = SampleFrame(), b;
  b.type = MessageType::kShutdown;
  b.json = "{}";
  FrameDecoder decoder;
  ASSERT_TRUE(decoder.Feed(EncodeFrame(a) + EncodeFrame(b) + EncodeFrame(a)).ok());
  EXPECT_EQ(decoder.Next()->type, MessageType::kJudge);
  EXPECT_EQ(decoder.Next()->type, MessageType::kShutdown);
  EXPECT_EQ(decoder.Next()->attachment, a.attachment);
  EXPECT_FALSE(decoder.Next().has_value());
}

TEST(Framing, RejectsAnotherProtocolVersionByName) {
  FrameDecoder decoder;
  Status s = decoder.Feed(EncodeFrame(SampleFrame(), kProtocolVersion + 1));
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.ToString();
  EXPECT_NE(s.message().find("protocol version mismatch"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(std::to_string(kProtocolVersion + 1)), std::string::npos);
  // The stream cannot be trusted afterwards.
  EXPECT_FALSE(decoder.Feed(EncodeFrame(SampleFrame())).ok());
}

TEST(Framing, ReportsATruncatedFrameAtTheEndOfTheStream) {
  std::string bytes = EncodeFrame(SampleFrame());
  for (size_t cut : {size_t{3}, kHeaderBytes - 1, kHeaderBytes + 2, bytes.size() - 1}) {
    FrameDecoder decoder;
    ASSERT_TRUE(decoder.Feed(bytes.substr(0, cut)).ok()) << cut;
    EXPECT_FALSE(decoder.Next().has_value());
    Status end = decoder.Finish();
    EXPECT_EQ(end.code(), StatusCode::kDataLoss) << cut;
    EXPECT_NE(end.message().find("truncated frame"), std::string::npos) << end.message();
  }
}

TEST(Framing, RejectsGarbageAtOnce) {
  FrameDecoder decoder;
  Status s = decoder.Feed("GET / HTTP/1.1\r\n\r\n");
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("not a ksearch worker frame"), std::string::npos) << s.message();
  FrameDecoder early;  // two wrong bytes suffice
  EXPECT_EQ(early.Feed("xy").code(), StatusCode::kDataLoss);
}

TEST(Framing, KeepsWholeFramesThatCameBeforeGarbage) {
  FrameDecoder decoder;
  EXPECT_FALSE(decoder.Feed(EncodeFrame(SampleFrame()) + "garbage after a good frame").ok());
  auto frame = decoder.Next();
  ASSERT_TRUE(frame.has_value());
  EXPECT_EQ(frame->json, SampleFrame().json);
  EXPECT_FALSE(decoder.Next().has_value());
}

TEST(Framing, RejectsUnknownTypesAndAbsurdLengths) {
  std::string bytes = EncodeFrame(SampleFrame());
  std::string unknown = bytes;
  unknown[6] = 99;
  FrameDecoder a;
  EXPECT_EQ(a.Feed(unknown).code(), StatusCode::kDataLoss);
  std::string huge = bytes;
  huge[11] = '\x7f';  // a JSON length near 2 GiB
  FrameDecoder b;
  Status s = b.Feed(huge);
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("too large"), std::string::npos) << s.message();
}

class SocketPair : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds_), 0); }
  void TearDown() override {
    for (int fd : fds_) {
      if (fd >= 0) ::close(fd);
    }
  }
  void CloseWriter() {
    ::close(fds_[0]);
    fds_[0] = -1;
  }
  int fds_[2] = {-1, -1};
};

TEST_F(SocketPair, ReadsFramesAndAReportsCleanEnd) {
  ASSERT_TRUE(WriteFrame(fds_[0], SampleFrame()).ok());
  auto frame = ReadFrame(fds_[1]);
  ASSERT_TRUE(frame.ok()) << frame.status().ToString();
  EXPECT_EQ(frame->attachment, SampleFrame().attachment);
  CloseWriter();
  EXPECT_EQ(ReadFrame(fds_[1]).status().code(), StatusCode::kUnavailable);
}

TEST_F(SocketPair, ReportsAFrameCutByTheEndOfTheStream) {
  std::string bytes = EncodeFrame(SampleFrame());
  ASSERT_TRUE(WriteAll(fds_[0], bytes.substr(0, bytes.size() - 3)).ok());
  CloseWriter();
  Status s = ReadFrame(fds_[1]).status();
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("truncated frame"), std::string::npos) << s.message();
}

TEST_F(SocketPair, ReportsGarbageAndVersionMismatch) {
  ASSERT_TRUE(WriteAll(fds_[0], "garbage, not a frame at all").ok());
  EXPECT_EQ(ReadFrame(fds_[1]).status().code(), StatusCode::kDataLoss);
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  ASSERT_TRUE(WriteFrame(fds[0], SampleFrame(), 7).ok());
  EXPECT_EQ(ReadFrame(fds[1]).status().code(), StatusCode::kFailedPrecondition);
  ::close(fds[0]);
  ::close(fds[1]);
}

TEST_F(SocketPair, WritingToAClosedPeerIsAnErrorNotASignal) {
  ::close(fds_[1]);
  fds_[1] = -1;
  EXPECT_EQ(WriteFrame(fds_[0], SampleFrame()).code(), StatusCode::kUnavailable);
}

Candidate SampleCandidate() {
  Problem problem = testing::RowSoftmaxProblem(8, 64);
  Candidate c = problem.start.ToCandidate("c7", "test");
  c.compile_options = {"--use_fast_math"};
  c.plan.SetParam("BLOCK", 256);
  c.provenance.parent_id = "c3";
  c.provenance.round = 2;
  return c;
}

TEST(Messages, JudgeRoundTripKeepsTheCandidateAndItsCubin) {
  JudgeMessage m;
  m.seq = 1ull << 60;
  m.candidate = SampleCandidate();
  CompileResult compiled;
  compiled.ok = true;
  compiled.cubin = std::string("\0\x01\x02\xff cubin bytes", 16);
  compiled.log = "ptxas info: Used 32 registers";
  compiled.compile_ms = 123.5;
  compiled.cached = true;
  compiled.resources.push_back(KernelResources{"row_softmax", 32, 1024, -1, 0, 0, 0, -1});
  m.compiled = compiled;
  auto back = DecodeJudge(Encode(m));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->seq, m.seq);
  EXPECT_EQ(back->candidate.id, "c7");
  EXPECT_EQ(back->candidate.ContentHash(), m.candidate.ContentHash());
  EXPECT_EQ(back->candidate.provenance.parent_id, "c3");
  EXPECT_EQ(back->candidate.provenance.round, 2);
  ASSERT_TRUE(back->compiled.has_value());
  EXPECT_EQ(back->compiled->cubin, compiled.cubin);
  EXPECT_EQ(back->compiled->log, compiled.log);
  EXPECT_TRUE(back->compiled->cached);
  ASSERT_EQ(back->compiled->resources.size(), 1u);
  EXPECT_EQ(back->compiled->resources[0].registers, 32);
}

TEST(Messages, InitCarriesASelfContainedProblemAndEveryOption) {
  InitMessage m;
  m.problem_json = testing::RowSoftmaxProblem(8, 64).ToJson();
  m.options.device_ordinal = 3;
  m.options.replay_input_seed = 0xfedcba9876543210ull;
  m.options.max_timing_seconds = 0.25;
  m.options.flush_l2 = false;
  m.options.compile_cache_dir = "off";
  auto back = DecodeInit(Encode(m));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->options.device_ordinal, 3);
  EXPECT_EQ(back->options.replay_input_seed, m.options.replay_input_seed);
  EXPECT_EQ(back->options.max_timing_seconds, 0.25);
  EXPECT_FALSE(back->options.flush_l2);
  EXPECT_EQ(back->options.compile_cache_dir, "off");
  auto problem = Problem::FromJson(back->problem_json, "", "init");
  ASSERT_TRUE(problem.ok()) << problem.status().ToString();
  EXPECT_EQ(problem->Fingerprint(), testing::RowSoftmaxProblem(8, 64).Fingerprint());
}

TEST(Messages, DecodersRejectFramesOfAnotherType) {
  Frame started = Encode(StartedMessage{5});
  EXPECT_FALSE(DecodeResult(started).ok());
  auto back = DecodeStarted(started);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->seq, 5u);
  Frame broken = started;
  broken.json = R"({"seq": 5})";  // a number, not the decimal string
  EXPECT_EQ(DecodeStarted(broken).status().code(), StatusCode::kInvalidArgument);
}

Evaluation SampleEvaluation() {
  Evaluation e;
  e.candidate_id = "c9";
  e.content_hash = "abc";
  e.status = EvalStatus::kUnwrittenOutput;
  e.message = "12 of 64 elements of 'y' were never written";
  e.details = "line 1\nline 2";
  e.checks_not_run = {"timing"};
  e.resources.push_back(KernelResources{"k", 40, 0, 4096, 16, 8, 8, 1024});
  Mismatch m;
  m.tensor = "y";
  m.input_set = "shifted";
  m.phase = "check";
  m.bad_count = 12;
  m.elements = 64;
  m.worst_index = 5;
  m.expected = 0.25;
  m.got = std::numeric_limits<double>::quiet_NaN();  // the poison, read back
  m.max_rel_error = std::numeric_limits<double>::infinity();
  e.mismatch = m;
  e.timing = TimingStats{0.5, 0.4, 0.45, 0.6, 0.49, 0.51, 40};
  e.speedup = Speedup{"reference_fp32", 1.5, 1.4, 1.6, 40};
  e.device.name = "NVIDIA H200";
  e.device.cc_major = 9;
  e.device.cc_minor = 0;
  e.device.global_memory_bytes = int64_t{141} << 30;
  e.compile_ms = 80.0;
  e.total_ms = 900.0;
  return e;
}

// The evaluation's own form is tested with its codec (tests/core); here, that
// a result frame carries all of it.
TEST(Messages, ResultCarriesTheWholeEvaluation) {
  Evaluation e = SampleEvaluation();
  auto back = DecodeResult(Encode(ResultMessage{42, e}));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->seq, 42u);
  const Evaluation& b = back->evaluation;
  EXPECT_EQ(b.status, EvalStatus::kUnwrittenOutput);
  EXPECT_EQ(b.details, e.details);
  ASSERT_TRUE(b.mismatch.has_value());
  EXPECT_TRUE(std::isnan(b.mismatch->got));
  EXPECT_TRUE(std::isinf(b.mismatch->max_rel_error));
  EXPECT_EQ(b.device.Arch(), "sm_90");
  EXPECT_EQ(b.device.global_memory_bytes, e.device.global_memory_bytes);
  EXPECT_EQ(b.resources[0].max_threads_per_block, 1024);
  EXPECT_EQ(b.ToJson(), e.ToJson());
}

TEST(Messages, AResultWithABadEvaluationNamesTheField) {
  Frame frame = Encode(ResultMessage{1, SampleEvaluation()});
  frame.json = R"({"seq":"1","evaluation":"{\"status\": \"melted\"}"})";
  auto bad = DecodeResult(frame);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("worker evaluation: status: unknown evaluation status \"melted\""),
            std::string::npos)
      << bad.status().message();
}

// Per-case results read back the same from each form: the worker's wire
// JSON, the public --json form and the store's reader.
TEST(EvaluationJson, CarriesPerCaseResultsInEveryForm) {
  Evaluation e = SampleEvaluation();
  e.mismatch->got = 1.0;
  e.mismatch->max_rel_error = 3.0;
  e.status = EvalStatus::kWrongResult;
  CaseResult prefill;
  prefill.name = "prefill";
  prefill.dims = {{"M", 4096}, {"N", 256}};
  prefill.weight = 0.25;
  prefill.status = EvalStatus::kOk;
  prefill.message = "correct; median 0.5000 ms";
  prefill.median_ms = 0.5;
  prefill.ci_low_ms = 0.49;
  prefill.ci_high_ms = 0.51;
  prefill.repetitions = 40;
  prefill.baseline_median_ms = 0.75;
  prefill.baseline = "cublas_sgemm";
  prefill.speedup = 1.5;
  prefill.speedup_ci_low = 1.4;
  prefill.speedup_ci_high = 1.6;
  prefill.floor_ms = 0.1;
  prefill.max_l2_rel_error = 1e-7;
  prefill.allowed_l2_rel_error = 8e-7;
  CaseResult odd;
  odd.name = "odd";
  odd.dims = {{"M", 17}, {"N", 256}};
  odd.timed = false;
  odd.status = EvalStatus::kWrongResult;
  odd.message = "'C' differs from the reference";
  e.cases = {prefill, odd};
  auto expect_cases = [&](const StatusOr<Evaluation>& back, const char* form) {
    ASSERT_TRUE(back.ok()) << form << ": " << back.status().ToString();
    ASSERT_EQ(back->cases.size(), 2u) << form;
    const CaseResult& p = back->cases[0];
    EXPECT_EQ(p.name, "prefill") << form;
    EXPECT_EQ(p.dims, prefill.dims) << form;
    EXPECT_EQ(p.weight, 0.25) << form;
    EXPECT_TRUE(p.timed) << form;
    EXPECT_EQ(p.status, EvalStatus::kOk) << form;
    EXPECT_EQ(p.median_ms, 0.5) << form;
    EXPECT_EQ(p.repetitions, 40) << form;
    EXPECT_EQ(p.baseline_median_ms, 0.75) << form;
    EXPECT_EQ(p.baseline, "cublas_sgemm") << form;
    EXPECT_EQ(p.speedup_ci_high, 1.6) << form;
    EXPECT_EQ(p.allowed_l2_rel_error, 8e-7) << form;
    EXPECT_FALSE(back->cases[1].timed) << form;
    EXPECT_EQ(back->cases[1].status, EvalStatus::kWrongResult) << form;
    EXPECT_EQ(back->cases[1].message, odd.message) << form;
    EXPECT_EQ(back->Report(), e.Report()) << form;
  };
  // One codec: the result frame and the public form read the same.
  auto frame = DecodeResult(Encode(ResultMessage{7, e}));
  ASSERT_TRUE(frame.ok()) << frame.status().ToString();
  expect_cases(frame->evaluation, "wire");
  expect_cases(EvaluationFromJson(e.ToJson(), "public"), "public");
  EXPECT_NE(e.Report().find("case odd (M=17 N=256, check-only): wrong_result"), std::string::npos)
      << e.Report();
  // A one-shape evaluation writes no "cases".
  EXPECT_EQ(SampleEvaluation().ToJson().find("\"cases\""), std::string::npos);
  auto bad = EvaluationFromJson(R"({"status": "ok", "cases": [{"name": "a", "status": "fine"}]})", "e");
  EXPECT_NE(bad.status().message().find("cases[0].status: unknown evaluation status \"fine\""), std::string::npos)
      << bad.status().message();
}

}  // namespace
}  // namespace ksearch::internal::worker
