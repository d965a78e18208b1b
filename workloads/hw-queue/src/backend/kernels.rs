//! The kernels, compiled at run time with NVRTC (HIP: hipRTC; the source is plain CUDA C with
//! one PTX `asm` per backend-specific timer, see docs/hw-queue.md).

/// `%globaltimer` is the GPU's nanosecond wall clock, comparable across SMs and kernels, so
/// stamps of different streams share one time base.
pub const SOURCE: &str = r#"
typedef unsigned long long u64;

extern "C" {

__device__ __forceinline__ u64 hwq_now() {
    u64 t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__device__ __forceinline__ void hwq_stamp(u64* s, u64 t0, u64 t1) {
    if (s) {
        atomicMin(s, t0);
        atomicMax(s + 1, t1);
    }
}

// Every thread waits until `ns` after the block's start, so the block holds its SM slot.
__global__ void hwq_spin(u64 ns, u64* stamp) {
    __shared__ u64 t0;
    if (threadIdx.x == 0) t0 = hwq_now();
    __syncthreads();
    const u64 end = t0 + ns;
    while (hwq_now() < end) { }
    __syncthreads();
    if (threadIdx.x == 0) hwq_stamp(stamp, t0, hwq_now());
}

// Same, counting SM clock cycles (calibrated against globaltimer by the host).
__global__ void hwq_spin_clk(long long cycles, u64* stamp) {
    __shared__ u64 t0;
    if (threadIdx.x == 0) t0 = hwq_now();
    __syncthreads();
    const long long c0 = clock64();
    while (clock64() - c0 < cycles) { }
    __syncthreads();
    if (threadIdx.x == 0) hwq_stamp(stamp, t0, hwq_now());
}

// One block: x = 2x + 1, then tell the host through mapped memory.
__global__ void hwq_tiny(float* data, unsigned int n, u64* stamp, volatile u64* flag, u64 seq) {
    const u64 t0 = hwq_now();
    for (unsigned int i = threadIdx.x; i < n; i += blockDim.x) data[i] = data[i] * 2.0f + 1.0f;
    __syncthreads();
    if (threadIdx.x == 0) {
        hwq_stamp(stamp, t0, hwq_now());
        if (flag) {
            __threadfence_system();
            *flag = seq;
        }
    }
}

__global__ void hwq_empty() { }

__device__ __forceinline__ float hwq_rand(u64 i, unsigned int seed) {
    unsigned int h = (unsigned int)(i * 2654435761ull) ^ seed;
    h ^= h >> 13; h *= 0x5bd1e995u; h ^= h >> 15;
    return ((float)(h & 0xffff) / 65536.0f - 0.5f) * 0.02f;
}

__global__ void hwq_fill_f32(float* p, u64 n, unsigned int seed) {
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x)
        p[i] = hwq_rand(i, seed);
}

// bf16: the high half of the float; f16: cvt.rn.f16.f32.
__global__ void hwq_fill_u16(unsigned short* p, u64 n, unsigned int seed, int bf16) {
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
        float x = hwq_rand(i, seed);
        unsigned short h;
        if (bf16) {
            h = (unsigned short)(__float_as_uint(x) >> 16);
        } else {
            asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(x));
        }
        p[i] = h;
    }
}

}
"#;

pub const NAMES: [&str; 6] = [
    "hwq_spin",
    "hwq_spin_clk",
    "hwq_tiny",
    "hwq_empty",
    "hwq_fill_f32",
    "hwq_fill_u16",
];

/// The NVRTC `--gpu-architecture` for a compute capability (None: NVRTC's default).
pub fn arch_for(major: i32, minor: i32) -> Option<&'static str> {
    Some(match (major, minor) {
        (7, 5) => "compute_75",
        (8, 0) => "compute_80",
        (8, 6) => "compute_86",
        (8, 7) => "compute_87",
        (8, 9) => "compute_89",
        (9, 0) => "compute_90",
        (10, 0) => "compute_100",
        (10, 3) => "compute_103",
        (11, 0) => "compute_110",
        (12, 0) => "compute_120",
        (12, 1) => "compute_121",
        _ => return None,
    })
}
