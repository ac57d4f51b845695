// The one bounded thread pool of the library: a fixed number of threads
// (boost::asio::thread_pool underneath) running posted closures, and task
// groups to wait for the closures of one batch. Every evaluator compiles on
// one of these; the branch search runs its model calls on another.
//
// Thread safety: Post and the TaskGroup calls may be made from any thread,
// including from a closure running on the pool.
#ifndef KSEARCH_CORE_THREAD_POOL_H_
#define KSEARCH_CORE_THREAD_POOL_H_

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>

namespace ksearch::internal {

class ThreadPool {
 public:
  // At least one thread.
  explicit ThreadPool(int threads);
  // Runs everything posted (also what the closures post), then joins.
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Queues `task`; it runs on one of the pool's threads, never inline.
  void Post(std::function<void()> task);
  int threads() const { return threads_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int threads_;
};

// The threads for CPU work such as NVRTC compiles: `configured` when > 0,
// else one per hardware thread, at most 32.
int DefaultThreads(int configured);

// Closures posted to a pool and waited for together. Wait() (and the
// destructor) return once every closure posted through the group has
// finished, so that what they borrow may go away afterwards.
class TaskGroup {
 public:
  explicit TaskGroup(ThreadPool& pool) : pool_(pool) {}
  ~TaskGroup() { Wait(); }
  TaskGroup(const TaskGroup&) = delete;
  TaskGroup& operator=(const TaskGroup&) = delete;

  void Post(std::function<void()> task);
  void Wait();

 private:
  ThreadPool& pool_;
  std::mutex mutex_;
  std::condition_variable idle_;
  size_t pending_ = 0;
};

}  // namespace ksearch::internal

#endif  // KSEARCH_CORE_THREAD_POOL_H_
