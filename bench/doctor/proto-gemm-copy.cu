#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <stdio.h>
#include <stdlib.h>
int main(){int n=8192;size_t e=(size_t)n*n;__nv_bfloat16*a=(__nv_bfloat16*)malloc(e*2),*b=(__nv_bfloat16*)malloc(e*2);
for(size_t i=0;i<e;i++){unsigned long long x=i*0x9E3779B97F4A7C15ULL;x^=x>>29;x*=0xBF58476D1CE4E5B9ULL;x^=x>>32;a[i]=__float2bfloat16((float)(x%3)-1);x=x*0x94D049BB133111EBULL;x^=x>>31;b[i]=__float2bfloat16((float)(x%3)-1);}
void*A,*B,*C;cudaMalloc(&A,e*2);cudaMalloc(&B,e*2);cudaMalloc(&C,e*4);cudaMemcpy(A,a,e*2,cudaMemcpyHostToDevice);cudaMemcpy(B,b,e*2,cudaMemcpyHostToDevice);
cublasHandle_t h;cublasCreate(&h);float al=1,be=0;
#define G cublasGemmEx(h,CUBLAS_OP_N,CUBLAS_OP_N,n,n,n,&al,A,CUDA_R_16BF,n,B,CUDA_R_16BF,n,&be,C,CUDA_R_32F,n,CUBLAS_COMPUTE_32F,CUBLAS_GEMM_DEFAULT)
for(int i=0;i<5;i++)G;cudaDeviceSynchronize();cudaEvent_t s,t;cudaEventCreate(&s);cudaEventCreate(&t);float ms;
for(int rep=0;rep<3;rep++){cudaEventRecord(s);for(int i=0;i<100;i++)G;cudaEventRecord(t);cudaEventSynchronize(t);cudaEventElapsedTime(&ms,s,t);
printf("status %d tflops %.1f\n",G,2.0*n*n*(double)n*100/(ms/1e3)/1e12);}
float*c=(float*)malloc(e*4);cudaMemcpy(c,C,e*4,cudaMemcpyDeviceToHost);long bad=0;double mx=0;
for(int q=0;q<4096;q++){int r=(q*7919)%n,col=(q*104729)%n;double w=0;for(int k=0;k<n;k++)w+=(double)__bfloat162float(a[r+(size_t)k*n])*__bfloat162float(b[k+(size_t)col*n]);if(c[r+(size_t)col*n]!=w)bad++;if(w>mx)mx=w;}
printf("bad %ld of 4096, max %.0f\n",bad,mx);
void*hp;size_t by=256<<20;cudaMallocHost(&hp,by);for(int d=0;d<2;d++){float best=0;for(int i=0;i<6;i++){cudaEventRecord(s);if(d==0)cudaMemcpy(C,hp,by,cudaMemcpyHostToDevice);else cudaMemcpy(hp,C,by,cudaMemcpyDeviceToHost);cudaEventRecord(t);cudaEventSynchronize(t);cudaEventElapsedTime(&ms,s,t);if(i&&by/ms/1e6>best)best=by/ms/1e6;}printf("copy %s %.1f GB/s\n",d?"d2h":"h2d",best);}}
