// The benchmark's timing loops (osu-bench/torch_bench.py, through picoll_torch.time_c_allreduce
// and time_staged_allreduce): C++ loops of MPI calls on a process group's communicator, beside the
// backend, not in it (picoll_torch.cpp binds them as methods of ProcessGroupPicoll).
#include "picoll_torch.hpp"

#include <ATen/ATen.h>

namespace picoll_torch {

namespace {
// picoll bypassed (picoll_set_bypass) while it lives, on every rank of the group between the
// same two calls; restored on the way out, an exception included
struct Bypass {
  Bypass() { picoll_set_bypass(1); }
  ~Bypass() { picoll_set_bypass(0); }
};
} // namespace

double time_c_allreduce(ProcessGroupPicoll &pg, at::Tensor &t, int64_t iters) {
  const char *call = "time_c_allreduce";
  check_tensor(t, call);
  TORCH_CHECK(!t.is_cuda(), "picoll: time_c_allreduce takes CPU tensors");
  MPI_Datatype type = mpi_type(t, call);
  int n = mpi_count(t.numel(), call);
  MPI_Comm comm = pg.comm();
  pg.drain();
  mpi_ok(MPI_Barrier(comm), call);
  double t0 = MPI_Wtime();
  for (int64_t i = 0; i < iters; i++)
    mpi_ok(MPI_Allreduce(MPI_IN_PLACE, t.data_ptr(), n, type, MPI_SUM, comm), call);
  return (MPI_Wtime() - t0) / (double)(iters > 0 ? iters : 1);
}

double time_staged_allreduce(ProcessGroupPicoll &pg, at::Tensor &t, int64_t iters) {
  const char *call = "time_staged_allreduce";
  check_tensor(t, call);
  MPI_Datatype type = mpi_type(t, call);
  int n = mpi_count(t.numel(), call);
  MPI_Comm comm = pg.comm();
  pg.drain();
  // pageable host memory, as t.cpu() gives: each copy waits for the stream (a blocking copy_)
  at::Tensor host = t.is_cuda() ? at::empty_like(t, t.options().device(at::kCPU)) : t;
  mpi_ok(MPI_Barrier(comm), call);
  Bypass bypass;
  double t0 = MPI_Wtime();
  for (int64_t i = 0; i < iters; i++) {
    if (t.is_cuda()) host.copy_(t);
    mpi_ok(MPI_Allreduce(MPI_IN_PLACE, host.data_ptr(), n, type, MPI_SUM, comm), call);
    if (t.is_cuda()) t.copy_(host);
  }
  return (MPI_Wtime() - t0) / (double)(iters > 0 ? iters : 1);
}

} // namespace picoll_torch
