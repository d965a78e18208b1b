// Planted shared-memory race: every thread writes s[0] and thread 0 reads it with no barrier.
#include <cstdio>
__global__ void shared_race(int *out) {
  __shared__ int s[32];
  s[threadIdx.x % 32] = threadIdx.x;   // warps of one block write the same words
  if (threadIdx.x == 0) out[0] = s[31];  // read without __syncthreads()
}
int main() {
  int *out;
  cudaMalloc(&out, sizeof(int));
  shared_race<<<1, 256>>>(out);
  cudaError_t e = cudaDeviceSynchronize();
  printf("race: %s\n", cudaGetErrorString(e));
  return e == cudaSuccess ? 0 : 1;
}
