/* The device kernel's low-latency lines (PICOLL_CUDA_K_ONESHOT_LL and _ALLGATHER_LL, the layout
 * and the flag in cuda/cuda_kernel.h), included by cuda/coll_kernel.cu inside its anonymous namespace, after its
 * primitives (DEV_LINE_STORE, DEV_LINE_LOAD, DEV_SYNCTHREADS, dev_st, dev_word_store), the waits'
 * clock (dev_wait_tick), the give-up (dev_gave_up), dev_finish and dev_block_t. */

/* 16 bytes of this chunk of the input at off, zero past its end, whatever its alignment. */
__device__ __forceinline__ uint4 dev_line_payload(const picoll_cuda_kparams_t &p, size_t off)
{
    if (off + 16 <= p.bytes && ((uintptr_t)(p.src + off) & 15) == 0) {
        return __ldcg((const uint4 *)(p.src + off));
    }
    uint32_t w[4] = {0, 0, 0, 0};
    for (int k = 0; k < 16 && off + (size_t)k < p.bytes; k++) {
        w[k / 4] |= (uint32_t)__ldcg((const unsigned char *)p.src + off + k) << (8 * (k % 4));
    }
    return make_uint4(w[0], w[1], w[2], w[3]);
}

/* Waits for the line at from to carry flag in both halves (sender t's, this launch's first epoch
 * first); 0 when it does (*out: the line), else why the thread stopped (dev_wait_tick). */
__device__ int dev_line_wait(const picoll_cuda_kparams_t &p, const uint4 *from, uint32_t flag,
                             int t, uint64_t first, uint4 *out)
{
    uint64_t since = 0;
    for (unsigned spins = 1;; spins++) {
        uint4 v = DEV_LINE_LOAD(10, from);
        if (v.y == flag && v.w == flag) {
            *out = v;
            return 0;
        }
        if ((spins & 63) == 0) {
            int why = dev_wait_tick(p, t, first, &since);
            if (why != 0) {
                return why;
            }
        }
        if (p.nap_ns != 0) {
            __nanosleep(p.nap_ns);
        }
    }
}

/* The lines' exchange (PICOLL_CUDA_K_ONESHOT_LL, PICOLL_CUDA_K_ALLGATHER_LL; cuda_kernel.h): the
 * block's threads take the (16-byte unit of my part, rank) pairs in turn; for each, a thread
 * pushes the unit of my input as two lines into my region of that rank's line area, then waits for
 * that rank's two lines of the unit in mine and hands their payload to unpack(r, u, payload) (so
 * that up to blockDim.x lines are pushed and waited for at once, whatever the rank count). Then a
 * barrier: every thread's unpacked payload before any thread reads it, and the give-up. Returns
 * true when the block gave up (the host is told; the caller returns). No flag is waited for and
 * no release made; the block's own flag line still records its arrival (relaxed), for the
 * stream's epoch word (dev_finish). A resumed launch pushes again: the same bytes with the same
 * flag, which a peer that took them already ignores (it has moved to the other parity). */
