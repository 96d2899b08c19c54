// Progress output of `brigade train`: on a terminal, one bar redrawn in place
//   step  420/1500 [########............] loss 0.6213 | 52.1k tok/s | ETA 0:41
// and otherwise (a pipe, a log file, CI) plain lines, about twenty per run plus every evaluation:
//   step  420/1500  loss 0.6213  lr 2.71e-03  grad norm 0.412  52.1k tok/s  19.2 ms/step  ETA 0:41
// Messages and evaluations are printed on their own lines in both modes (the bar is cleared first).
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

#include "nn/trainer.h"

namespace brigade::apps {

class Progress {
 public:
  /// @param first_step steps already done (a resumed run), @param total the run's last step.
  /// @param terminal draw a bar (usually isatty(fileno(out))).
  Progress(std::FILE* out, bool terminal, int64_t first_step, int64_t total);

  void step(const nn::StepReport& report);
  void eval(const nn::EvalReport& report);
  void message(const std::string& text);
  /// Ends the bar's line (call once when the loop is over).
  void finish();

  /// "1:05", "12:03:09": a duration for humans.
  static std::string format_duration(double seconds);
  /// "812", "52.1k", "3.40M": a rate for humans.
  static std::string format_rate(double per_second);

 private:
  void clear_bar();

  std::FILE* out_;
  bool terminal_;
  int64_t first_step_, total_;
  int64_t log_every_;
  double ema_ms_ = 0.0;  // smoothed step time, for the rate and the ETA
  bool bar_drawn_ = false;
  std::chrono::steady_clock::time_point last_draw_{};
};

}  // namespace brigade::apps
