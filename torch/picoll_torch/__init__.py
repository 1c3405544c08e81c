"""picoll's PyTorch process group.

    import picoll_torch                       # registers the backend "picoll"
    torch.distributed.init_process_group("picoll")

Under mpirun nothing else is needed: ranks come from MPI, and when MASTER_ADDR is not set the
store that torch.distributed keeps beside every process group is set up through MPI (rank 0's
host and a free port). init_method, rank and world_size work as with any backend; the ranks must
then be MPI's. docs/torch.md in picoll's sources says what runs where.
"""
import atexit
import ctypes
import os
import socket
import sys
import warnings

import torch
import torch.distributed as dist

from . import _paths

# libpicoll before the extension, into the global namespace: its MPI_* wrappers, not the MPI's
# own functions, are what the extension (and the MPI's own plug-ins) then find
ctypes.CDLL(_paths.LIBPICOLL, mode=ctypes.RTLD_GLOBAL)
_flags = sys.getdlopenflags()
sys.setdlopenflags(_flags | os.RTLD_GLOBAL)
try:
    from . import _C
finally:
    sys.setdlopenflags(_flags)

__all__ = ["active", "last_algorithm", "time_c_allreduce", "time_staged_allreduce", "version"]

_THREAD_MULTIPLE = 3  # MPI_THREAD_MULTIPLE in every MPI's numbering we build with
if _C.bootstrap() < _THREAD_MULTIPLE:
    warnings.warn("picoll_torch: the MPI does not provide MPI_THREAD_MULTIPLE; async_op=True "
                  "calls run on a worker thread beside the caller's: keep to one of the two",
                  stacklevel=2)
if "libpicoll" not in os.path.basename(_C.mpi_allreduce_from()):
    warnings.warn("picoll_torch: MPI_Allreduce resolves to %s, not to libpicoll: the MPI was "
                  "loaded before picoll_torch (import picoll_torch first, or preload "
                  "libpicoll.so); calls go to the plain MPI" % _C.mpi_allreduce_from(),
                  stacklevel=2)
atexit.register(_C.finalize)


def _env_from_mpi():
    """RANK, WORLD_SIZE, LOCAL_RANK and a store's MASTER_ADDR/MASTER_PORT from MPI, for
    init_process_group's default init_method env://, where the user has not set them."""
    rank, size = _C.world()
    os.environ.setdefault("RANK", str(rank))
    os.environ.setdefault("WORLD_SIZE", str(size))
    for local in ("OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "PMI_LOCAL_RANK"):
        if local in os.environ:
            os.environ.setdefault("LOCAL_RANK", os.environ[local])
            break
    if "MASTER_ADDR" in os.environ:
        return
    addr = ""
    if rank == 0:
        with socket.socket() as s:  # a free port for rank 0's store
            s.bind(("", 0))
            addr = "%s:%d" % (socket.gethostname(), s.getsockname()[1])
    host, port = _C.bcast_str(addr).rsplit(":", 1)
    os.environ["MASTER_ADDR"] = host
    os.environ.setdefault("MASTER_PORT", port)


# Where a group's calls on CUDA tensors run, read when a group is made (docs/torch.md): "group",
# a stream of the group's own, ordered after the caller's current stream by events (as NCCL's
# process group; graph capture works on any stream); "caller", the caller's current stream itself,
# with a picoll stream communicator per stream, made at the group's first call on it (every rank
# must switch streams at the same calls; a stream first used inside a graph capture fails);
# "auto" (the default): "caller" where ranks of this node share a GPU (there it costs less per
# call: on an H200 at np 4, 16 against 22 us at 8 B, docs/torch.md), else "group".
cuda_stream = "auto"


def _local_ranks():
    for var in ("OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "PMI_LOCAL_SIZE"):
        if var in os.environ:
            return int(os.environ[var])
    return 1


def _stream_mode():
    if cuda_stream not in ("auto", "group", "caller"):
        raise ValueError(f"picoll_torch.cuda_stream is {cuda_stream!r}: 'auto', 'group' or "
                         "'caller'")
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    local = _local_ranks()
    shared = gpus and local > gpus
    if cuda_stream != "auto":
        return cuda_stream
    return "caller" if shared else "group"


def _create(dist_opts, backend_opts):
    mode = _stream_mode()
    ranks = list(dist_opts.global_ranks_in_group)
    timeout = dist_opts.timeout.total_seconds() if hasattr(dist_opts.timeout, "total_seconds") \
        else float(dist_opts.timeout)
    return _C.ProcessGroupPicoll(dist_opts.group_rank, dist_opts.group_size, ranks,
                                 dist_opts.group_id, timeout, mode == "caller")


_env_from_mpi()
dist.Backend.register_backend("picoll", _create, extended_api=True, devices=["cpu", "cuda"])


def active():
    """True when picoll intercepts the collectives in this process."""
    return bool(_C.active())


def version():
    return _C.version()


def last_algorithm():
    """The algorithm that ran this thread's last collective ("oneshot", "twoshot", ...,
    "fallback" when the plain MPI ran it), or None before the first."""
    return _C.last_algorithm()


def allocator():
    """picoll's device memory allocator as a PyTorch pluggable allocator
    (torch.cuda.memory.CUDAPluggableAllocator over libpicoll's picoll_cuda_alloc and
    picoll_cuda_free): what it allocates is registered for the zero-copy path of picoll's large
    device collectives (PICOLL_CUDA_ZERO_COPY=registered, the default)."""
    return torch.cuda.memory.CUDAPluggableAllocator(_paths.LIBPICOLL, "picoll_cuda_alloc",
                                                     "picoll_cuda_free")


def mem_pool():
    """A torch.cuda.MemPool of allocator(): large all_reduce, all_gather_into_tensor and
    all_to_all_single of tensors made under torch.cuda.use_mem_pool(pool) on every rank read the
    peers' tensors in place, with no copy (docs/cuda.md, "Zero-copy")."""
    return torch.cuda.MemPool(allocator().allocator())


def _backend(group):
    pg = group if group is not None else dist.group.WORLD
    return pg._get_backend(torch.device("cpu"))


def time_c_allreduce(tensor, iters, group=None):
    """Seconds per call of a C loop of MPI_Allreduce(SUM) on tensor, on the group's
    communicator (every rank of the group calls it): the backend's own cost is the difference
    from dist.all_reduce."""
    return _backend(group).time_c_allreduce(tensor, iters)


def time_staged_allreduce(tensor, iters, group=None):
    """Seconds per call of what ProcessGroupMPI over an MPI that is not CUDA-aware makes of an
    all_reduce(SUM) on tensor, with the MPI alone (picoll bypassed on every rank of the group,
    which all call it): per call a blocking copy to host memory, MPI_Allreduce in place there,
    a blocking copy back (CPU tensors: the MPI call only). The tensor holds the result."""
    return _backend(group).time_staged_allreduce(tensor, iters)


def stream_stats(group=None):
    """What picoll did with the group's CUDA calls so far (picoll_stream_query of its stream):
    a dict of staged, host, device, captured, runs and kernels (calls run by picoll's kernels on
    the stream; their graph replays are not counted)."""
    keys = ("staged", "host", "device", "captured", "runs", "kernels")
    pg = group if group is not None else dist.group.WORLD
    return dict(zip(keys, pg._get_backend(torch.device("cuda")).stream_stats()))
