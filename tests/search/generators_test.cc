// The generators on their own: the catalog and the mutation brancher over a
// template with constraints, the prompt templates, and the LLM-backed
// generators against the mock server (prompt content, parsing, notes).
#include <gtest/gtest.h>

#include <set>

#include "search/prompts.h"
#include "search_test_util.h"

namespace ksearch {
namespace {

using testing::TemplatedRowSoftmax;

HistoryEntry Judged(Candidate c, Evaluation e) {
  e.candidate_id = c.id;
  return HistoryEntry{std::move(c), std::move(e)};
}

bool SatisfiesConstraints(const Problem& problem, const Candidate& c) {
  std::vector<std::pair<std::string, int64_t>> values = problem.dims;
  for (const auto& p : c.plan.params) values.push_back(p);
  for (const std::string& condition : problem.templates[0].constraints) {
    auto ok = EvaluateCondition(condition, values);
    if (!ok.ok() || !*ok) return false;
  }
  return true;
}

TEST(CatalogIdeaGenerator, SpreadsIdeasAcrossCategoriesAsParameterMoves) {
  Problem problem = TemplatedRowSoftmax();
  HistoryEntry parent =
      Judged(problem.templates[0].kernel.ToCandidate("p", "template"), testing::Timed(1.0));
  SearchHistory history;
  history.entries.push_back(parent);
  auto catalog = MakeCatalogIdeaGenerator();
  IdeaRequest request;
  request.problem = &problem;
  request.parent = &history.entries[0];
  request.history = &history;
  request.count = 3;
  request.categories = {IdeaCategory::kParallelism, IdeaCategory::kMemoryAccess,
                        IdeaCategory::kAsynchrony};
  request.seed = 7;
  auto result = catalog->Propose(request);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  ASSERT_EQ(result->ideas.size(), 3u) << result->notes;
  // BLOCK is parallelism, VEC memory access; nothing is asynchrony, so the
  // third slot takes another untried move.
  EXPECT_EQ(result->ideas[0].category, IdeaCategory::kParallelism);
  EXPECT_NE(result->ideas[0].text.find("BLOCK"), std::string::npos) << result->ideas[0].text;
  EXPECT_EQ(result->ideas[1].category, IdeaCategory::kMemoryAccess);
  EXPECT_NE(result->ideas[1].text.find("[move VEC="), std::string::npos) << result->ideas[1].text;
  std::set<std::string> texts;
  for (const Idea& idea : result->ideas) texts.insert(idea.text);
  EXPECT_EQ(texts.size(), 3u);
  // The same seed proposes the same ideas.
  auto again = catalog->Propose(request);
  ASSERT_TRUE(again.ok());
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(again->ideas[i].text, result->ideas[i].text);
}

TEST(CatalogIdeaGenerator, DoesNotRepeatMovesAlreadyTriedOnTheSameParent) {
  Problem problem = TemplatedRowSoftmax();
  SearchHistory history;
  history.entries.push_back(
      Judged(problem.templates[0].kernel.ToCandidate("p", "template"), testing::Timed(1.0)));
  auto catalog = MakeCatalogIdeaGenerator();
  IdeaRequest request;
  request.problem = &problem;
  request.parent = &history.entries[0];
  request.history = &history;
  request.count = 10;
  auto first = catalog->Propose(request);
  ASSERT_TRUE(first.ok());
  // From BLOCK=128, VEC=1: BLOCK 64 or 256, VEC 2; BLOCK has one category,
  // VEC one; the other template (none) adds nothing.
  std::set<std::string> tags;
  for (Idea idea : first->ideas) {
    tags.insert(idea.text.substr(idea.text.rfind('[')));
    idea.parent_id = "p";
    history.ideas.push_back(idea);
  }
  EXPECT_EQ(tags, (std::set<std::string>{"[move BLOCK=256]", "[move BLOCK=64]", "[move VEC=2]"}));
  auto second = catalog->Propose(request);
  ASSERT_TRUE(second.ok());
  EXPECT_TRUE(second->ideas.empty());
  EXPECT_NE(second->notes.find("untried"), std::string::npos) << second->notes;
}

TEST(ParameterMutationBrancher, AppliesTheMoveThenNeighboursWithinTheConstraints) {
  Problem problem = TemplatedRowSoftmax();
  SearchHistory history;
  Candidate start = problem.templates[0].kernel.ToCandidate("p", "template");
  start.plan.SetParam("BLOCK", 512);
  start.plan.SetParam("VEC", 2);
  history.entries.push_back(Judged(start, testing::Timed(1.0)));
  Idea idea;
  idea.id = "i";
  idea.category = IdeaCategory::kParallelism;
  idea.text = "Raise BLOCK from 512 to 1024. [move BLOCK=1024]";
  auto brancher = MakeParameterMutationBrancher();
  BranchRequest request;
  request.problem = &problem;
  request.parent = &history.entries[0];
  request.idea = &idea;
  request.history = &history;
  request.count = 6;
  request.seed = 3;
  auto result = brancher->Branch(request);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  // BLOCK=1024 with VEC=2 breaks BLOCK * VEC <= 1024: the exact move is
  // skipped, and so is every neighbour that breaks a constraint.
  for (const Candidate& c : result->candidates) {
    EXPECT_TRUE(SatisfiesConstraints(problem, c)) << c.plan.ToJson();
    EXPECT_NE(c.ContentHash(), start.ContentHash());
  }
  idea.text = "Lower VEC. [move VEC=1]";
  result = brancher->Branch(request);
  ASSERT_TRUE(result.ok());
  ASSERT_FALSE(result->candidates.empty());
  EXPECT_EQ(result->candidates[0].plan.Param("VEC", -1), 1);
  EXPECT_EQ(result->candidates[0].plan.Param("BLOCK", -1), 512);
  std::set<std::string> hashes;
  for (const Candidate& c : result->candidates) {
    EXPECT_TRUE(SatisfiesConstraints(problem, c)) << c.plan.ToJson();
    EXPECT_TRUE(hashes.insert(c.ContentHash()).second) << "duplicate branch " << c.plan.ToJson();
  }
  // A repair request gets nothing, with the reason.
  HistoryEntry failed =
      Judged(result->candidates[0], testing::Failed(EvalStatus::kCompileError, "x"));
  request.failed = &failed;
  result = brancher->Branch(request);
  ASSERT_TRUE(result.ok());
  EXPECT_TRUE(result->candidates.empty());
  EXPECT_FALSE(result->notes.empty());
}

TEST(PromptTemplates, BuiltinsAreValidAndFoldersOverrideFileByFile) {
  PromptTemplates builtin = PromptTemplates::Builtin();
  EXPECT_TRUE(builtin.Validate().ok()) << builtin.Validate().ToString();
  EXPECT_NE(builtin.ideas.find("{{history}}"), std::string::npos);
  EXPECT_NE(builtin.branch.find("{{idea}}"), std::string::npos);
  EXPECT_NE(builtin.repair.find("{{failure}}"), std::string::npos);

  testing::TempDir dir;
  dir.Write("ideas.md", "Ideas for {{parent_id}}, {{count}} of them: {{requested_categories}}\n");
  auto loaded = PromptTemplates::Load(dir.path());
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->ideas,
            "Ideas for {{parent_id}}, {{count}} of them: {{requested_categories}}\n");
  EXPECT_EQ(loaded->branch, builtin.branch);

