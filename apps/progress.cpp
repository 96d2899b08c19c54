#include "apps/progress.h"

#include <algorithm>
#include <cmath>

namespace brigade::apps {

namespace {
constexpr int kBarWidth = 24;
// Redraw the bar at most this often: a terminal that scrolls thousands of updates a second slows the run.
constexpr auto kRedrawInterval = std::chrono::milliseconds(100);
}  // namespace

Progress::Progress(std::FILE* out, bool terminal, int64_t first_step, int64_t total)
    : out_(out),
      terminal_(terminal),
      first_step_(first_step),
      total_(total),
      log_every_(std::max<int64_t>(1, (total - first_step) / 20)) {}

std::string Progress::format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto s = static_cast<long long>(std::llround(seconds));
  char text[32];
  if (s >= 3600) {
    std::snprintf(text, sizeof text, "%lld:%02lld:%02lld", s / 3600, (s / 60) % 60, s % 60);
  } else {
    std::snprintf(text, sizeof text, "%lld:%02lld", s / 60, s % 60);
  }
  return text;
}

std::string Progress::format_rate(double per_second) {
  char text[32];
  if (per_second >= 1e6) {
    std::snprintf(text, sizeof text, "%.2fM", per_second / 1e6);
  } else if (per_second >= 1e3) {
    std::snprintf(text, sizeof text, "%.1fk", per_second / 1e3);
  } else {
    std::snprintf(text, sizeof text, "%.0f", per_second);
  }
  return text;
}

void Progress::clear_bar() {
  if (bar_drawn_) {
    std::fputs("\r\033[K", out_);  // carriage return, erase to the end of the line
    bar_drawn_ = false;
  }
}

void Progress::step(const nn::StepReport& r) {
  ema_ms_ = ema_ms_ == 0.0 ? r.step_ms : 0.9 * ema_ms_ + 0.1 * r.step_ms;
  const double tokens_per_s = ema_ms_ > 0 ? 1e3 * static_cast<double>(r.tokens) / ema_ms_ : 0.0;
  const double eta = 1e-3 * ema_ms_ * static_cast<double>(r.steps - r.step);
  const int width = static_cast<int>(std::to_string(r.steps).size());
  if (terminal_) {
    const auto now = std::chrono::steady_clock::now();
    if (r.step != r.steps && now - last_draw_ < kRedrawInterval) return;
    last_draw_ = now;
    const double done = r.steps > 0 ? static_cast<double>(r.step) / static_cast<double>(r.steps) : 1.0;
    const int filled = static_cast<int>(done * kBarWidth);
    std::string bar(static_cast<size_t>(filled), '#');
    bar.append(static_cast<size_t>(kBarWidth - filled), '.');
    std::fprintf(out_, "\r\033[Kstep %*lld/%lld [%s] loss %.4f | %s tok/s | ETA %s", width,
                 static_cast<long long>(r.step), static_cast<long long>(r.steps), bar.c_str(), r.loss,
                 format_rate(tokens_per_s).c_str(), format_duration(eta).c_str());
    bar_drawn_ = true;
  } else {
    const int64_t done_here = r.step - first_step_;
    if (done_here != 1 && done_here % log_every_ != 0 && r.step != r.steps) return;
    std::fprintf(out_,
                 "step %*lld/%lld  loss %.4f  lr %.2e  grad norm %.3f  %s tok/s  %.1f ms/step  ETA %s\n",
                 width, static_cast<long long>(r.step), static_cast<long long>(r.steps), r.loss, r.lr,
                 r.grad_norm, format_rate(tokens_per_s).c_str(), ema_ms_, format_duration(eta).c_str());
  }
  std::fflush(out_);
}

void Progress::eval(const nn::EvalReport& r) {
  clear_bar();
  std::fprintf(out_, "eval @ step %lld: ", static_cast<long long>(r.step));
  if (std::isfinite(r.train_loss)) std::fprintf(out_, "train loss %.4f, ", r.train_loss);
  std::fprintf(out_, "val loss %.4f", r.val_loss);
  if (r.accuracy) {
    std::fprintf(out_, ", held-out accuracy %.1f%% (%lld problems)", 100.0 * *r.accuracy,
                 static_cast<long long>(r.problems));
  }
  std::fputc('\n', out_);
  std::fflush(out_);
}

void Progress::message(const std::string& text) {
  clear_bar();
  std::fprintf(out_, "%s\n", text.c_str());
  std::fflush(out_);
}

void Progress::finish() {
  if (bar_drawn_) {
    std::fputc('\n', out_);
    bar_drawn_ = false;
  }
  std::fflush(out_);
}

}  // namespace brigade::apps
