// picoll_torch: a c10d::Backend on picoll's MPI calls (docs/torch.md).
//
// CPU tensors: the MPI collectives, which picoll runs on its own host algorithms where they win.
// A call with async_op=False runs in the caller's thread; one with async_op=True goes to the
// process group's worker thread, and every later call of the group waits for those before it
// (the order of calls is the same on every rank).
// CUDA tensors: picoll's stream-ordered calls (MPIX_*_enqueue) on a stream of the group, ordered
// after the caller's current stream by an event, and the caller's stream ordered after them by
// another (Work.wait() makes the current stream wait, not the host). The calls picoll has no
// enqueued form for wait for the current stream on the host and run the blocking call.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <mpi.h>
#include <picoll.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace picoll_torch {

// A completed or pending operation. finish() is the base's; a CUDA operation also carries the
// event after its last enqueued call, which wait() makes the current stream wait for.
class PicollWork : public c10d::Work {
 public:
  PicollWork(int rank, c10d::OpType type, const char *name, std::vector<at::Tensor> outputs);
  ~PicollWork() override;
  bool isCompleted() override;
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  void synchronize() override;
  int sourceRank() const override;
  std::vector<at::Tensor> result() override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

  void done(std::exception_ptr error = nullptr);
  // a point-to-point request: completed by MPI_Test/MPI_Wait
  MPI_Request request = MPI_REQUEST_NULL;
  std::optional<c10::Event> event; // CUDA: recorded after the operation on the group's stream
  std::vector<at::Tensor> keep;    // inputs kept alive until the operation is done
  int source = -1;
  const char *name;

 private:
  void finish_request(bool block);
  void complete_future();
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  bool done_ = false; // done() was called (under mutex_): it completes future_ if it saw one
  std::exception_ptr error_;
};

class ProcessGroupPicoll : public c10d::Backend {
 public:
  // ranks: the group's ranks in MPI_COMM_WORLD, empty for all of them
  ProcessGroupPicoll(int rank, int size, const std::vector<int64_t> &ranks,
                     const std::string &group_id, double timeout_s, bool on_caller_stream);
  ~ProcessGroupPicoll() override;

