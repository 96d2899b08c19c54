// The link model (plan/link_model.h): parsing with units and errors, the message and ring all-reduce
// times by hand, the fit to ping-pong measurements, and the simulator's use of it: per message bytes, per
// stage pair.
#include "pipeline/plan/link_model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "pipeline/plan/simulator.h"
#include "pipeline/schedule/generators.h"
#include "tensor/error.h"
#include "test_support.h"

namespace brigade::pipeline {
namespace {

using ::testing::HasSubstr;

TEST(LinkModel, ParsesUnitsAndReadsBackWhatItPrints) {
  const LinkModel l = LinkModel::parse("latency=20us,bandwidth=10GB/s");
  EXPECT_DOUBLE_EQ(l.latency_ms, 0.02);
  EXPECT_DOUBLE_EQ(l.bytes_per_ms, 1e7);
  EXPECT_EQ(LinkModel::parse(l.str()), l);
  EXPECT_DOUBLE_EQ(LinkModel::parse("latency=1.5ms").latency_ms, 1.5);
  EXPECT_DOUBLE_EQ(LinkModel::parse("latency=500ns").latency_ms, 5e-4);
  EXPECT_DOUBLE_EQ(LinkModel::parse("bandwidth=2GiB/s").bytes_per_ms, 2.0 * 1073741824.0 / 1e3);
  EXPECT_DOUBLE_EQ(LinkModel::parse("bandwidth=inf").bytes_per_ms, 0.0);
  EXPECT_EQ(LinkModel::parse(""), LinkModel{});  // the same device: no time at all
}

TEST(LinkModel, RefusesNonsenseNamingTheItem) {
  for (const auto& [text, expected] : std::vector<std::pair<std::string, std::string>>{
           {"latency=20", "unknown latency unit ''"},
           {"latency=fast", "'latency=fast' has no non-negative number"},
           {"bandwidth=10Gb", "unknown bandwidth unit 'Gb'"},
           {"bandwidth=0GB/s", "bandwidth must be > 0"},
           {"speed=1GB/s", "unknown key 'speed'"},
           {"latency", "'latency' is not key=value"}}) {
    SCOPED_TRACE(text);
    EXPECT_THAT(testing::message_of<ValueError>([&] { LinkModel::parse(text); }), HasSubstr(expected));
  }
}

TEST(LinkModel, FitsLatencyAndBandwidthExactlyOnALine) {
  // 20 us + bytes / 2 GB/s.
  std::vector<LinkSample> samples;
  for (int64_t bytes : {8, 1024, 65536, 1 << 20, 16 << 20}) samples.push_back({bytes, 20e-6 + bytes / 2e9});
  const LinkModel m = fit_link_model(samples);
  EXPECT_NEAR(m.latency_ms, 20e-3, 1e-9);
  EXPECT_NEAR(m.bytes_per_ms, 2e6, 1e-6);
  EXPECT_NEAR(m.transfer_ms(1 << 20), 20e-3 + (1 << 20) / 2e6, 1e-9);
  EXPECT_EQ(m.describe(), "latency 20.0 us, bandwidth 2.00 GB/s");
}

TEST(LinkModel, OneSizeGivesLatencyOnlyAndNoSamplesIsRefused) {
  const LinkModel m = fit_link_model({{64, 5e-6}, {64, 7e-6}});
  EXPECT_NEAR(m.latency_ms, 6e-3, 1e-12);
  EXPECT_EQ(m.bytes_per_ms, 0.0);
  EXPECT_EQ(m.transfer_ms(1 << 30), m.latency_ms);
  EXPECT_EQ(m.describe(), "latency 6.0 us, bandwidth unknown");
  EXPECT_THAT(testing::message_of<ValueError>([] { fit_link_model({}); }), HasSubstr("no samples"));
}

TEST(LinkModel, MessageAndRingAllReduceTimesByHand) {
  const LinkModel l = LinkModel::parse("latency=10us,bandwidth=1GB/s");  // 1e6 bytes per ms
  EXPECT_DOUBLE_EQ(l.transfer_ms(0), 0.01);
  EXPECT_DOUBLE_EQ(l.transfer_ms(2'000'000), 2.01);
  EXPECT_DOUBLE_EQ(l.allreduce_ms(8'000'000, 1), 0.0);
  // D = 4: 6 steps of 2 MB each: 6 (0.01 + 2) ms.
  EXPECT_DOUBLE_EQ(l.allreduce_ms(8'000'000, 4), 6 * 2.01);
  EXPECT_EQ(LinkModel::allreduce_bytes_sent(8'000'000, 4), 12'000'000);
}

// 1F1B on 2 stages, 1 microbatch: F0 on stage 0, its activation crosses, F0 B0 on stage 1, the gradient
// crosses back, B0 on stage 0. With a link the two crossings take latency + bytes / bandwidth each, the
// activation's bytes from chunk 0's output, the gradient's from chunk 1's input.
TEST(LinkModel, TheSimulatorTimesEachMessageByItsBytes) {
  const Schedule s = make_schedule("1f1b", 2, 1);
  Costs c;
  c.per_chunk = {ChunkCosts{1.0, 2.0, 1.0, 1.0, 3000, 0}, ChunkCosts{1.0, 2.0, 1.0, 1.0, 0, 5000}};
  EXPECT_DOUBLE_EQ(simulate(s, c).step_time, 6.0);             // no transfer time
  c.link = LinkModel::parse("latency=100us,bandwidth=1MB/s");  // 1000 bytes per ms
  // 1 (F) + 0.1 + 3 (activation) + 1 + 2 (stage 1) + 0.1 + 5 (gradient) + 2 (B on stage 0)
  EXPECT_DOUBLE_EQ(simulate(s, c).step_time, 14.2);
  // A faster link between the two stages overrides the default one for their messages only.
  c.stage_links[{1, 0}] = LinkModel::parse("bandwidth=inf");
  EXPECT_DOUBLE_EQ(simulate(s, c).step_time, 9.1);
}

}  // namespace
}  // namespace brigade::pipeline
