#include "core/thread_pool.h"

#include <algorithm>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <thread>

namespace ksearch::internal {

struct ThreadPool::Impl {
  explicit Impl(int threads) : pool(static_cast<size_t>(threads)) {}
  boost::asio::thread_pool pool;
};

ThreadPool::ThreadPool(int threads)
    : impl_(std::make_unique<Impl>(std::max(1, threads))), threads_(std::max(1, threads)) {}

// join() without stop() waits until no work is outstanding; asio's own
// destructor would stop first and drop what is still queued.
ThreadPool::~ThreadPool() { impl_->pool.join(); }

void ThreadPool::Post(std::function<void()> task) {
  boost::asio::post(impl_->pool, std::move(task));
}

int DefaultThreads(int configured) {
  if (configured > 0) return configured;
  return std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 1, 32);
}

void TaskGroup::Post(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++pending_;
  }
  pool_.Post([this, task = std::move(task)] {
    task();
    // Notified under the lock: once the waiter sees zero it may destroy the
    // group, so nothing of it may be touched after the unlock.
    std::lock_guard<std::mutex> lock(mutex_);
    if (--pending_ == 0) idle_.notify_all();
  });
}

void TaskGroup::Wait() {
  std::unique_lock<std::mutex> lock(mutex_);
  idle_.wait(lock, [this] { return pending_ == 0; });
}

}  // namespace ksearch::internal
