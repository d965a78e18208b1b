#include <cuda.h>
#include <stdio.h>
#include <time.h>
int main(){cuInit(0);CUdevice d;cuDeviceGet(&d,0);CUcontext c;cuDevicePrimaryCtxRetain(&c,d);cuCtxSetCurrent(c);
FILE*f=fopen("mt.ptx","r");char b[8192];size_t n=fread(b,1,8191,f);b[n]=0;
CUmodule m;printf("load %d\n",cuModuleLoadData(&m,b));CUfunction F,K;cuModuleGetFunction(&F,m,"mt_fill");cuModuleGetFunction(&K,m,"mt_check");
size_t fr,t;cuMemGetInfo(&fr,&t);size_t by=(fr/2)&~((size_t)0x1fffff);CUdeviceptr p,cnt;printf("alloc %d\n",cuMemAlloc(&p,by));cuMemAlloc(&cnt,16);
unsigned long long w=by/4;unsigned pats[6]={0,~0u,0xAAAAAAAA,0x55555555,0,~0u},mul[6]={0,0,0,0,0x9E3779B1,0x9E3779B1};
struct timespec t0,t1;clock_gettime(CLOCK_MONOTONIC,&t0);
for(int i=0;i<7;i++){int k=i%6;unsigned pt=pats[k],mu=mul[k];void*a[]={&p,&w,&pt,&mu};cuLaunchKernel(F,132*8,1,1,256,1,1,0,0,a,0);
if(i==6)cuMemsetD32(p+4000,0xDEADBEEF,1);
cuMemsetD32(cnt,0,2);cuMemsetD32(cnt+8,~0u,2);CUdeviceptr c1=cnt,c2=cnt+8;void*a2[]={&p,&w,&pt,&mu,&c1,&c2};
cuLaunchKernel(K,132*8,1,1,256,1,1,0,0,a2,0);int e=cuCtxSynchronize();unsigned long long h[2];cuMemcpyDtoH(h,cnt,16);printf("pat %d err %d bad %llu first %llu\n",i,e,h[0],h[1]);}
clock_gettime(CLOCK_MONOTONIC,&t1);printf("bytes %zu secs %.3f\n",by,(t1.tv_sec-t0.tv_sec)+(t1.tv_nsec-t0.tv_nsec)/1e9);}
