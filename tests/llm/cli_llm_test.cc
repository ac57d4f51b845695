// `ksearch run` against providers that fail as real ones do, as a user runs
// it: a dead server (connection refused) and a hung one (accepts, never
// answers) end the search `failed` with exit 4 and the reason, within the
// --llm-timeout / --llm-attempts given; a money budget without a price for
// the model is refused at start. No GPU (--compile-only).
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>

namespace ksearch {
namespace {

const std::string kCli = KSEARCH_CLI_PATH;

int Shell(const std::string& command, std::string* output) {
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return -1;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) output->append(buffer, n);
  int status = ::pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// A loopback socket bound to an ephemeral port; listening when `listen` (the
// kernel then completes connections that nobody ever reads: a hung server),
// else closed at once (connection refused: a dead one).
class Port {
 public:
  explicit Port(bool listen) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    if (fd_ >= 0 && ::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
      port_ = ntohs(address.sin_port);
    }
    if (listen && fd_ >= 0) {
      ::listen(fd_, 64);
    } else if (fd_ >= 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~Port() {
    if (fd_ >= 0) ::close(fd_);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/v1"; }
  uint16_t port() const { return port_; }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
};

std::string RunCommand(const std::string& base_url, const std::string& extra) {
  return "OPENAI_API_KEY=sk-test " + kCli +
         " run softmax --dims rows=64,cols=1024 --strategy branch --llm openai:gpt-4o"
         " --base-url " + base_url + " --compile-only --arch sm_90 --cache-dir off --no-db"
         " --rounds 2 --seeds 1 --ideas 2 --branches 2 " + extra;
}

TEST(CliLlm, ADeadServerEndsTheRunFailedWithTheReason) {
  Port dead(/*listen=*/false);
  ASSERT_NE(dead.port(), 0);
  std::string out;
  int code = Shell(RunCommand(dead.url(), "--llm-attempts 2"), &out);
  EXPECT_EQ(code, 4) << out;
  EXPECT_NE(out.find("branch: failed"), std::string::npos) << out;
  EXPECT_NE(out.find("error: UNAVAILABLE"), std::string::npos) << out;
  EXPECT_NE(out.find("ideas r0.s0"), std::string::npos) << out;
  EXPECT_EQ(out.find("sk-test"), std::string::npos) << out;
}

TEST(CliLlm, AHungServerEndsTheRunFailedAfterTwoTimeouts) {
  Port hung(/*listen=*/true);
  ASSERT_NE(hung.port(), 0);
  std::string out;
  int code = Shell(RunCommand(hung.url(), "--llm-timeout 0.3 --llm-attempts 5"), &out);
  EXPECT_EQ(code, 4) << out;
  EXPECT_NE(out.find("error: DEADLINE_EXCEEDED"), std::string::npos) << out;
  EXPECT_NE(out.find("no reply within 0.3 s"), std::string::npos) << out;
  // Two time-outs at most, not five: the attempts are counted in the line.
  EXPECT_NE(out.find("after 2 attempts"), std::string::npos) << out;
}

TEST(CliLlm, AMoneyBudgetNeedsAPriceForTheModel) {
  Port dead(/*listen=*/false);
  std::string out;
  EXPECT_EQ(Shell(RunCommand(dead.url(), "--budget-usd 3"), &out), 2) << out;
  EXPECT_NE(out.find("--budget-usd: no --prices table given for model gpt-4o"),
            std::string::npos)
      << out;
  out.clear();
  EXPECT_EQ(Shell(RunCommand(dead.url(), "--thinking-budget 20000"), &out), 2) << out;
  EXPECT_NE(out.find("must be below --max-output-tokens"), std::string::npos) << out;
}

}  // namespace
}  // namespace ksearch
