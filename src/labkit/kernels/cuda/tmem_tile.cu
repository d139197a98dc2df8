// Lab 10, exercise 2 (10.tcgen05-tmem): Tensor Memory for a tcgen05 accumulator on data-centre Blackwell (sm_100a).
// One warp allocates TMEM_COLUMNS columns of Tensor Memory (a power of two from 32 to 512; an FP32 accumulator of
// 128 rows x n columns takes n of them), gives up its permit to allocate more, and, after every thread has read the
// address, frees them. The PTX instructions are inline assembly: NVRTC passes them to any target, ptxas accepts
// them for sm_100a/sm_103a only. Compile with -DTMEM_COLUMNS=<columns> (labkit.check.lab10_tcgen05 does).
#ifndef TMEM_COLUMNS
#define TMEM_COLUMNS 256
#endif

extern "C" __global__ void tmem_tile(unsigned* out)
{
    __shared__ unsigned tmem_base;
    if (threadIdx.x < 32) {  // one whole warp: the instructions are .sync.aligned
        unsigned dst = (unsigned)__cvta_generic_to_shared(&tmem_base);
        asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], %1;" :: "r"(dst), "n"(TMEM_COLUMNS));
        asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;");
    }
    __syncthreads();  // tcgen05.alloc wrote the address to shared memory: wait before anyone reads it
    unsigned taddr = tmem_base;
    out[threadIdx.x] = taddr;
    __syncthreads();  // nobody uses the columns after this point
    if (threadIdx.x < 32) {
        asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, %1;" :: "r"(taddr), "n"(TMEM_COLUMNS));
    }
}
