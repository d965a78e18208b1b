// Planted out-of-bounds global write: 256 threads write into a 128-float (512-byte) buffer.
#include <cstdio>
__global__ void oob(float *a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  a[i] = 1.0f * n;  // i >= 128 is out of bounds
}
int main() {
  float *a;
  cudaMalloc(&a, 128 * sizeof(float));
  oob<<<1, 256>>>(a, 128);
  cudaError_t e = cudaDeviceSynchronize();
  printf("oob: %s\n", cudaGetErrorString(e));
  return e == cudaSuccess ? 0 : 1;
}
