// picoll_torch: the process group's set-up, its Work, its worker thread, the CUDA stream it
// orders its calls on, and the Python module (docs/torch.md).
#include "picoll_torch.hpp"

#include <ATen/ATen.h>
#include <c10/core/Event.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/python.h>

#include <climits>
#include <dlfcn.h>
#include <set>

namespace picoll_torch {

namespace {
std::mutex registry_mutex;
std::set<ProcessGroupPicoll *> live_groups; // to stop their threads before MPI_Finalize
bool finalized_by_us = false;
} // namespace

bool mpi_usable() {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  return init && !fin;
}

void throw_mpi(int rc, const char *op) {
  char msg[MPI_MAX_ERROR_STRING] = "";
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  TORCH_CHECK(false, "picoll: ", op, " failed in MPI: ", msg, " (error ", rc, ")");
}

std::string dtype_name(const at::Tensor &t) {
  switch (t.scalar_type()) {
  case at::kFloat: return "torch.float32";
  case at::kDouble: return "torch.float64";
  case at::kHalf: return "torch.float16";
  case at::kBFloat16: return "torch.bfloat16";
  case at::kChar: return "torch.int8";
  case at::kShort: return "torch.int16";
  case at::kInt: return "torch.int32";
  case at::kLong: return "torch.int64";
  case at::kByte: return "torch.uint8";
  case at::kBool: return "torch.bool";
  case at::kComplexFloat: return "torch.complex64";
  case at::kComplexDouble: return "torch.complex128";
  default: return std::string("torch.") + c10::toString(t.scalar_type());
  }
}

MPI_Datatype mpi_type(const at::Tensor &t, const char *op) {
  switch (t.scalar_type()) {
  case at::kFloat: return MPI_FLOAT;
  case at::kDouble: return MPI_DOUBLE;
  case at::kHalf:
  case at::kBFloat16: return MPI_UINT16_T; // moved as bits; reduced in float32 (ops.cpp)
  case at::kChar: return MPI_INT8_T;
  case at::kShort: return MPI_INT16_T;
  case at::kInt: return MPI_INT32_T;
  case at::kLong: return MPI_INT64_T;
  case at::kByte: return MPI_UINT8_T;
  case at::kBool: return MPI_C_BOOL;
  case at::kComplexFloat: return MPI_C_FLOAT_COMPLEX;
  case at::kComplexDouble: return MPI_C_DOUBLE_COMPLEX;
  default: TORCH_CHECK(false, "picoll: ", op, " does not support dtype ", dtype_name(t));
  }
}

void check_tensor(const at::Tensor &t, const char *op) {
  TORCH_CHECK(t.layout() == at::kStrided, "picoll: ", op, " takes dense tensors, not ", t.layout());
  TORCH_CHECK(t.device().is_cpu() || t.device().is_cuda(), "picoll: ", op,
              " takes CPU and CUDA tensors, not ", t.device());
  TORCH_CHECK(t.is_contiguous(), "picoll: ", op, " takes contiguous tensors");
  (void)mpi_type(t, op);
}

int mpi_count(int64_t n, const char *op) {
  TORCH_CHECK(n <= INT_MAX, "picoll: ", op, " takes at most INT_MAX (", INT_MAX,
              ") elements a tensor, got ", n);
  return (int)n;
}

// ---- Work ----

PicollWork::PicollWork(int rank, c10d::OpType type, const char *name_,
                       std::vector<at::Tensor> outputs)
    : c10d::Work(rank, type), name(name_), outputs_(std::move(outputs)) {}

namespace {
// Point-to-point requests whose Work was dropped before they completed (gloo and NCCL let a
// program drop an isend's Work): kept with their tensors, so that their buffers live on, and
// completed later (reap_orphans), not waited for in the destructor, where two ranks dropping
// their sends to each other would wait for receives never posted.
struct Orphan {
  MPI_Request request;
  std::vector<at::Tensor> keep;
};
std::mutex orphan_mutex;
std::vector<Orphan> orphans;
} // namespace

void reap_orphans(bool wait_all) {
  std::lock_guard<std::mutex> lock(orphan_mutex);
  if (orphans.empty() || !mpi_usable()) return;
  size_t kept = 0;
  for (size_t i = 0; i < orphans.size(); i++) {
    Orphan &o = orphans[i];
    int flag = 0;
    if (wait_all)
      MPI_Wait(&o.request, MPI_STATUS_IGNORE);
    else
      MPI_Test(&o.request, &flag, MPI_STATUS_IGNORE);
    if (o.request == MPI_REQUEST_NULL) continue; // done: its tensors may go
    if (kept != i) orphans[kept] = std::move(o); // (never onto itself: that would empty it)
    kept++;
  }
  orphans.resize(kept);
}

PicollWork::~PicollWork() {
  if (request == MPI_REQUEST_NULL || !mpi_usable()) return;
  std::lock_guard<std::mutex> lock(orphan_mutex);
  orphans.push_back(Orphan{request, std::move(keep)});
}

void PicollWork::done(std::exception_ptr error) {
  keep.clear();
  c10::intrusive_ptr<c10::ivalue::Future> fut;
  {
    // a future made before this point is completed here, one made after by getFuture()
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = true;
    error_ = error;
    fut = future_;
  }
  finish(error);
  if (fut) complete_future();
}

void PicollWork::complete_future() {
  if (error_)
    future_->setError(error_);
  else
    future_->markCompleted(c10::IValue(outputs_));
}

void PicollWork::finish_request(bool block) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (request == MPI_REQUEST_NULL || completed_) return;
  MPI_Status st;
  int flag = 0, rc;
  if (block) {
    rc = MPI_Wait(&request, &st);
    flag = 1;
  } else {
    rc = MPI_Test(&request, &flag, &st);
  }
  if (rc != MPI_SUCCESS) {
    request = MPI_REQUEST_NULL;
    try {
      throw_mpi(rc, name);
    } catch (...) {
      exception_ = std::current_exception();
    }
    completed_ = true;
    cv_.notify_all();
    return;
  }
  if (!flag) return;
  request = MPI_REQUEST_NULL;
  source = st.MPI_SOURCE;
  completed_ = true;
  keep.clear();
  cv_.notify_all();
}