  dir.Write("branch.md", "Implement {{idae}}\n");
  auto bad = PromptTemplates::Load(dir.path());
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("{{idae}}"), std::string::npos) << bad.status().message();
  EXPECT_EQ(PromptTemplates::Load(dir.path() + "/missing").status().code(), StatusCode::kNotFound);
}

// What a parent achieved, in the prompt: bandwidth and throughput against
// the measured peaks, and each launch's occupancy with the resource that
// limits it.
TEST(PromptRendering, ParentPerformanceShowsAchievedRatesAndOccupancy) {
  Problem problem = testing::RowSoftmaxProblem(64, 1024);  // 8 * 64 * 1024 bytes
  HistoryEntry entry = Judged(problem.start.ToCandidate("p", "start"), testing::Timed(0.001));
  DeviceInfo& device = entry.evaluation.device;
  device.name = "NVIDIA H200";
  device.cc_major = 9;
  device.multiprocessors = 132;
  device.peak_bandwidth_gbps = 4000;
  device.peak_gflops = 60000;
  device.peak_mma_gflops = {{"bf16_mma", 600000}};
  entry.evaluation.resources.push_back(KernelResources{"row_softmax", 64, 1024, 0, 0, 0, 0, 1024});
  std::string text = internal::RenderPerformance(entry, problem);
  // 524288 B in 1 µs: 524 GB/s, 13% of 4000; 327680 flops: 0.33 TFLOP/s.
  for (const char* piece : {"achieved: 524 GB/s of the op's minimum traffic (13% of the measured bandwidth)",
                            "achieved: 0.33 TFLOP/s (1% of the fp32 FMA peak, 0% of the bf16_mma peak)",
                            // 64 registers × 32 threads = 2048 per warp, 8 warps: 4 blocks of 65536.
                            "launch 0 (row_softmax): 64 blocks of 256 threads; at most 4 resident blocks "
                            "per SM (limited by registers): 50% theoretical occupancy; 0.12 waves over 132 SMs"}) {
    EXPECT_NE(text.find(piece), std::string::npos) << "missing '" << piece << "' in:\n" << text;
  }
  entry.evaluation.resources[0].registers = 30;  // 1024 per warp: 8 blocks, the thread limit
  text = internal::RenderPerformance(entry, problem);
  EXPECT_NE(text.find("at most 8 resident blocks per SM (limited by threads per SM): 100% theoretical"),
            std::string::npos)
      << text;
  entry.evaluation.resources[0].static_shared_bytes = 100 * 1024;  // + 1 KiB reserved: 2 of 228 KiB
  text = internal::RenderPerformance(entry, problem);
  EXPECT_NE(text.find("at most 2 resident blocks per SM (limited by shared memory): 25%"), std::string::npos)
      << text;
  // The device's tensor-core peak is in the device text.
  EXPECT_NE(internal::RenderDevice(device).find("measured bf16_mma tensor-core peak: 600 TFLOP/s"),
            std::string::npos);
  // Untimed, unknown device: nothing to say.
  HistoryEntry failed = Judged(problem.start.ToCandidate("f", "start"), Evaluation{});
  EXPECT_EQ(internal::RenderPerformance(failed, problem), "");
}

