// The process group's operations: each maps the tensors onto one MPI call (or a picoll enqueued
// call for CUDA tensors), checks dtype and operation first, and raises an error naming both when
// it cannot do them. launch sends each to its CPU or CUDA form.
#include "picoll_torch.hpp"

#include <ATen/ATen.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <algorithm>
#include <climits>

namespace picoll_torch {

namespace {

const char *op_name(c10d::ReduceOp::RedOpType op) {
  switch (op) {
  case c10d::ReduceOp::SUM: return "SUM";
  case c10d::ReduceOp::AVG: return "AVG";
  case c10d::ReduceOp::PRODUCT: return "PRODUCT";
  case c10d::ReduceOp::MIN: return "MIN";
  case c10d::ReduceOp::MAX: return "MAX";
  case c10d::ReduceOp::BAND: return "BAND";
  case c10d::ReduceOp::BOR: return "BOR";
  case c10d::ReduceOp::BXOR: return "BXOR";
  case c10d::ReduceOp::PREMUL_SUM: return "PREMUL_SUM";
  default: return "UNUSED";
  }
}

// How a reduction of one dtype runs: float16 and bfloat16 in float32 (rounded once, the same on
// every rank), uint8's MIN and MAX in int16 (MPICH 4.0.2 orders unsigned types as signed), bool
// with the logical operations, AVG as a sum divided by the group's size, PREMUL_SUM as a product
// by its factor before the sum.
struct Plan {
  MPI_Datatype type;
  MPI_Op op;
  bool upcast = false; // reduced in another dtype (work), converted before and after
  at::ScalarType work = at::kFloat;
  bool average = false;
  std::optional<double> premul;
};

[[noreturn]] void unsupported(const char *call, const c10d::ReduceOp &op, const at::Tensor &t,
                              const char *why) {
  TORCH_CHECK(false, "picoll: ", call, " does not support ReduceOp.", op_name(op.op_), " on ",
              dtype_name(t), ": ", why);
}

Plan plan_for(const at::Tensor &t, const c10d::ReduceOp &rop, const char *call) {
  Plan p;
  auto s = t.scalar_type();
  auto op = rop.op_;
  bool floating = at::isFloatingType(s), complex = at::isComplexType(s);
  bool boolean = s == at::kBool, integer = at::isIntegralType(s, false);
  p.upcast = s == at::kHalf || s == at::kBFloat16 ||
             (s == at::kByte && (op == c10d::ReduceOp::MIN || op == c10d::ReduceOp::MAX));
  if (s == at::kByte) p.work = at::kShort;
  p.type = !p.upcast ? mpi_type(t, call) : p.work == at::kShort ? MPI_INT16_T : MPI_FLOAT;
  switch (op) {
  case c10d::ReduceOp::SUM: p.op = boolean ? MPI_LOR : MPI_SUM; break;
  case c10d::ReduceOp::PRODUCT: p.op = boolean ? MPI_LAND : MPI_PROD; break;
  case c10d::ReduceOp::AVG:
    if (!floating && !complex)
      unsupported(call, rop, t, "the average of integers or booleans is not one of them");
    p.op = MPI_SUM;
    p.average = true;
    break;
  case c10d::ReduceOp::MIN:
  case c10d::ReduceOp::MAX:
    if (complex) unsupported(call, rop, t, "complex numbers have no order");
    p.op = boolean ? (op == c10d::ReduceOp::MIN ? MPI_LAND : MPI_LOR)
                   : (op == c10d::ReduceOp::MIN ? MPI_MIN : MPI_MAX);
    break;
  case c10d::ReduceOp::BAND:
  case c10d::ReduceOp::BOR:
  case c10d::ReduceOp::BXOR:
    if (!integer && !boolean) unsupported(call, rop, t, "bitwise operations need integers");
    if (boolean)
      p.op = op == c10d::ReduceOp::BAND ? MPI_LAND : op == c10d::ReduceOp::BOR ? MPI_LOR : MPI_LXOR;
    else
      p.op = op == c10d::ReduceOp::BAND ? MPI_BAND : op == c10d::ReduceOp::BOR ? MPI_BOR : MPI_BXOR;
    break;
  case c10d::ReduceOp::PREMUL_SUM: {
    if (!floating && !complex) unsupported(call, rop, t, "the factor needs floating point");
    auto *sup = dynamic_cast<c10d::NCCLPreMulSumSupplement *>(rop.supplement_.get());
    if (sup == nullptr || sup->tensor_factor.defined())
      unsupported(call, rop, t, "only a scalar factor is supported");
    p.premul = sup->double_factor;
    p.op = MPI_SUM;
    break;
  }
  default: unsupported(call, rop, t, "unknown operation");
  }
  return p;
}

// the buffer a reduction runs on: t itself, or a float32 (or premultiplied) copy of it
at::Tensor reduce_input(const at::Tensor &t, const Plan &p, bool copy) {
  at::Tensor r = p.upcast ? t.to(p.work) : (copy || p.premul ? t.clone() : t);
  if (p.premul) r.mul_(*p.premul);
  return r;
}

// the result back into out: divided for AVG, rounded back for float16/bfloat16
void reduce_output(at::Tensor &out, const at::Tensor &r, const Plan &p, int size) {
  if (p.average) {
    if (p.upcast || r.data_ptr() != out.data_ptr()) {
      out.copy_(r.div(size));
      return;
    }
    out.div_(size);
    return;
  }
  if (r.data_ptr() != out.data_ptr()) out.copy_(r);
}

void check_one(const std::vector<at::Tensor> &v, const char *call) {
  TORCH_CHECK(v.size() == 1, "picoll: ", call, " takes one tensor per process (got ", v.size(),
              ")");
  check_tensor(v[0], call);
}

void check_list(const std::vector<at::Tensor> &v, int size, const at::Tensor &like,
                const char *call) {
  TORCH_CHECK((int)v.size() == size, "picoll: ", call, " needs a list of ", size,
              " tensors (the group's size), got ", v.size());
  for (auto &t : v) {
    check_tensor(t, call);
    TORCH_CHECK(t.scalar_type() == like.scalar_type(), "picoll: ", call,
                " needs tensors of one dtype: ", dtype_name(like), " and ", dtype_name(t));
    TORCH_CHECK(t.device() == like.device(), "picoll: ", call, " needs tensors on one device");
  }
}

void check_same_dtype(const at::Tensor &in, const at::Tensor &out, const char *call) {
  TORCH_CHECK(in.scalar_type() == out.scalar_type(), "picoll: ", call,
              ": input and output dtypes differ (", dtype_name(in), ", ", dtype_name(out), ")");
}

bool overlap(const at::Tensor &a, const at::Tensor &b) {
  auto *a0 = static_cast<const char *>(a.data_ptr()), *b0 = static_cast<const char *>(b.data_ptr());
  return a0 < b0 + b.nbytes() && b0 < a0 + a.nbytes();
}

// Before a blocking MPI call on CUDA tensors (the calls without an enqueued form): the host waits
// for the caller's stream, where the inputs and the buffers made for the call (copies,
// conversions) are produced; a no-op for CPU tensors.
void host_ready(const at::Tensor &t) {
  if (!t.is_cuda()) return;
  c10::impl::VirtualGuardImpl impl(c10::DeviceType::CUDA);
  impl.synchronizeStream(impl.getStream(t.device()));
}

// the root's list of a gather or scatter: one tensor per rank, of like's dtype, device and size
std::vector<at::Tensor> root_list(const std::vector<std::vector<at::Tensor>> &lists, int size,
                                  const at::Tensor &like, const char *call, const char *what) {
  TORCH_CHECK(lists.size() == 1, "picoll: ", call, " takes one ", what, " list at the root");
  check_list(lists[0], size, like, call);
  for (auto &t : lists[0])
    TORCH_CHECK(t.numel() == like.numel(), "picoll: ", call, " needs ", what,
                "s of one size: ", t.numel(), " and ", like.numel());
  return lists[0];
}

// the tensors one after the other, flat
at::Tensor flat_cat(const std::vector<at::Tensor> &v) {
  std::vector<at::Tensor> parts;
  for (auto &t : v) parts.push_back(t.reshape({-1}));
  return at::cat(parts);
}

// A list the coalesced forms send as one call: two or more dense contiguous tensors of one dtype
// and device; CPU tensors only when the call is not async (an async call must read its inputs
// when it runs on the worker thread, after the calls queued before it: it takes one call each)
bool packable(const std::vector<at::Tensor> &v, bool async) {
  if (v.size() < 2 || (async && !v[0].is_cuda())) return false;
  for (auto &t : v)
    if (t.layout() != at::kStrided || !t.is_contiguous() || t.scalar_type() != v[0].scalar_type() ||
        t.device() != v[0].device())
      return false;
  return true;
}

// flat's elements back into the tensors, one after the other
void unpack(const at::Tensor &flat, std::vector<at::Tensor> &v) {
  int64_t at_ = 0;
  for (auto &t : v) {
    t.view({-1}).copy_(flat.narrow(0, at_, t.numel()));
    at_ += t.numel();
  }
}

std::vector<int> counts_of(const std::vector<at::Tensor> &v, const char *call) {
  std::vector<int> c;
  for (auto &t : v) c.push_back(mpi_count(t.numel(), call));
  return c;
}

std::vector<int> displs_of(const std::vector<int> &counts) {
  std::vector<int> d(counts.size(), 0);
  long long at = 0;
  for (size_t i = 0; i < counts.size(); i++) {
    TORCH_CHECK(at <= INT_MAX, "picoll: the tensors hold more than INT_MAX elements in all");
    d[i] = (int)at;
    at += counts[i];
  }
  return d;
}

// The form an operation's MPI call takes (launch): the blocking MPI_X on the group's
// communicator, or picoll's MPIX_X_enqueue on the stream communicator of the CUDA call in
// progress. call() makes the one the form names, the communicator after args, so that an
// operation with both writes its arguments once; one with the blocking call only uses comm.
struct Form {
  MPI_Comm comm;
  bool enqueue;
  template <typename Blocking, typename Enqueued, typename... Args>
  int call(Blocking blocking, Enqueued enqueued, Args... args) const {
    return enqueue ? enqueued(args..., comm) : blocking(args..., comm);
  }
};

} // namespace

// Where an operation runs, by t's device and what the operation has for CUDA tensors:
// - CUDA, enqueued: body(Form{stream_comm_, true}) in the caller's thread, between cuda_begin
//   (the stream and its ordering after the caller's; outputs and inputs marked in use on it) and
//   cuda_end (async: Work.wait() orders the caller's stream, else it is ordered now).
// - otherwise: body(Form{comm_, false}) through run, now or with async on the worker thread. A
//   CUDA tensor's blocking call runs now, whatever async says; its body waits for the caller's
//   stream (host_ready) after making its buffers there.
// An operation whose forms differ (a CUDA buffer made on the caller's stream before the call, a
// result put back after it) does that around launch and passes its buffers as inputs; the
// undefined ones (a CPU tensor's, made in body) are left out.
template <typename Body>
c10::intrusive_ptr<c10d::Work>
ProcessGroupPicoll::launch(CudaForm cuda, const at::Tensor &t, bool async, c10d::OpType type,
                           const char *name, std::vector<at::Tensor> outputs,
                           std::vector<at::Tensor> inputs, Body body) {
  inputs.erase(std::remove_if(inputs.begin(), inputs.end(),
                              [](const at::Tensor &x) { return !x.defined(); }),
               inputs.end());
  if (t.is_cuda() && cuda == CudaForm::enqueued) {
    cuda_begin(t, {&outputs, &inputs});
    body(Form{stream_comm_, true});
    return cuda_end(async, type, name, std::move(outputs));
  }
  return run(async && !t.is_cuda(), type, name, std::move(outputs), std::move(inputs),
             [=, this]() mutable {
               body(Form{comm_, false});
             });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPicoll::allreduce(std::vector<at::Tensor> &tensors,
                                                             const c10d::AllreduceOptions &opts) {
  const char *call = "all_reduce";
  check_one(tensors, call);
  at::Tensor t = tensors[0];
  Plan p = plan_for(t, opts.reduceOp, call);
  int n = mpi_count(t.numel(), call), size = getSize();
  // r, the buffer reduced: CUDA's made on the caller's stream before the call, and put back
  // after it, where the caller's stream waits for the call (post: not async); CPU's in the call
  at::Tensor r;
  bool post = false;
  if (t.is_cuda()) {
    r = reduce_input(t, p, false);
    post = p.upcast || p.average || p.premul;
  }
  auto w = launch(CudaForm::enqueued, t, opts.asyncOp && !post, c10d::OpType::ALLREDUCE, call, {t},
                  {r}, [=](Form f) mutable {
                    if (!f.enqueue) r = reduce_input(t, p, false);
                    mpi_ok(f.call(MPI_Allreduce, MPIX_Allreduce_enqueue, MPI_IN_PLACE, r.data_ptr(),
                                  n, p.type, p.op),
                           call);
                    if (!f.enqueue) reduce_output(t, r, p, size);
                  });
  if (post) reduce_output(t, r, p, size);
  return w;
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupPicoll::allreduce_coalesced(std::vector<at::Tensor> &tensors,
                                        const c10d::AllreduceCoalescedOptions &opts) {
  c10d::AllreduceOptions o;
  o.reduceOp = opts.reduceOp;
  o.asyncOp = opts.asyncOp;
  if (packable(tensors, opts.asyncOp)) {
    // one call on the tensors packed one after the other, then unpacked: CUDA tensors ordered on
    // the device (the caller's stream waits for the call, the host does not)
    drain(); // the async calls queued before may still write these tensors
    at::Tensor flat = flat_cat(tensors);
    std::vector<at::Tensor> one{flat};
    o.asyncOp = false;
    auto w = allreduce(one, o);
    unpack(flat, tensors);
    return w;
  }
  // one call per tensor, in order (each is its own collective on every rank)
  c10::intrusive_ptr<c10d::Work> last;
  for (auto &t : tensors) {
    std::vector<at::Tensor> one{t};
    last = allreduce(one, o);
  }
  if (!last)
    return run(false, c10d::OpType::ALLREDUCE_COALESCED, "all_reduce_coalesced", {}, {}, [] {});
  return last;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPicoll::broadcast(std::vector<at::Tensor> &tensors,
                                                             const c10d::BroadcastOptions &opts) {
  const char *call = "broadcast";
  check_one(tensors, call);
  at::Tensor t = tensors[0];
  MPI_Datatype type = mpi_type(t, call);
  int n = mpi_count(t.numel(), call), root = (int)opts.rootRank;
  return launch(CudaForm::enqueued, t, opts.asyncOp, c10d::OpType::BROADCAST, call, {t}, {},
                [=](Form f) {
                  mpi_ok(f.call(MPI_Bcast, MPIX_Bcast_enqueue, t.data_ptr(), n, type, root), call);
                });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPicoll::reduce(std::vector<at::Tensor> &tensors,
                                                          const c10d::ReduceOptions &opts) {
  const char *call = "reduce";
  check_one(tensors, call);
  at::Tensor t = tensors[0];
  Plan p = plan_for(t, opts.reduceOp, call);
  int n = mpi_count(t.numel(), call), root = (int)opts.rootRank, size = getSize();
  bool is_root = root == getRank();
  return launch(CudaForm::blocking, t, opts.asyncOp, c10d::OpType::REDUCE, call, {t}, {},
                [=](Form f) mutable {
                  // the other ranks' tensors stay as they are; the root reduces from a copy, not
                  // MPI_IN_PLACE (MPICH 4.0.2 crashes on an in-place MPI_Reduce of 2 KiB or more
                  // at a root other than 0)
                  at::Tensor in = reduce_input(t, p, true);
                  at::Tensor out = is_root && p.upcast ? at::empty_like(in) : t;
                  host_ready(in);
                  mpi_ok(MPI_Reduce(in.data_ptr(), is_root ? out.data_ptr() : nullptr, n, p.type,
                                    p.op, root, f.comm),
                         call);
                  if (is_root) reduce_output(t, out, p, size);
                });
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupPicoll::_allgather_base(at::Tensor &output, at::Tensor &input,
                                    const c10d::AllgatherOptions &opts) {
  const char *call = "all_gather_into_tensor";
  check_tensor(output, call);
  check_tensor(input, call);
  TORCH_CHECK(output.numel() == input.numel() * getSize(), "picoll: ", call, ": the output holds ",
              output.numel(), " elements, not the group's size (", getSize(),
              ") times the input's ", input.numel());
  check_same_dtype(input, output, call);
  MPI_Datatype type = mpi_type(input, call);
  int n = mpi_count(input.numel(), call);
  at::Tensor in = input, out = output;
  // the input as this rank's part of the output (MPI_IN_PLACE), or another overlap (a copy)
  bool in_place =
      !input.is_cuda() &&
      input.data_ptr() == out.view({-1}).narrow(0, (int64_t)getRank() * n, n).data_ptr();
  if (!in_place && overlap(in, out)) in = in.clone();
  return launch(CudaForm::enqueued, in, opts.asyncOp, c10d::OpType::_ALLGATHER_BASE, call, {out},
                {in}, [=](Form f) {
                  mpi_ok(f.call(MPI_Allgather, MPIX_Allgather_enqueue,
                                in_place ? MPI_IN_PLACE : in.data_ptr(), n, type, out.data_ptr(), n,
                                type),
                         call);
                });
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupPicoll::allgather(std::vector<std::vector<at::Tensor>> &outputs,
                              std::vector<at::Tensor> &inputs, const c10d::AllgatherOptions &opts) {
  const char *call = "all_gather";
  check_one(inputs, call);
  TORCH_CHECK(outputs.size() == 1, "picoll: ", call, " takes one output list per process");
  at::Tensor in = inputs[0];
  std::vector<at::Tensor> outs = outputs[0];
  check_list(outs, getSize(), in, call);
  bool even = true;
  for (auto &o : outs) even = even && o.numel() == in.numel();
  if (even) {
    // through one flat tensor: the same call as all_gather_into_tensor, then copies
    at::Tensor flat = at::empty({(int64_t)getSize() * in.numel()}, in.options());
    at::Tensor flat_in = in.reshape({-1});
    c10d::AllgatherOptions o = opts;
    bool async = opts.asyncOp && !in.is_cuda();
    o.asyncOp = false;
    if (!async) {
      auto w = _allgather_base(flat, flat_in, o);
      for (int i = 0; i < getSize(); i++)
        outs[i].view({-1}).copy_(flat.narrow(0, i * in.numel(), in.numel()));
      return w;
    }
    // CPU tensors, async: the call and the copies on the worker thread
    MPI_Datatype type = mpi_type(in, call);
    int n = mpi_count(in.numel(), call);
    return launch(
        CudaForm::blocking, in, true, c10d::OpType::ALLGATHER, call, outs, {in},
        [=](Form f) mutable {
          mpi_ok(MPI_Allgather(flat_in.data_ptr(), n, type, flat.data_ptr(), n, type, f.comm),
                 call);
          for (size_t i = 0; i < outs.size(); i++)
            outs[i].view({-1}).copy_(flat.narrow(0, i * n, n));
        });
  }
  // tensors of different sizes: MPI_Allgatherv
  MPI_Datatype type = mpi_type(in, call);
  std::vector<int> counts = counts_of(outs, call), displs = displs_of(counts);
  return launch(
      CudaForm::blocking, in, opts.asyncOp, c10d::OpType::ALLGATHER, call, outs, {in},
      [=](Form f) mutable {
        at::Tensor flat = at::empty({(int64_t)displs.back() + counts.back()}, in.options());
        at::Tensor src = in.contiguous();
        host_ready(src);
        mpi_ok(MPI_Allgatherv(src.data_ptr(), mpi_count(in.numel(), call), type, flat.data_ptr(),
                              counts.data(), displs.data(), type, f.comm),
               call);
        for (size_t i = 0; i < outs.size(); i++)
          outs[i].view({-1}).copy_(flat.narrow(0, displs[i], counts[i]));
      });
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupPicoll::allgather_coalesced(std::vector<std::vector<at::Tensor>> &outputs,
                                        std::vector<at::Tensor> &inputs,
                                        const c10d::AllgatherOptions &opts) {
  TORCH_CHECK(outputs.size() == inputs.size(), "picoll: all_gather_coalesced needs one output "
                                               "list per input");
  c10::intrusive_ptr<c10d::Work> last;
  for (size_t i = 0; i < inputs.size(); i++) {
    std::vector<std::vector<at::Tensor>> o{outputs[i]};
    std::vector<at::Tensor> in{inputs[i]};
    last = allgather(o, in, opts);
  }
  return last
             ? last
             : run(false, c10d::OpType::ALLGATHER_COALESCED, "all_gather_coalesced", {}, {}, [] {});
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupPicoll::allgather_into_tensor_coalesced(std::vector<at::Tensor> &outputs,
                                                    std::vector<at::Tensor> &inputs,
                                                    const c10d::AllgatherOptions &opts) {
  TORCH_CHECK(outputs.size() == inputs.size(), "picoll: all_gather_into_tensor_coalesced needs "
                                               "as many outputs as inputs");
  int size = getSize();
  if (packable(inputs, opts.asyncOp) && packable(outputs, false) &&
      outputs[0].scalar_type() == inputs[0].scalar_type()) {
    // one allgather of the inputs packed: rank r's block holds its inputs one after the other,
    // so output i is column block i of the [size, total] result
    for (size_t i = 0; i < inputs.size(); i++)
      TORCH_CHECK(outputs[i].numel() == inputs[i].numel() * size,
                  "picoll: ", "all_gather_into_tensor_coalesced: output ", i, " holds ",
                  outputs[i].numel(), " elements, not the group's size (", size,
                  ") times its input's ", inputs[i].numel());
    drain();
    at::Tensor flat_in = flat_cat(inputs);
    int64_t total = flat_in.numel();
    at::Tensor flat_out = at::empty({total * size}, flat_in.options());
    c10d::AllgatherOptions o = opts;
    o.asyncOp = false;
    auto w = _allgather_base(flat_out, flat_in, o);
    auto grid = flat_out.view({size, total});
    int64_t at_ = 0;
    for (auto &out : outputs) {
      int64_t n = out.numel() / size;
      out.view({size, n}).copy_(grid.narrow(1, at_, n));
      at_ += n;
    }
    return w;
  }
  c10::intrusive_ptr<c10d::Work> last;
  for (size_t i = 0; i < inputs.size(); i++) last = _allgather_base(outputs[i], inputs[i], opts);
  return last ? last
              : run(false, c10d::OpType::COALESCED, "all_gather_into_tensor_coalesced", {}, {},
                    [] {});
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupPicoll::gather(std::vector<std::vector<at::Tensor>> &outputs,
                           std::vector<at::Tensor> &inputs, const c10d::GatherOptions &opts) {
  const char *call = "gather";
  check_one(inputs, call);
  at::Tensor in = inputs[0];
  int root = (int)opts.rootRank;
  bool is_root = root == getRank();
  std::vector<at::Tensor> outs;
  if (is_root) {
    outs = root_list(outputs, getSize(), in, call, "output");
  } else {
    TORCH_CHECK(outputs.empty() || outputs[0].empty(), "picoll: gather takes no output list "
                                                       "on a rank that is not the root");
  }
  MPI_Datatype type = mpi_type(in, call);
  int n = mpi_count(in.numel(), call), size = getSize();
  return launch(CudaForm::blocking, in, opts.asyncOp, c10d::OpType::GATHER, call, outs, {in},
                [=](Form f) mutable {
                  at::Tensor src = in.contiguous(), flat;
                  if (is_root) flat = at::empty({(int64_t)size * in.numel()}, in.options());
                  host_ready(src);
                  mpi_ok(MPI_Gather(src.data_ptr(), n, type, is_root ? flat.data_ptr() : nullptr, n,
                                    type, root, f.comm),
                         call);
                  for (size_t i = 0; i < outs.size(); i++)
                    outs[i].view({-1}).copy_(flat.narrow(0, i * n, n));
                });
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupPicoll::scatter(std::vector<at::Tensor> &outputs,
                            std::vector<std::vector<at::Tensor>> &inputs,
                            const c10d::ScatterOptions &opts) {
  const char *call = "scatter";
  check_one(outputs, call);
  at::Tensor out = outputs[0];
  int root = (int)opts.rootRank;
  bool is_root = root == getRank();
  std::vector<at::Tensor> ins;
  if (is_root) ins = root_list(inputs, getSize(), out, call, "input");
  MPI_Datatype type = mpi_type(out, call);
  int n = mpi_count(out.numel(), call);
  return launch(CudaForm::blocking, out, opts.asyncOp, c10d::OpType::SCATTER, call, {out}, ins,
                [=](Form f) mutable {
                  at::Tensor flat;
                  if (is_root) flat = flat_cat(ins);
                  host_ready(out);
                  mpi_ok(MPI_Scatter(is_root ? flat.data_ptr() : nullptr, n, type, out.data_ptr(),
                                     n, type, root, f.comm),
                         call);
                });
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupPicoll::_reduce_scatter_base(at::Tensor &output, at::Tensor &input,
                                         const c10d::ReduceScatterOptions &opts) {
  const char *call = "reduce_scatter_tensor";
  check_tensor(output, call);
  check_tensor(input, call);
  TORCH_CHECK(input.numel() == output.numel() * getSize(), "picoll: ", call, ": the input holds ",
              input.numel(), " elements, not the group's size (", getSize(),
              ") times the output's ", output.numel());
  check_same_dtype(input, output, call);
  Plan p = plan_for(input, opts.reduceOp, call);
  int n = mpi_count(output.numel(), call), size = getSize();
  at::Tensor in = input, out = output;
  if (overlap(in, out)) in = in.clone(); // the output inside the input: MPI wants them apart
  // the buffers reduced from and into: CUDA's made on the caller's stream before the call, the
  // result put back after it, where the caller's stream waits for the call (post: not async);
  // CPU's in the call
  auto buffers = [=](at::Tensor &r_in, at::Tensor &r_out) {
    r_in = p.upcast || p.premul ? reduce_input(in, p, true) : in;
    r_out = p.upcast ? at::empty(out.sizes(), r_in.options()) : out;
  };
  at::Tensor r_in, r_out;
  bool post = false;
  if (in.is_cuda()) {
    buffers(r_in, r_out);
    post = p.upcast || p.average;
  }
  auto w = launch(CudaForm::enqueued, in, opts.asyncOp && !post, c10d::OpType::_REDUCE_SCATTER_BASE,
                  call, {out}, {in, r_in, r_out}, [=](Form f) mutable {
                    if (!f.enqueue) buffers(r_in, r_out);
                    mpi_ok(f.call(MPI_Reduce_scatter_block, MPIX_Reduce_scatter_block_enqueue,
                                  r_in.data_ptr(), r_out.data_ptr(), n, p.type, p.op),
                           call);
                    if (!f.enqueue) reduce_output(out, r_out, p, size);
                  });
  if (post) reduce_output(out, r_out, p, size);
  return w;
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupPicoll::reduce_scatter(std::vector<at::Tensor> &outputs,
                                   std::vector<std::vector<at::Tensor>> &inputs,
                                   const c10d::ReduceScatterOptions &opts) {
  const char *call = "reduce_scatter";
  check_one(outputs, call);
  TORCH_CHECK(inputs.size() == 1, "picoll: ", call, " takes one input list per process");
  at::Tensor out = outputs[0];
  check_list(inputs[0], getSize(), out, call);
  for (auto &i : inputs[0])
    TORCH_CHECK(i.numel() == out.numel(), "picoll: ", call, " needs inputs of the output's size");
  at::Tensor flat = flat_cat(inputs[0]);
  at::Tensor flat_out =
      out.is_contiguous() ? out.view({-1}) : at::empty({out.numel()}, out.options());
  auto w = _reduce_scatter_base(flat_out, flat, opts);
  if (!out.is_contiguous()) {
    w->wait();
    out.copy_(flat_out.view(out.sizes()));
  }
  return w;
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupPicoll::reduce_scatter_tensor_coalesced(std::vector<at::Tensor> &outputs,
                                                    std::vector<at::Tensor> &inputs,
                                                    const c10d::ReduceScatterOptions &opts) {
  TORCH_CHECK(outputs.size() == inputs.size(), "picoll: reduce_scatter_tensor_coalesced needs "
                                               "as many outputs as inputs");
  int size = getSize();
  if (packable(inputs, opts.asyncOp) && packable(outputs, false) &&
      outputs[0].scalar_type() == inputs[0].scalar_type()) {
    // one reduce-scatter of the inputs packed as [size, total]: rank r's block holds block r of
    // every input one after the other, and its result is the outputs one after the other
    int64_t total = 0;
    for (size_t i = 0; i < inputs.size(); i++) {
      TORCH_CHECK(inputs[i].numel() == outputs[i].numel() * size,
                  "picoll: ", "reduce_scatter_tensor_coalesced: input ", i, " holds ",
                  inputs[i].numel(), " elements, not the group's size (", size,
                  ") times its output's ", outputs[i].numel());
      total += outputs[i].numel();
    }
    drain();
    at::Tensor flat_in = at::empty({total * size}, inputs[0].options());
    auto grid = flat_in.view({size, total});
    int64_t at_ = 0;
    for (auto &in : inputs) {
      int64_t n = in.numel() / size;
      grid.narrow(1, at_, n).copy_(in.view({size, n}));
      at_ += n;
    }
    at::Tensor flat_out = at::empty({total}, inputs[0].options());
    c10d::ReduceScatterOptions o = opts;
    o.asyncOp = false;
    auto w = _reduce_scatter_base(flat_out, flat_in, o);
    unpack(flat_out, outputs);
    return w;
  }
  c10::intrusive_ptr<c10d::Work> last;
  for (size_t i = 0; i < inputs.size(); i++)
    last = _reduce_scatter_base(outputs[i], inputs[i], opts);
  return last ? last
              : run(false, c10d::OpType::COALESCED, "reduce_scatter_tensor_coalesced", {}, {},
                    [] {});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPicoll::alltoall_base(
    at::Tensor &output, at::Tensor &input, std::vector<int64_t> &output_splits,
    std::vector<int64_t> &input_splits, const c10d::AllToAllOptions &opts) {
  const char *call = "all_to_all_single";
  check_tensor(output, call);
  check_tensor(input, call);
  check_same_dtype(input, output, call);
  MPI_Datatype type = mpi_type(input, call);
  int size = getSize();
  at::Tensor in = input, out = output;
  if (overlap(in, out)) in = in.clone();
  if (output_splits.empty() && input_splits.empty()) {
    TORCH_CHECK(in.numel() % size == 0 && in.numel() == out.numel(), "picoll: ", call,
                " without splits needs input and output of one size, divisible by the group's "
                "size (",
                size, ")");
    int n = mpi_count(in.numel() / size, call);
    return launch(CudaForm::enqueued, in, opts.asyncOp, c10d::OpType::ALLTOALL_BASE, call, {out},
                  {in}, [=](Form f) {
                    mpi_ok(f.call(MPI_Alltoall, MPIX_Alltoall_enqueue, in.data_ptr(), n, type,
                                  out.data_ptr(), n, type),
                           call);
                  });
  }
  // uneven splits, in rows of the first dimension
  auto counts = [&](const at::Tensor &t, const std::vector<int64_t> &splits) {
    int64_t rows = t.dim() ? t.size(0) : 1, row = rows ? t.numel() / rows : 0;
    std::vector<int64_t> s = splits;
    if (s.empty()) {
      TORCH_CHECK(rows % size == 0, "picoll: ", call, ": ", rows, " rows do not split evenly over ",
                  size, " ranks");
      s.assign(size, rows / size);
    }
    TORCH_CHECK((int)s.size() == size, "picoll: ", call, " needs one split per rank (", size,
                "), got ", s.size());
    std::vector<int> c;
    int64_t sum = 0;
    for (auto x : s) {
      c.push_back(mpi_count(x * row, call));
      sum += x;
    }
    TORCH_CHECK(sum == rows, "picoll: ", call, ": the splits add up to ", sum, " rows, not ", rows);
    return c;
  };
  std::vector<int> sc = counts(in, input_splits), rc = counts(out, output_splits);
  std::vector<int> sd = displs_of(sc), rd = displs_of(rc);
  return launch(CudaForm::blocking, in, opts.asyncOp, c10d::OpType::ALLTOALL_BASE, call, {out},
                {in}, [=](Form f) {
                  host_ready(in);
                  mpi_ok(MPI_Alltoallv(in.data_ptr(), sc.data(), sd.data(), type, out.data_ptr(),
                                       rc.data(), rd.data(), type, f.comm),
                         call);
                });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPicoll::alltoall(std::vector<at::Tensor> &outputs,
                                                            std::vector<at::Tensor> &inputs,
                                                            const c10d::AllToAllOptions &opts) {
  const char *call = "all_to_all";
  TORCH_CHECK(!inputs.empty(), "picoll: all_to_all needs tensors");
  check_list(inputs, getSize(), inputs[0], call);
  check_list(outputs, getSize(), inputs[0], call);
  MPI_Datatype type = mpi_type(inputs[0], call);
  std::vector<int> sc = counts_of(inputs, call), rc = counts_of(outputs, call);
  std::vector<int> sd = displs_of(sc), rd = displs_of(rc);
  std::vector<at::Tensor> outs = outputs, ins = inputs;
  return launch(CudaForm::blocking, ins[0], opts.asyncOp, c10d::OpType::ALLTOALL, call, outs, ins,
                [=](Form f) mutable {
                  at::Tensor src = flat_cat(ins);
                  at::Tensor dst = at::empty({(int64_t)rd.back() + rc.back()}, src.options());
                  host_ready(src);
                  mpi_ok(MPI_Alltoallv(src.data_ptr(), sc.data(), sd.data(), type, dst.data_ptr(),
                                       rc.data(), rd.data(), type, f.comm),
                         call);
                  for (size_t i = 0; i < outs.size(); i++)
                    outs[i].view({-1}).copy_(dst.narrow(0, rd[i], rc[i]));
                });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPicoll::p2p(at::Tensor &t, int peer, int tag,
                                                       bool is_send, c10d::OpType type) {
  const char *call = is_send ? "send" : "recv";
  check_tensor(t, call);
  MPI_Datatype dt = mpi_type(t, call);
  int n = mpi_count(t.numel(), call);
  host_ready(t);
  drain();
  reap_orphans(false);
  auto w = c10::make_intrusive<PicollWork>(getRank(), type, call, std::vector<at::Tensor>{t});
  w->keep = {t};
  int rc = is_send ? MPI_Isend(t.data_ptr(), n, dt, peer, tag, comm_, &w->request)
                   : MPI_Irecv(t.data_ptr(), n, dt, peer, tag, comm_, &w->request);
  mpi_ok(rc, call);
  return w;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPicoll::send(std::vector<at::Tensor> &tensors, int dst,
                                                        int tag) {
  check_one(tensors, "send");
  return p2p(tensors[0], dst, tag, true, c10d::OpType::SEND);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPicoll::recv(std::vector<at::Tensor> &tensors, int src,
                                                        int tag) {
  check_one(tensors, "recv");
  return p2p(tensors[0], src, tag, false, c10d::OpType::RECV);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPicoll::recvAnysource(std::vector<at::Tensor> &tensors,
                                                                 int tag) {
  check_one(tensors, "recv");
  return p2p(tensors[0], MPI_ANY_SOURCE, tag, false, c10d::OpType::RECVANYSOURCE);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPicoll::barrier(const c10d::BarrierOptions &opts) {
  return run(opts.asyncOp, c10d::OpType::BARRIER, "barrier", {}, {},
             [this] { mpi_ok(MPI_Barrier(comm_), "barrier"); });
}

} // namespace picoll_torch