bool PicollWork::isCompleted() {
  finish_request(false);
  return c10d::Work::isCompleted();
}

void PicollWork::synchronize() {
  if (event) {
    // the caller's current stream waits for the operation, the host does not
    auto impl = c10::impl::VirtualGuardImpl(c10::DeviceType::CUDA);
    event->block(impl.getStream(event->device()));
  }
}

bool PicollWork::wait(std::chrono::milliseconds timeout) {
  if (request != MPI_REQUEST_NULL) {
    if (timeout == kNoTimeout) {
      finish_request(true);
    } else {
      auto end = std::chrono::steady_clock::now() + timeout;
      while (!isCompleted()) {
        TORCH_CHECK(std::chrono::steady_clock::now() < end, "picoll: ", name, " timed out after ",
                    timeout.count(), " ms (the operation is still pending)");
        std::this_thread::yield();
      }
    }
  } else {
    std::unique_lock<std::mutex> lock(mutex_);
    if (timeout == kNoTimeout) {
      cv_.wait(lock, [&] { return completed_; });
    } else if (!cv_.wait_for(lock, timeout, [&] { return completed_; })) {
      TORCH_CHECK(false, "picoll: ", name, " timed out after ", timeout.count(),
                  " ms (the operation is still running; its peers may be late: picoll names "
                  "them after PICOLL_TIMEOUT seconds)");
    }
  }
  if (exception_) std::rethrow_exception(exception_);
  synchronize();
  return true;
}

int PicollWork::sourceRank() const {
  return source;
}

std::vector<at::Tensor> PicollWork::result() {
  return outputs_;
}

