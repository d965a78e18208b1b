// A correct workload: saxpy over 1M floats, several launches, checked on the host.
#include <cstdio>
#include <vector>
__global__ void saxpy(float a, const float *x, float *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
__global__ void fill(float *p, float v, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = v;
}
int main() {
  const int n = 1 << 20;
  float *x, *y;
  cudaMalloc(&x, n * sizeof(float));
  cudaMalloc(&y, n * sizeof(float));
  fill<<<(n + 255) / 256, 256>>>(x, 1.0f, n);
  fill<<<(n + 255) / 256, 256>>>(y, 2.0f, n);
  for (int k = 0; k < 10; k++) saxpy<<<(n + 255) / 256, 256>>>(2.0f, x, y, n);
  std::vector<float> h(n);
  cudaMemcpy(h.data(), y, n * sizeof(float), cudaMemcpyDeviceToHost);
  int bad = 0;
  for (int i = 0; i < n; i++) bad += h[i] != 22.0f;
  printf("clean: %d wrong\n", bad);
  return bad == 0 ? 0 : 1;
}
