// `ksearch run --queue` with `ksearch worker --fake` processes: a search whose
// orchestrator has no GPU, recorded in the store with the queue run id it
// chose, so that `ksearch resume` collects from the same run in Redis.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <string>

#include "queue_test_util.h"
#include "store/cli_test_util.h"
#include "test_util.h"

namespace ksearch {
namespace {

using testing::FakeWorker;
using testing::RedisServer;
using testing::Shell;
using testing::TempDir;

const std::string kCli = KSEARCH_CLI_PATH;

TEST(CliQueue, RunThroughAFakeFleetRecordsItsQueueRunForResume) {
  RedisServer redis;
  std::string why = redis.Start();
  if (!why.empty()) GTEST_SKIP() << why;
  TempDir dir;
  FakeWorker worker(kCli, {"worker", "--queue", redis.url(), "--arch", "sm_90", "--fake",
                           "--gpus", "0", "--name", "cli-test", "--cache-dir", "off"});
  ASSERT_TRUE(worker.Start());
  const std::string db = dir.path() + "/k.db";
  std::string out;
  ASSERT_EQ(Shell(kCli + " run softmax --dims rows=64,cols=1024 --queue " + redis.url() +
                      " --arch sm_90 --rounds 2 --batch 3 --cache-dir off --db " + db,
                  &out),
            0)
      << out;
  EXPECT_NE(out.find("judging through " + redis.url() + " (queue run ks-"), std::string::npos)
      << out;
  // The run's recorded flags name the queue run, so a resume finds the
  // results that workers stored in Redis while the orchestrator was down.
  out.clear();
  ASSERT_EQ(Shell(kCli + " show 1 --json --db " + db, &out), 0) << out;
  EXPECT_NE(out.find("--queue-run"), std::string::npos) << out;
  EXPECT_NE(out.find("ks-"), std::string::npos) << out;
  EXPECT_EQ(out.find("\"--queue\","), std::string::npos) << "the URL is chosen again at resume";
  out.clear();
  ASSERT_EQ(Shell(kCli + " resume 1 --reopen --queue " + redis.url() + " --db " + db, &out), 0)
      << out;
  EXPECT_NE(out.find("resuming run 1"), std::string::npos) << out;
  // The same Redis by another spelling of its URL: the workers, not the URL,
  // are what the run was measured on.
  std::string localhost = redis.url();
  localhost.replace(localhost.find("127.0.0.1"), 9, "localhost");
  out.clear();
  EXPECT_EQ(Shell(kCli + " resume 1 --reopen --queue " + localhost + " --db " + db, &out), 0)
      << out;
  // Without --queue, the resume says what it needs.
  out.clear();
  EXPECT_EQ(Shell(kCli + " resume 1 --reopen --db " + db, &out), 2) << out;
  EXPECT_NE(out.find("resume it with --queue URL"), std::string::npos) << out;
}

}  // namespace
}  // namespace ksearch