c10::intrusive_ptr<c10::ivalue::Future> PicollWork::getFuture() {
  bool cuda = !outputs_.empty() && outputs_[0].is_cuda();
  std::vector<c10::Device> devs;
  if (cuda) devs.push_back(outputs_[0].device());
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (future_) return future_;
    future_ = c10::make_intrusive<c10::ivalue::Future>(
        c10::ListType::create(c10::TensorType::get()), devs);
    if (!done_ && request == MPI_REQUEST_NULL) return future_; // done() completes it
  }
  if (request != MPI_REQUEST_NULL) {
    // a point-to-point request: completed here, by its wait
    finish_request(true);
    if (exception_)
      future_->setError(exception_);
    else
      future_->markCompleted(c10::IValue(outputs_));
    return future_;
  }
  // done already: a CUDA operation orders the current stream after itself first
  synchronize();
  complete_future();
  return future_;
}

// ---- the process group ----

ProcessGroupPicoll::ProcessGroupPicoll(int rank, int size, const std::vector<int64_t> &ranks,
                                       const std::string &group_id, double timeout_s,
                                       bool on_caller_stream)
    : c10d::Backend(rank, size), on_caller_stream_(on_caller_stream) {
  (void)timeout_s;
  TORCH_CHECK(mpi_usable(), "picoll: MPI is not initialised (import picoll_torch first)");
  int wrank = 0, wsize = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
  MPI_Comm_size(MPI_COMM_WORLD, &wsize);
  int rc;
  if (ranks.empty()) {
    TORCH_CHECK(size == wsize && rank == wrank, "picoll: the process group has rank ", rank, " of ",
                size, " but MPI says rank ", wrank, " of ", wsize,
                ": run under mpirun with as many processes as world_size, ranks as MPI's");
    rc = MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
  } else {
    std::vector<int> r(ranks.begin(), ranks.end());
    TORCH_CHECK((int)r.size() == size && rank >= 0 && rank < size && r[rank] == wrank,
                "picoll: group ", group_id, " gives this process rank ", rank,
                " but MPI_COMM_WORLD rank ", wrank, " is not that member");
    MPI_Group world, grp;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Group_incl(world, (int)r.size(), r.data(), &grp);
    // the tag only keeps apart creations that overlap; every member uses the same one
    int tag = (int)(std::hash<std::string>{}(group_id)&0x7fff);
    rc = MPI_Comm_create_group(MPI_COMM_WORLD, grp, tag, &comm_);
    MPI_Group_free(&grp);
    MPI_Group_free(&world);
  }
  if (rc != MPI_SUCCESS) throw_mpi(rc, "process group creation");
  std::lock_guard<std::mutex> lock(registry_mutex);
  live_groups.insert(this);
}

ProcessGroupPicoll::~ProcessGroupPicoll() {
  shutdown();
  std::lock_guard<std::mutex> lock(registry_mutex);
  live_groups.erase(this);
}

void ProcessGroupPicoll::shutdown() {
  stop_worker();
  if (!mpi_usable()) return;
  for (auto &sc : streams_) {
    MPI_Comm_free(&sc.comm);
    MPIX_Stream_free(&sc.mpix);
  }
  streams_.clear();
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

void ProcessGroupPicoll::stop_worker() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!worker_.joinable()) return;
    stopping_ = true;
  }
  cv_.notify_all();
  worker_.join();
}

void ProcessGroupPicoll::worker_loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    cv_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
    if (jobs_.empty()) return; // stopping, and nothing left
    Job job = std::move(jobs_.front());
    jobs_.pop_front();
    busy_ = true;
    lock.unlock();
    job();
    lock.lock();
    busy_ = false;
    pending_.fetch_sub(1, std::memory_order_release);
    if (jobs_.empty()) idle_cv_.notify_all();
  }
}

