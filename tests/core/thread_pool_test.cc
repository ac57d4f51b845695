#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace ksearch::internal {
namespace {

TEST(ThreadPool, RunsEveryPostedClosureBeforeTheDestructorReturns) {
  std::atomic<int> ran{0};
  {
    ThreadPool pool(3);
    for (int i = 0; i < 200; ++i) pool.Post([&] { ++ran; });
  }
  EXPECT_EQ(ran.load(), 200);
}

TEST(ThreadPool, RunsWhatAClosurePostsBeforeTheDestructorReturns) {
  std::atomic<int> ran{0};
  {
    ThreadPool pool(2);
    pool.Post([&] {
      ++ran;
      pool.Post([&] { ++ran; });
    });
  }
  EXPECT_EQ(ran.load(), 2);
}

TEST(ThreadPool, NeverRunsMoreClosuresAtOnceThanItHasThreads) {
  std::mutex mutex;
  std::condition_variable changed;
  int running = 0, most = 0, finished = 0;
  {
    ThreadPool pool(2);
    TaskGroup group(pool);
    for (int i = 0; i < 6; ++i) {
      group.Post([&] {
        std::unique_lock<std::mutex> lock(mutex);
        most = std::max(most, ++running);
        changed.notify_all();
        // Held until a second closure runs beside it (or none is left to), so
        // that two threads are seen together whatever the scheduler does.
        changed.wait(lock, [&] { return running == 2 || finished >= 5; });
        --running;
        ++finished;
        changed.notify_all();
      });
    }
    group.Wait();
  }
  EXPECT_EQ(most, 2);
  EXPECT_EQ(finished, 6);
}

TEST(ThreadPool, HasAtLeastOneThread) {
  ThreadPool pool(0);
  EXPECT_EQ(pool.threads(), 1);
  TaskGroup group(pool);
  std::atomic<bool> ran{false};
  group.Post([&] { ran = true; });
  group.Wait();
  EXPECT_TRUE(ran.load());
}

TEST(ThreadPool, DefaultThreadsHonoursAConfiguredCountAndBoundsTheDefault) {
  EXPECT_EQ(DefaultThreads(5), 5);
  EXPECT_GE(DefaultThreads(0), 1);
  EXPECT_LE(DefaultThreads(0), 32);
}

TEST(TaskGroup, WaitReturnsOnlyAfterItsOwnClosuresFinished) {
  ThreadPool pool(4);
  std::vector<int> done(50, 0);
  std::set<std::thread::id> threads;
  std::mutex mutex;
  {
    TaskGroup group(pool);
    for (size_t i = 0; i < done.size(); ++i) {
      group.Post([&, i] {
        done[i] = 1;
        std::lock_guard<std::mutex> lock(mutex);
        threads.insert(std::this_thread::get_id());
      });
    }
    group.Wait();
    for (int d : done) EXPECT_EQ(d, 1);
  }
  EXPECT_EQ(threads.count(std::this_thread::get_id()), 0u) << "a closure ran inline";
}

TEST(TaskGroup, TwoGroupsOnOnePoolWaitIndependently) {
  ThreadPool pool(2);
  std::mutex mutex;
  std::condition_variable released;
  bool release = false;
  TaskGroup held(pool);
  held.Post([&] {
    std::unique_lock<std::mutex> lock(mutex);
    released.wait(lock, [&] { return release; });
  });
  {
    TaskGroup quick(pool);
    std::atomic<int> ran{0};
    for (int i = 0; i < 10; ++i) quick.Post([&] { ++ran; });
    quick.Wait();
    EXPECT_EQ(ran.load(), 10);
  }
  {
    std::lock_guard<std::mutex> lock(mutex);
    release = true;
  }
  released.notify_all();
  held.Wait();
}

}  // namespace
}  // namespace ksearch::internal
