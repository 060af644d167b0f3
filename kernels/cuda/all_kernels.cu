// Every CUDA reference kernel in one translation unit: the code object that
// reference.axe packs for each CUDA target (an .axe holds one code object
// per target, kernels/README.md "reference.axe").
#include "attention.cu"
#include "eltwise.cu"
#include "matmul.cu"
#include "quant.cu"
#include "rows.cu"
#include "select.cu"