// A compile-only judge knows the arch, not the GPU: the occupancy line says
// nothing about waves over SMs it does not know.
TEST(PromptRendering, CompileOnlyOccupancyHasNoWaves) {
  Problem problem = testing::RowSoftmaxProblem(64, 1024);
  Evaluation compiled;
  compiled.status = EvalStatus::kCompiled;
  compiled.device.name = "sm_90 (compile-only)";
  compiled.device.cc_major = 9;
  compiled.resources.push_back(KernelResources{"row_softmax", 30, 1024, 0, 0, 0, 0, 1024});
  HistoryEntry entry = Judged(problem.start.ToCandidate("p", "start"), compiled);
  std::string text = internal::RenderPerformance(entry, problem);
  EXPECT_NE(text.find("launch 0 (row_softmax): 64 blocks of 256 threads"), std::string::npos) << text;
  EXPECT_NE(text.find("100% theoretical occupancy\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("waves"), std::string::npos) << text;
}

// The system prompt reads as sentences, with the GPU's facts under a heading
// of their own rather than spliced into a sentence.
TEST(PromptRendering, TheSystemPromptKeepsTheDeviceListOutOfItsSentences) {
  DeviceInfo device;
  device.name = "NVIDIA H200";
  device.cc_major = 9;
  device.multiprocessors = 132;
  const std::string rendered = internal::RenderTemplate(
      PromptTemplates::Builtin().system,
      {{"device", internal::RenderDevice(device)}, {"problem_name", "softmax"}});
  EXPECT_NE(rendered.find("for\nNVIDIA GPUs, and you reason about"), std::string::npos) << rendered;
  EXPECT_NE(rendered.find("## The GPU\nNVIDIA H200 (sm_90)\n- 132 SMs"), std::string::npos) << rendered;
  EXPECT_EQ(rendered.find("(NVIDIA H200"), std::string::npos) << rendered;
}

// A compile-only idea outcome counts compiled branches, never correct ones:
// nothing was run.
TEST(IdeaOutcome, CompileOnlyBranchesAreCompiledNotCorrect) {
  Problem problem = testing::RowSoftmaxProblem(64, 1024);
  Evaluation compiled;
  compiled.status = EvalStatus::kCompiled;
  compiled.resources.push_back(KernelResources{"row_softmax", 30, 1024, 0, 0, 0, 0, 1024});
  HistoryEntry parent = Judged(problem.start.ToCandidate("start", "start"), compiled);
  HistoryEntry a = Judged(problem.start.ToCandidate("r0.s0.i0.b0", "llm"), compiled);
  a.evaluation.resources[0].registers = 24;
  HistoryEntry b = Judged(problem.start.ToCandidate("r0.s0.i0.b1", "llm"),
                          testing::Failed(EvalStatus::kCompileError, "error: boom"));
  Idea idea;
  SearchRun::SetIdeaOutcome(&idea, &parent, {&a, &b}, 2, {});
  EXPECT_EQ(idea.outcome.find("correct"), std::string::npos) << idea.outcome;
  EXPECT_NE(idea.outcome.find("best r0.s0.i0.b0 uses 24 registers vs the parent's 30; 1 of 2 branches "
                              "compiled (compile-only: not run, not judged)"),
            std::string::npos)
      << idea.outcome;
  // None compiled.
  SearchRun::SetIdeaOutcome(&idea, &parent, {&b}, 1, {});
  EXPECT_TRUE(idea.outcome.starts_with("0 of 1 branches compiled")) << idea.outcome;
  // Run on a GPU, the same count is of correct branches.
  HistoryEntry timed_parent = Judged(problem.start.ToCandidate("start", "start"), testing::Timed(2.0));
  HistoryEntry timed = Judged(problem.start.ToCandidate("r0.s0.i0.b0", "llm"), testing::Timed(1.0));
  SearchRun::SetIdeaOutcome(&idea, &timed_parent, {&timed, &b}, 2, {});
  EXPECT_NE(idea.outcome.find("1 of 2 branches correct"), std::string::npos) << idea.outcome;
}

// The tensor list of the problem text says which tensor the kernel must
// overwrite in place.
TEST(PromptRendering, ProblemTextMarksInoutTensors) {
  Problem problem = testing::RowSoftmaxProblem(64, 1024);
  problem.tensors[1].role = TensorRole::kInout;
  std::string text = internal::RenderProblem(problem);
  EXPECT_NE(text.find("- x: input, f32, [rows, cols], contiguous row-major"), std::string::npos) << text;
  EXPECT_NE(text.find("- y: inout (holds the input; overwrite it in place with the result), f32, [rows, cols]"),
            std::string::npos)
      << text;
}

class LlmGeneratorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto mock = MockLlmServer::Start({});
    ASSERT_TRUE(mock.ok()) << mock.status().ToString();
    mock_ = std::move(*mock);
    client_ = testing::MockClient(mock_->openai_base_url());
    ASSERT_NE(client_, nullptr);
    problem_ = testing::RowSoftmaxProblem(64, 1024);
    parent_ = Judged(problem_.start.ToCandidate("start", "start"), testing::Timed(2.0));
    parent_.evaluation.resources.push_back(
        KernelResources{"row_softmax", 30, 1024, 0, 0, 0, 0, 1024});
  }

  std::unique_ptr<MockLlmServer> mock_;
  std::unique_ptr<HttpLlmClient> client_;
  Problem problem_;
  HistoryEntry parent_;
};