  const std::string getBackendName() const override { return "picoll"; }
  void shutdown() override;

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor> &tensors,
                                           const c10d::BroadcastOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor> &tensors,
                                           const c10d::AllreduceOptions &opts) override;
  c10::intrusive_ptr<c10d::Work>
  allreduce_coalesced(std::vector<at::Tensor> &tensors,
                      const c10d::AllreduceCoalescedOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor> &tensors,
                                        const c10d::ReduceOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>> &outputs,
                                           std::vector<at::Tensor> &inputs,
                                           const c10d::AllgatherOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor &output, at::Tensor &input,
                                                 const c10d::AllgatherOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>> &outputs,
                                                     std::vector<at::Tensor> &inputs,
                                                     const c10d::AllgatherOptions &opts) override;
  c10::intrusive_ptr<c10d::Work>
  allgather_into_tensor_coalesced(std::vector<at::Tensor> &outputs, std::vector<at::Tensor> &inputs,
                                  const c10d::AllgatherOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>> &outputs,
                                        std::vector<at::Tensor> &inputs,
                                        const c10d::GatherOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor> &outputs,
                                         std::vector<std::vector<at::Tensor>> &inputs,
                                         const c10d::ScatterOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor> &outputs,
                                                std::vector<std::vector<at::Tensor>> &inputs,
                                                const c10d::ReduceScatterOptions &opts) override;
  c10::intrusive_ptr<c10d::Work>
  _reduce_scatter_base(at::Tensor &output, at::Tensor &input,
                       const c10d::ReduceScatterOptions &opts) override;
  c10::intrusive_ptr<c10d::Work>
  reduce_scatter_tensor_coalesced(std::vector<at::Tensor> &outputs, std::vector<at::Tensor> &inputs,
                                  const c10d::ReduceScatterOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor &output, at::Tensor &input,
                                               std::vector<int64_t> &output_splits,
                                               std::vector<int64_t> &input_splits,
                                               const c10d::AllToAllOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor> &outputs,
                                          std::vector<at::Tensor> &inputs,
                                          const c10d::AllToAllOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor> &tensors, int dst, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor> &tensors, int src, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor> &tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions &opts) override;

  // picoll_stream_query of the group's stream (all zero before the first CUDA call)
  std::vector<int64_t> stream_stats();
  // the operations this group handed to MPI or picoll so far, one MPI or MPIX call each (the
  // coalesced forms pack their tensors into one: tests count them)
  int64_t calls() const { return calls_.load(std::memory_order_relaxed); }
  MPI_Comm comm() const { return comm_; }
  // waits for the async calls queued before on the worker thread (every call does first)
  void drain();

 private:
  using Job = std::function<void()>;
  // runs job now (async_op=False) or on the worker thread (async_op=True), and returns its Work
  c10::intrusive_ptr<c10d::Work> run(bool async, c10d::OpType type, const char *name,
                                     std::vector<at::Tensor> outputs,
                                     std::vector<at::Tensor> inputs, Job job);
  // what an operation has for CUDA tensors: picoll's enqueued call, or the blocking one only
  enum class CudaForm { enqueued, blocking };
  // the one place an operation goes to its CPU or CUDA form, t's (ops.cpp): body(Form) makes
  // the operation's MPI call on the communicator and in the form it is given
  template <typename Body>
  c10::intrusive_ptr<c10d::Work>
  launch(CudaForm cuda, const at::Tensor &t, bool async, c10d::OpType type, const char *name,
         std::vector<at::Tensor> outputs, std::vector<at::Tensor> inputs, Body body);
  void worker_loop();
  void stop_worker();
  c10::intrusive_ptr<c10d::Work> p2p(at::Tensor &t, int peer, int tag, bool is_send,
                                     c10d::OpType type);

  // CUDA tensors
  bool cuda_begin(const at::Tensor &t, std::initializer_list<const std::vector<at::Tensor> *> used);
  c10::intrusive_ptr<c10d::Work> cuda_end(bool async, c10d::OpType type, const char *name,
                                          std::vector<at::Tensor> outputs);

  MPI_Comm comm_ = MPI_COMM_NULL;
  // A picoll stream and stream communicator per CUDA stream the calls run on: the group's own
  // stream (one, made at the first CUDA call), or with on_caller_stream each caller's stream
  // (made at the first call on it)
  struct StreamComm {
    c10::Stream stream;
    MPIX_Stream mpix;
    MPI_Comm comm;
  };
  std::vector<StreamComm> streams_;
  bool on_caller_stream_ = false;
  MPI_Comm stream_comm_ = MPI_COMM_NULL; // of the call in progress, on cuda_stream_
  std::optional<c10::Stream> cuda_stream_;
  std::optional<c10::Stream> caller_stream_;
  // "group": the events of a blocking call, recorded again at every call (an event's wait is
  // queued when it is asked for, so one event serves every call; made at the first)
  std::optional<c10::Event> before_, after_;
  std::atomic<int64_t> calls_{0};

  std::mutex mutex_;
  std::condition_variable cv_, idle_cv_;
  std::deque<Job> jobs_;
  bool busy_ = false, stopping_ = false;
  std::atomic<int> pending_{0};
  std::thread worker_;
};

// dtype and operation checks, shared by the calls (ops.cpp)
MPI_Datatype mpi_type(const at::Tensor &t, const char *op);
// the dtype as Python names it ("torch.float32")
std::string dtype_name(const at::Tensor &t);
void check_tensor(const at::Tensor &t, const char *op);
int mpi_count(int64_t n, const char *op);

// MPI was initialised and is not finalised: MPI calls may be made
bool mpi_usable();
// completes the dropped point-to-point requests that are done (all of them with wait_all)
void reap_orphans(bool wait_all);
void throw_mpi(int rc, const char *op);
inline void mpi_ok(int rc, const char *op) {
  if (rc != MPI_SUCCESS) throw_mpi(rc, op);
}

// the benchmark's loops (bench.cpp), methods of ProcessGroupPicoll in Python: every rank of the
// group calls them. time_c_allreduce: seconds per call of a C loop of MPI_Allreduce(SUM) on t, on
// the group's communicator. time_staged_allreduce: what an MPI that is not CUDA-aware makes the
// application do, the user's MPI alone (picoll bypassed): per call a blocking copy of t to host
// memory, MPI_Allreduce(SUM) in place there, a blocking copy back (CPU tensors: the MPI call
// only); seconds per call.
double time_c_allreduce(ProcessGroupPicoll &pg, at::Tensor &t, int64_t iters);
double time_staged_allreduce(ProcessGroupPicoll &pg, at::Tensor &t, int64_t iters);

} // namespace picoll_torch
