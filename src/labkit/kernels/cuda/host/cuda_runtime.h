// labkit's CPU stand-in for <cuda_runtime.h> (labkit.cuda_cpp only): everything lives in labkit_cuda_host.h.
#pragma once
#include "labkit_cuda_host.h"
