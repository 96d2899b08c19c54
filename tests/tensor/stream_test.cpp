// Streams and events on the CPU backend, including the block-until-recorded rule.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "tensor/stream.h"

using namespace brigade;
using namespace std::chrono_literals;

TEST(Stream, CurrentStreamFollowsGuardPerThread) {
  const Device cpu = Device::cpu();
  Stream s1 = Stream::create(cpu);
  Stream s2 = Stream::create(cpu);
  EXPECT_NE(s1, s2);
  EXPECT_EQ(Stream::current(cpu), Stream(cpu));
  {
    StreamGuard g1(s1);
    EXPECT_EQ(Stream::current(cpu), s1);
    {
      StreamGuard g2(s2);
      EXPECT_EQ(Stream::current(cpu), s2);
      std::thread([&] { EXPECT_EQ(Stream::current(cpu), Stream(cpu)); }).join();
    }
    EXPECT_EQ(Stream::current(cpu), s1);
  }
  EXPECT_EQ(Stream::current(cpu), Stream(cpu));
  EXPECT_GT(s2.id(), s1.id());
}

TEST(Event, WaitingOnAnUnrecordedEventBlocksUntilAnotherThreadRecordsIt) {
  Event event;
  Stream consumer = Stream::create(Device::cpu());
  EXPECT_FALSE(event.is_recorded());
  EXPECT_FALSE(event.query());
  std::atomic<bool> recorded{false};
  std::atomic<bool> wait_returned{false};
  std::thread waiter([&] {
    consumer.wait(event);  // must block: nobody has recorded the event yet
    wait_returned = true;
    EXPECT_TRUE(recorded.load()) << "wait returned before the event was recorded";
  });
  std::this_thread::sleep_for(100ms);
  EXPECT_FALSE(wait_returned.load()) << "waiting on an unrecorded event returned at once";
  recorded = true;
  event.record(Stream(Device::cpu()));
  waiter.join();
  EXPECT_TRUE(wait_returned.load());
  EXPECT_TRUE(event.is_recorded());
  EXPECT_TRUE(event.query());
}

TEST(Event, SynchronizeAlsoBlocksAndCopiesShareState) {
  Event event;
  Event copy = event;
  std::atomic<bool> done{false};
  std::thread waiter([&] {
    copy.synchronize();
    done = true;
  });
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(done.load());
  event.record(Device::cpu());
  waiter.join();
  EXPECT_TRUE(done.load());
  EXPECT_TRUE(copy.is_recorded());
}

TEST(Event, CpuElapsedTimeMeasuresTheSteadyClock) {
  Event start(true), end(true);
  start.record(Device::cpu());
  std::this_thread::sleep_for(30ms);
  end.record(Device::cpu());
  double ms = start.elapsed_ms(end);
  EXPECT_GE(ms, 29.0);
  EXPECT_LT(ms, 5000.0);
}
