// The grader's CUDA-on-CPU layer stands in for the CUDA header of this name.
#pragma once
#include "../cudacpu.h"
