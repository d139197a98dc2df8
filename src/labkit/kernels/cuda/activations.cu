__device__ float leaky(float v, float alpha) { return v > 0.0f ? v : alpha * v; }

extern "C" __global__
void leaky_relu_fwd(const float* x, float* y, float alpha, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        y[i] = leaky(x[i], alpha);
}

extern "C" __global__
void leaky_relu_bwd(const float* x, const float* dy, float* dx, float alpha, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        dx[i] = x[i] > 0.0f ? dy[i] : alpha * dy[i];
}
