// `brigade kernel`: the kernel lab (apps/kernel_lab.h) — one version of one kernel on a chosen shape, checked
// against the CPU reference, timed, with its napkin math.
#include <memory>

#include "apps/commands.h"
#include "apps/kernel_lab.h"
#include "tensor/error.h"

namespace brigade::apps {

Command add_kernel_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "kernel", "Run one version of one kernel on a shape: check it against the CPU reference and time it");
  auto o = std::make_shared<KernelLabOptions>();
  add_kernel_lab_flags(*cmd, *o);
  return {cmd, [cmd, o] {
            try {
              return run_kernel_lab(*o, LabRun::Native);
            } catch (const ValueError& e) {  // an unknown op, version, shape or dtype
              return usage_error(*cmd, e.what());
            } catch (const DeviceError& e) {  // a CUDA version without a GPU
              return usage_error(*cmd, e.what());
            }
          }};
}

}  // namespace brigade::apps
