//! The pattern kernels, compiled with NVRTC. `race_fill` holds each block for the race window
//! before writing (a long producer: its data lands late); `race_consume` copies first and then
//! holds (a long consumer that read early). `%globaltimer` is the GPU's ns clock.

pub const SOURCE: &str = r#"
typedef unsigned long long u64;
extern "C" {
__device__ __forceinline__ u64 race_now() {
    u64 t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t;
}
__device__ __forceinline__ void race_hold(u64 ns) {
    __shared__ u64 t0;
    if (threadIdx.x == 0) t0 = race_now();
    __syncthreads();
    while (race_now() < t0 + ns) { }
    __syncthreads();
}
// n elements of `width` bytes (2 or 4), all set to `bits`.
__global__ void race_fill(void* p, u64 n, unsigned int bits, int width, u64 hold_ns) {
    if (hold_ns) race_hold(hold_ns);
    u64 stride = (u64)gridDim.x * blockDim.x;
    if (width == 4) {
        unsigned int* q = (unsigned int*)p;
        for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n; i += stride) q[i] = bits;
    } else {
        unsigned short* q = (unsigned short*)p;
        unsigned short b = (unsigned short)bits;
        for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n; i += stride) q[i] = b;
    }
    __threadfence();
}
// Copy n16 16-bit words, then hold.
__global__ void race_consume(unsigned short* dst, const unsigned short* src, u64 n16, u64 hold_ns) {
    u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n16; i += stride) dst[i] = src[i];
    if (hold_ns) race_hold(hold_ns);
}
__global__ void race_spin(u64 ns) { race_hold(ns); }
}
"#;

pub const NAMES: [&str; 3] = ["race_fill", "race_consume", "race_spin"];
pub const FILL: usize = 0;
pub const CONSUME: usize = 1;
pub const SPIN: usize = 2;