TEST_F(LlmGeneratorTest, IdeaPromptCarriesProblemParentHistoryAndCategories) {
  mock_->SetDefaultReply(MockReply{testing::IdeasReply(2)});
  LlmGeneratorOptions options;
  options.model = "mock";
  auto generator = MakeLlmIdeaGenerator(*client_, options);
  ASSERT_TRUE(generator.ok());
  SearchHistory history;
  Idea old;
  old.id = "r0.s0.i0";
  old.parent_id = "start";
  old.category = IdeaCategory::kAsynchrony;
  old.text = "Double-buffer the row loads.";
  old.outcome = "no correct branch; 0 of 2 branches correct; 2× compile_error (error: boom)";
  history.ideas.push_back(old);
  IdeaRequest request;
  request.problem = &problem_;
  request.parent = &parent_;
  request.history = &history;
  request.round = 1;
  request.count = 2;
  request.categories = {IdeaCategory::kCompute, IdeaCategory::kControlFlow};
  request.label = "r1.s0";
  auto result = (*generator)->Propose(request);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  ASSERT_EQ(result->ideas.size(), 2u);
  EXPECT_EQ(result->ideas[0].text, "Scripted idea 0.");
  EXPECT_EQ(result->ideas[0].category, IdeaCategory::kMemoryAccess);
  EXPECT_EQ(result->ideas[1].category, IdeaCategory::kAsynchrony);
  EXPECT_EQ(result->ideas[0].generator, "llm:mock");
  EXPECT_GT(result->output_tokens, 0);
  auto seen = mock_->requests();
  ASSERT_EQ(seen.size(), 1u);
  const std::string& prompt = seen[0].request.messages.at(0).content;
  for (const char* piece : {"softmax along dim 1", "rows = 64", "row_softmax", "2.0000 ms",
                            "30 registers", "Double-buffer the row loads.",
                            "compile_error (error: boom)", "compute, control_flow", "# Round 1",
                            "achieved: "}) {
    EXPECT_NE(prompt.find(piece), std::string::npos) << "missing '" << piece << "' in:\n" << prompt;
  }
  EXPECT_EQ(seen[0].request.model, "mock");
}

