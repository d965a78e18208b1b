// Planted read of uninitialised global memory: cudaMalloc'd, never written, then read.
#include <cstdio>
__global__ void read_uninit(const float *in, float *out) {
  int i = threadIdx.x;
  out[i] = in[i] * 2.0f;
}
int main() {
  float *in, *out;
  cudaMalloc(&in, 64 * sizeof(float));
  cudaMalloc(&out, 64 * sizeof(float));
  cudaMemset(out, 0, 64 * sizeof(float));
  read_uninit<<<1, 64>>>(in, out);
  cudaError_t e = cudaDeviceSynchronize();
  printf("init: %s\n", cudaGetErrorString(e));
  return e == cudaSuccess ? 0 : 1;
}
