#pragma once
// The CUDA backend in one include: kernels, device arena and graph runner.

#include <fusedsl/backend/cuda/attention.cuh>
#include <fusedsl/backend/cuda/device_arena.hpp>
#include <fusedsl/backend/cuda/elementwise.cuh>
#include <fusedsl/backend/cuda/epilogue.cuh>
#include <fusedsl/backend/cuda/error.hpp>
#include <fusedsl/backend/cuda/gemm.cuh>
#include <fusedsl/backend/cuda/graph_runner.hpp>
#include <fusedsl/backend/cuda/numeric.cuh>
#include <fusedsl/backend/cuda/row_kernels.cuh>
