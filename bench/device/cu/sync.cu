// Planted divergent barrier: only even threads of a warp reach __syncthreads().
#include <cstdio>
__global__ void divergent_barrier(int *out) {
  __shared__ int s[64];
  s[threadIdx.x] = threadIdx.x;
  if (threadIdx.x % 2 == 0) __syncthreads();
  out[threadIdx.x] = s[63 - threadIdx.x];
}
int main() {
  int *out;
  cudaMalloc(&out, 64 * sizeof(int));
  divergent_barrier<<<1, 64>>>(out);
  cudaError_t e = cudaDeviceSynchronize();
  printf("sync: %s\n", cudaGetErrorString(e));
  return e == cudaSuccess ? 0 : 1;
}
