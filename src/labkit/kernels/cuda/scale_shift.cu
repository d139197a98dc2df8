extern "C" __global__
void scale_shift(const float* x, float* y, float a, float b, long long n)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long stride = (long long)blockDim.x * gridDim.x;
    for (; i < n; i += stride)
        y[i] = a * x[i] + b;
}
