// The link model's fit (pipeline/run/link_model.h).
#include "pipeline/run/link_model.h"

#include <gtest/gtest.h>

#include "test_support.h"

namespace brigade::pipeline {
namespace {

TEST(LinkModel, FitsLatencyAndBandwidthExactlyOnALine) {
  // 20 us + bytes / 2 GB/s.
  std::vector<LinkSample> samples;
  for (int64_t bytes : {8, 1024, 65536, 1 << 20, 16 << 20}) samples.push_back({bytes, 20e-6 + bytes / 2e9});
  const LinkModel m = fit_link_model(samples);
  EXPECT_NEAR(m.latency_seconds, 20e-6, 1e-12);
  EXPECT_NEAR(m.bytes_per_second, 2e9, 1e-3);
  EXPECT_NEAR(m.seconds(1 << 20), 20e-6 + (1 << 20) / 2e9, 1e-12);
  EXPECT_EQ(m.describe(), "latency 20.0 us, bandwidth 2.00 GB/s");
}

TEST(LinkModel, OneSizeGivesLatencyOnlyAndNoSamplesIsRefused) {
  const LinkModel m = fit_link_model({{64, 5e-6}, {64, 7e-6}});
  EXPECT_NEAR(m.latency_seconds, 6e-6, 1e-15);
  EXPECT_EQ(m.bytes_per_second, 0.0);
  EXPECT_EQ(m.seconds(1 << 30), m.latency_seconds);
  EXPECT_NE(testing::message_of<ValueError>([] { fit_link_model({}); }).find("no samples"),
            std::string::npos);
}

}  // namespace
}  // namespace brigade::pipeline