void ProcessGroupPicoll::drain() {
  if (pending_.load(std::memory_order_acquire) == 0) return;
  std::unique_lock<std::mutex> lock(mutex_);
  idle_cv_.wait(lock, [&] { return jobs_.empty() && !busy_; });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPicoll::run(bool async, c10d::OpType type,
                                                       const char *name,
                                                       std::vector<at::Tensor> outputs,
                                                       std::vector<at::Tensor> inputs, Job job) {
  auto w = c10::make_intrusive<PicollWork>(getRank(), type, name, std::move(outputs));
  calls_.fetch_add(1, std::memory_order_relaxed);
  if (!async) {
    drain(); // the asynchronous calls before this one first, as on every rank
    job();   // errors reach the caller as they are
    w->done();
    return w;
  }
  w->keep = std::move(inputs);
  std::lock_guard<std::mutex> lock(mutex_);
  TORCH_CHECK(!stopping_, "picoll: ", name, " on a process group that was shut down");
  if (!worker_.joinable()) worker_ = std::thread([this] { worker_loop(); });
  pending_.fetch_add(1, std::memory_order_relaxed);
  jobs_.push_back([w, job]() mutable {
    try {
      job();
      w->done();
    } catch (...) {
      w->done(std::current_exception());
    }
  });
  cv_.notify_one();
  return w;
}

// ---- CUDA tensors ----

// The stream a CUDA call runs on (the group's, or the caller's with on_caller_stream), with its
// picoll stream communicator, made at the first call on it (collective: every rank makes that
// call at the same point); on the group's stream, ordered after the caller's current stream.
// used: the lists of tensors the call reads or writes (on the group's stream: marked in use
// there; on the caller's, nothing to mark, and no list is copied)
bool ProcessGroupPicoll::cuda_begin(const at::Tensor &t,
                                    std::initializer_list<const std::vector<at::Tensor> *> used) {
  c10::impl::VirtualGuardImpl impl(c10::DeviceType::CUDA);
  drain();
  TORCH_CHECK(streams_.empty() || t.device() == streams_[0].stream.device(),
              "picoll: this process group runs on ", streams_[0].stream.device(), "; a tensor on ",
              t.device(), " needs another group");
  c10::Stream caller = impl.getStream(t.device());
  const StreamComm *sc = nullptr;
  for (auto &x : streams_)
    if (on_caller_stream_ ? x.stream == caller : true) sc = &x;
  if (sc == nullptr) {
    c10::Device prev = impl.exchangeDevice(t.device());
    c10::Stream s = on_caller_stream_ ? caller : impl.getStreamFromGlobalPool(t.device(), false);
    void *handle = s.native_handle();
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "type", "cudaStream_t");
    MPIX_Info_set_hex(info, "value", &handle, sizeof handle);
    StreamComm made{s, MPIX_STREAM_NULL, MPI_COMM_NULL};
    int rc = MPIX_Stream_create(info, &made.mpix);
    MPI_Info_free(&info);
    if (rc == MPI_SUCCESS) rc = MPIX_Stream_comm_create(comm_, made.mpix, &made.comm);
    impl.exchangeDevice(prev);
    if (rc != MPI_SUCCESS) throw_mpi(rc, "the stream communicator's creation");
    streams_.push_back(made);
    sc = &streams_.back();
  }
  stream_comm_ = sc->comm;
  cuda_stream_ = sc->stream;
  caller_stream_ = caller;
  if (on_caller_stream_) return true;
  if (!before_) before_.emplace(c10::DeviceType::CUDA);
  before_->record(*caller_stream_);
  before_->block(*cuda_stream_);
  // the caching allocator must not hand these tensors' memory out again before the group's
  // stream is done with it
  for (auto *list : used)
    for (auto &u : *list)
      if (u.defined() && u.is_cuda())
        impl.recordDataPtrOnStream(u.storage().data_ptr(), *cuda_stream_);
  return true;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPicoll::cuda_end(bool async, c10d::OpType type,
                                                            const char *name,
                                                            std::vector<at::Tensor> outputs) {
  auto w = c10::make_intrusive<PicollWork>(getRank(), type, name, std::move(outputs));
  calls_.fetch_add(1, std::memory_order_relaxed);
  if (async) {
    // Work.wait() makes the stream current then wait for this event
    w->event.emplace(c10::DeviceType::CUDA);
    w->event->record(*cuda_stream_);
  } else if (!on_caller_stream_) {
    // the caller's stream goes on after the call (on the caller's stream: it is in order already)
    if (!after_) after_.emplace(c10::DeviceType::CUDA);
    after_->record(*cuda_stream_);
    after_->block(*caller_stream_);
  }
  // the tensors need no keeping here: cuda_begin told the caching allocator about their use
  w->done();
  return w;
}

std::vector<int64_t> ProcessGroupPicoll::stream_stats() {
  std::vector<int64_t> sum(6, 0);
  for (auto &sc : streams_) {
    long v[6] = {0, 0, 0, 0, 0, 0};
    if (picoll_stream_query(sc.mpix, &v[0], &v[1], &v[2], &v[3], &v[4], &v[5]) != MPI_SUCCESS)
      TORCH_CHECK(false, "picoll: picoll_stream_query refused the group's stream");
    for (int i = 0; i < 6; i++) sum[i] += v[i];
  }
  return sum;
}

// ---- the module ----

namespace {

int bootstrap() {
  int init = 0, provided = 0;
  MPI_Initialized(&init);
  if (!init) {
    int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
    if (rc != MPI_SUCCESS) throw_mpi(rc, "MPI_Init_thread");
    finalized_by_us = true;
  } else {
    MPI_Query_thread(&provided);
  }
  return provided;
}

void finalize() {
  {
    std::lock_guard<std::mutex> lock(registry_mutex);
    for (auto *g : live_groups) g->shutdown();
  }
  reap_orphans(true);
  if (finalized_by_us && mpi_usable()) MPI_Finalize();
}

pybind11::tuple world() {
  bootstrap();
  int r = 0, s = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return pybind11::make_tuple(r, s);
}

std::string bcast_str(const std::string &s) {
  bootstrap();
  int n = (int)s.size();
  MPI_Bcast(&n, 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::string out = s;
  out.resize(n);
  MPI_Bcast(&out[0], n, MPI_CHAR, 0, MPI_COMM_WORLD);
  return out;
}

// the library MPI_Allreduce resolves to in this process: picoll's, unless another MPI binding
// (mpi4py, say) loaded the MPI first without it
std::string mpi_allreduce_from() {
  Dl_info info;
  void *sym = reinterpret_cast<void *>(&MPI_Allreduce);
  if (dladdr(sym, &info) == 0 || info.dli_fname == nullptr) return "";
  return info.dli_fname;
}

} // namespace

} // namespace picoll_torch

PYBIND11_MODULE(_C, m) {
  using namespace picoll_torch;
  namespace py = pybind11;
  m.doc() = "picoll's PyTorch process group (backend 'picoll')";
  py::class_<ProcessGroupPicoll, c10d::Backend, c10::intrusive_ptr<ProcessGroupPicoll>>(
      m, "ProcessGroupPicoll")
      .def(py::init<int, int, const std::vector<int64_t> &, const std::string &, double, bool>(),
           py::arg("rank"), py::arg("size"), py::arg("ranks"), py::arg("group_id"),
           py::arg("timeout"), py::arg("on_caller_stream") = false,
           py::call_guard<py::gil_scoped_release>())
      .def("time_c_allreduce", &time_c_allreduce, py::call_guard<py::gil_scoped_release>())
      .def("time_staged_allreduce", &time_staged_allreduce,
           py::call_guard<py::gil_scoped_release>())
      .def("stream_stats", &ProcessGroupPicoll::stream_stats)
      .def("calls", &ProcessGroupPicoll::calls);
  m.def("bootstrap", &bootstrap, "initialise MPI (MPI_THREAD_MULTIPLE); the level provided");
  m.def("finalize", &finalize, py::call_guard<py::gil_scoped_release>());
  m.def("world", &world, "(rank, size) in MPI_COMM_WORLD");
  m.def("bcast_str", &bcast_str, "rank 0's string, on every rank");
  m.def("active", &picoll_active);
  m.def("version", &picoll_version);
  m.def("last_algorithm", []() -> py::object {
    const char *a = picoll_last_algorithm();
    if (a == nullptr) return py::none();
    return py::str(a);
  });
  m.def("mpi_allreduce_from", &mpi_allreduce_from);
}