TEST_F(LlmGeneratorTest, MalformedIdeaRepliesBecomeNotesNotErrors) {
  auto generator = MakeLlmIdeaGenerator(*client_);
  ASSERT_TRUE(generator.ok());
  IdeaRequest request;
  request.problem = &problem_;
  request.parent = &parent_;
  request.count = 3;
  for (const char* reply :
       {"I would rather not.", "```json\n{\"ideas\": 3}\n```", "```json\n[1, 2\n```"}) {
    mock_->Enqueue(MockReply{reply});
    auto result = (*generator)->Propose(request);
    ASSERT_TRUE(result.ok()) << reply << ": " << result.status().ToString();
    EXPECT_TRUE(result->ideas.empty()) << reply;
    EXPECT_FALSE(result->notes.empty()) << reply;
  }
  // A list of strings is fine; the categories asked for are used.
  request.categories = {IdeaCategory::kDataTypes, IdeaCategory::kCompute, IdeaCategory::kCompute};
  mock_->Enqueue(MockReply{"```json\n[\"Use float4 loads.\", \"Fuse the passes.\"]\n```"});
  auto result = (*generator)->Propose(request);
  ASSERT_TRUE(result.ok());
  ASSERT_EQ(result->ideas.size(), 2u);
  EXPECT_EQ(result->ideas[0].category, IdeaCategory::kDataTypes);
  EXPECT_NE(result->notes.find("2 of 3"), std::string::npos) << result->notes;
}

