// NcclTransport (pipeline/dist/nccl/nccl_transport.h) between two processes on two GPUs: tests/CMakeLists.txt
// launches this binary under mpirun -np 2 where NCCL is built. Run any other way (ctest's plain discovery,
// one process, fewer than two GPUs, a build without NCCL) it skips, saying why.
#include <gtest/gtest.h>

#include "pipeline/dist/mpi_world.h"
#include "pipeline/run/transport.h"
#include "tensor/device.h"
#include "tensor/tensor.h"

namespace brigade::pipeline::dist {
namespace {

TEST(NcclTransport, SendsADeviceTensorToTheOtherProcess) {
  if (!launched_by_mpi() || launcher_world_size() != 2)
    GTEST_SKIP() << "needs mpirun -np 2 (ctest's dist.nccl_transport launches it so)";
  if (cuda_device_count() < 2) GTEST_SKIP() << "needs two GPUs, found " << cuda_device_count();
  MpiWorld& mpi = MpiWorld::get();
  std::unique_ptr<ProcessGroup> world = mpi.world_group(60.0);
  if (!world->nccl_built()) GTEST_SKIP() << "this build has no NCCL";
  const int rank = world->rank();
  const Device device = Device::cuda(rank);
  std::unique_ptr<Transport> transport = world->make_nccl_transport({0, 1}, 30.0, device);
  EXPECT_EQ(transport->model(), TransferModel::Rendezvous);
  const TransferTag tag{false, 3, 0, 0, 1, 0};  // activation of microbatch 3, stage 0 -> stage 1
  const Tensor expected = arange(0, 15).to(kFloat32).view({3, 5});
  if (rank == 0) {
    const Tensor on_device = expected.to(device);
    Event ready;
    ready.record(device);
    transport->send(tag, on_device, ready);
  } else {
    Message message = transport->recv(tag);
    message.ready.synchronize();
    ASSERT_EQ(message.tensor.device(), device);
    EXPECT_EQ(message.tensor.shape(), (Shape{3, 5}));
    EXPECT_EQ(message.tensor.to(Device::cpu()).to_vector<float>(), expected.to_vector<float>());
    EXPECT_EQ(transport->traffic().activation_messages, 0);  // counted by the sender
  }
  transport.reset();
  world.reset();
}

}  // namespace
}  // namespace brigade::pipeline::dist
