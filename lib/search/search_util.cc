#include "search/search_util.h"

#include <algorithm>
#include <cctype>
#include <limits>

namespace ksearch::internal {

double MedianMs(const Evaluation& evaluation) {
  return evaluation.timing ? evaluation.timing->median_ms : 0.0;
}

int64_t TotalRegisters(const Evaluation& evaluation) {
  if (evaluation.resources.empty()) return std::numeric_limits<int64_t>::max();
  int64_t total = 0;
  for (const KernelResources& r : evaluation.resources) {
    if (r.registers < 0) return std::numeric_limits<int64_t>::max();
    total += r.registers;
  }
  return total;
}

int64_t TotalLocalBytes(const Evaluation& evaluation) {
  if (evaluation.resources.empty()) return std::numeric_limits<int64_t>::max();
  int64_t total = 0;
  for (const KernelResources& r : evaluation.resources) {
    if (r.local_bytes < 0) return std::numeric_limits<int64_t>::max();
    total += r.local_bytes;
  }
  return total;
}

std::string FirstErrorLine(std::string_view text, size_t max_bytes) {
  std::string_view first;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.front())))
      line.remove_prefix(1);
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back())))
      line.remove_suffix(1);
    if (!line.empty()) {
      if (first.empty()) first = line;
      if (line.find("error") != std::string_view::npos) {
        first = line;
        break;
      }
    }
    pos = end + 1;
  }
  std::string out(first.substr(0, max_bytes));
  if (first.size() > max_bytes) out += "…";
  return out;
}

void Mailbox::Post(std::function<void()> closure) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(closure));
  }
  wake_.notify_one();
}

int Mailbox::RunFor(std::chrono::milliseconds timeout) {
  std::deque<std::function<void()>> batch;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    wake_.wait_for(lock, timeout, [this] { return !queue_.empty(); });
    batch.swap(queue_);
  }
  for (auto& closure : batch) closure();
  return static_cast<int>(batch.size());
}

}  // namespace ksearch::internal