TEST_F(LlmGeneratorTest, BrancherSendsRequestsConcurrentlyAndKeepsBranchPositions) {
  MockLlmServer::Options slow;
  // Each reply waits a second at the server: requests sent one after another
  // would never be in flight together.
  slow.latency_ms = 1000;
  auto mock = MockLlmServer::Start(slow);
  ASSERT_TRUE(mock.ok());
  HttpLlmClient::Options options;
  options.base_url = (*mock)->openai_base_url();
  options.default_model = "mock";
  options.retry.max_attempts = 1;
  auto client = HttpLlmClient::Create(options);
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE(
      (*mock)
          ->AddRule(MockRule{"", "implementation 1 of", MockReply{testing::KernelReply("one")}})
          .ok());
  ASSERT_TRUE(
      (*mock)->AddRule(MockRule{"", "implementation 2 of", MockReply{"no code today"}}).ok());
  MockReply cut;
  cut.fault = MockFault::kMalformedJson;
  ASSERT_TRUE((*mock)->AddRule(MockRule{"", "implementation 3 of", cut}).ok());
  (*mock)->SetDefaultReply(MockReply{testing::KernelReply("four")});
  auto brancher = MakeLlmBrancher(**client);
  ASSERT_TRUE(brancher.ok());
  Idea idea;
  idea.text = "Use warp shuffles for the reductions.";
  BranchRequest request;
  request.problem = &problem_;
  request.parent = &parent_;
  request.idea = &idea;
  request.count = 4;
  request.label = "r0.s0.i0";
  auto result = (*brancher)->Branch(request);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  ASSERT_EQ(result->candidates.size(), 4u);
  EXPECT_NE(result->candidates[0].source.find("// one"), std::string::npos);
  EXPECT_TRUE(result->candidates[1].source.empty());
  EXPECT_TRUE(result->candidates[2].source.empty());
  EXPECT_NE(result->candidates[3].source.find("// four"), std::string::npos);
  EXPECT_EQ(result->candidates[3].plan.launches.at(0).kernel, "row_softmax");
  EXPECT_NE(result->notes.find("branch 1: "), std::string::npos) << result->notes;
  EXPECT_NE(result->notes.find("```cuda"), std::string::npos) << result->notes;
  EXPECT_NE(result->notes.find("branch 2: request failed"), std::string::npos) << result->notes;
  EXPECT_EQ((*mock)->counters().max_concurrent_requests, 4) << "the four requests should overlap";
  // Each request names its branch, so the four are distinct requests (and
  // replay can tell them apart).
  std::set<std::string> prompts;
  for (const MockRequest& r : (*mock)->requests()) prompts.insert(r.request.messages.at(0).content);
  EXPECT_EQ(prompts.size(), 4u);
}

TEST_F(LlmGeneratorTest, RepairPromptShowsTheFailureAndAFatalErrorStopsTheGenerator) {
  auto brancher = MakeLlmBrancher(*client_);
  ASSERT_TRUE(brancher.ok());
  Idea idea;
  idea.text = "Vectorize.";
  Evaluation compile_error =
      testing::Failed(EvalStatus::kCompileError, "NVRTC rejected the source");
  compile_error.details = "r0.cu(3): error: identifier \"this_does_not_exist\" is undefined\n";
  HistoryEntry failed = Judged(problem_.start.ToCandidate("r0.s0.i0.b1", "llm"), compile_error);
  mock_->Enqueue(MockReply{testing::KernelReply("fixed")});
  BranchRequest request;
  request.problem = &problem_;
  request.parent = &parent_;
  request.idea = &idea;
  request.failed = &failed;
  request.count = 1;
  auto result = (*brancher)->Branch(request);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  ASSERT_EQ(result->candidates.size(), 1u);
  const std::string prompt = mock_->requests().back().request.messages.at(0).content;
  EXPECT_NE(prompt.find("this_does_not_exist"), std::string::npos) << prompt;
  EXPECT_NE(prompt.find("r0.s0.i0.b1"), std::string::npos);
  EXPECT_NE(prompt.find("# Fix a kernel"), std::string::npos);

  MockReply unauthorized;
  unauthorized.http_status = 401;
  unauthorized.fault = MockFault::kHttpError;
  mock_->Enqueue(unauthorized);
  result = (*brancher)->Branch(request);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kUnauthenticated);
}

}  // namespace
}  // namespace ksearch