template <class Unpack>
__device__ __forceinline__ bool dev_lines(const picoll_cuda_kparams_t &p, const dev_block_t &b,
                                          Unpack unpack)
{
    DEV_SHARED(int, ll_gave_up);
    const size_t nb = picoll_cuda_ll_bytes(p.bytes);
    const uint32_t flag = picoll_cuda_ll_flag(b.ep);
    /* rank r's line area of this parity: after its flags and both data buffers */
    const size_t area = PICOLL_CUDA_FLAGS_BYTES + 2 * p.slot_size + (b.ep & 1) * p.ll_size;
    char *const mine = (char *)p.flags[p.me] + area;
    /* 32-bit unit and pair indices: a call of the lines is small (its unpacked payload fits one
     * slot), and 64-bit division costs registers the generic kernel does not have */
    const unsigned u_lo = (unsigned)(b.lo / 16), u_hi = (unsigned)((b.hi + 15) / 16);
    const unsigned nr = (unsigned)p.nranks;

    /* reset where not 0, before the barrier below (as dev_arrive_wait's gave_up) */
    if (threadIdx.x == 0) {
        if (*(volatile int *)&ll_gave_up != 0) {
            ll_gave_up = 0;
        }
    }
    const unsigned pairs = (u_hi - u_lo) * nr;
    for (unsigned i = threadIdx.x; i < pairs; i += blockDim.x) {
        const unsigned u = u_lo + i / nr;
        const int r = (int)(i % nr);
        uint4 d = dev_line_payload(p, (size_t)u * 16);
        uint4 line[2] = {make_uint4(d.x, flag, d.y, flag), make_uint4(d.z, flag, d.w, flag)};
        uint4 *to = (uint4 *)((char *)p.flags[r] + area + (size_t)p.me * 2 * nb) + 2 * u;
        for (int k = 0; k < 2; k++) {
            DEV_LINE_STORE(9, to + k, line[k]);
        }
    }
    __syncthreads(); /* ll_gave_up's reset before any thread's atomicMax (no data to order) */
    int why = 0;
    for (unsigned i = threadIdx.x; i < pairs && why == 0; i += blockDim.x) {
        const unsigned u = u_lo + i / nr;
        const int r = (int)(i % nr);
        const uint4 *from = (const uint4 *)(mine + (size_t)r * 2 * nb) + 2 * u;
        uint4 line[2];
        for (int k = 0; k < 2 && why == 0; k++) {
            why = dev_line_wait(p, from + k, flag, r, b.ep, &line[k]);
        }
        if (why == 0) {
            unpack(r, u, make_uint4(line[0].x, line[0].z, line[1].x, line[1].z));
        }
    }
    if (why != 0) { /* a veto (2) wins over a late peer (1), whatever the threads' order */
        atomicMax(&ll_gave_up, why);
    }
    /* every thread's unpacked payload before any thread reads it, and the missing word before
     * thread 0's release of quit */
    DEV_SYNCTHREADS(11);
    if (dev_gave_up(p, ll_gave_up)) {
        return true;
    }
    if (threadIdx.x == 0) {
        /* my arrival, for dev_finish's wait on a stream: after the barrier, so after every
         * thread's read of the epoch word */
        dev_word_store(p.flags[p.me] + (size_t)blockIdx.x * PICOLL_CUDA_FLAG_STRIDE, b.ep);
    }
    return false;
}

/* One-shot allreduce with the lines: every rank's payload into my unpacked area, then the block
 * reduces every rank's unpacked part in rank order into dst, as one-shot does (the same bits). */
template <class R>
__device__ __forceinline__ void dev_mode_oneshot_ll(const picoll_cuda_kparams_t &p, R red,
                                                    const dev_block_t &b)
{
    const size_t nb = picoll_cuda_ll_bytes(p.bytes);
    char *const unpacked = b.in[p.me];
    if (dev_lines(p, b, [&](int r, unsigned u, uint4 v) {
            dev_st((uint4 *)(unpacked + (size_t)r * nb) + u, v);
        })) {
        return;
    }
    char *from[PICOLL_CUDA_MAX_LOCAL];
    for (int r = 0; r < p.nranks; r++) {
        from[r] = unpacked + (size_t)r * nb;
    }
    red(p, p.dst + b.lo, from, p.nranks, b.lo, (b.hi - b.lo) / (size_t)p.esize);
    dev_finish(p, b.ep, b.ep);
}

/* Allgather with the lines: each rank's payload straight to its place in dst (skip_self: mine is
 * there already), cut to the chunk. */
__device__ __forceinline__ void dev_mode_allgather_ll(const picoll_cuda_kparams_t &p,
                                                      const dev_block_t &b)
{
    if (dev_lines(p, b, [&](int r, unsigned u, uint4 v) {
            size_t off = (size_t)u * 16;
            if ((r != p.me || !p.skip_self) && off < p.bytes) {
                dev_store_part(p.dst + (size_t)r * p.dst_stride + off, v,
                               p.bytes - off < 16 ? (int)(p.bytes - off) : 16);
            }
        })) {
        return;
    }
    dev_finish(p, b.ep, b.ep);
}
