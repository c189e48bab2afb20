#!/usr/bin/env python3
"""Writes python_tiny.safetensors with Python's `safetensors` package (safetensors.torch), the
file tests/io/safetensors_python_test.cpp reads. Run in the model venv made by
`scripts/setup-model-venv --reference` (torch for BF16, which numpy lacks):

    .venv-models/bin/python tests/io/data/make_python_safetensors.py tests/io/data

The values follow simple formulas that the C++ test computes again.
"""
import pathlib
import sys

import safetensors
import torch
from safetensors.torch import save_file


def main() -> None:
    out = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    # i * 0.25 - 1 for i in 0..n: exact in f32, f16 and bf16.
    ramp = lambda n: torch.arange(n, dtype=torch.float32) * 0.25 - 1
    thirds = torch.tensor([1 / 3, -2 / 3, 65504.0, 1e-7, -0.0, float("inf")], dtype=torch.float32)
    tensors = {
        "encoder.layer.0.weight": ramp(12).reshape(3, 4),
        "encoder.layer.0.bias": ramp(4),
        "f16.ramp": ramp(8).reshape(2, 2, 2).to(torch.float16),
        "f16.rounded": thirds.to(torch.float16),
        "bf16.ramp": ramp(6).reshape(3, 2).to(torch.bfloat16),
        "bf16.rounded": thirds.to(torch.bfloat16),
        "ids.i64": torch.tensor([0, -1, 2**40, -(2**62)], dtype=torch.int64),
        "ids.i32": torch.tensor([[7, -8], [9, 2**31 - 1]], dtype=torch.int32),
        "mask.bool": torch.tensor([True, False, True]),
        "bytes.u8": torch.tensor([0, 1, 128, 255], dtype=torch.uint8),
        "scalar": torch.tensor(2.5, dtype=torch.float32),
        "empty": torch.zeros((0, 3), dtype=torch.float32),
    }
    path = out / "python_tiny.safetensors"
    save_file(tensors, str(path), metadata={"format": "pt", "writer": "safetensors " + safetensors.__version__})
    print(f"wrote {path} ({path.stat().st_size} bytes) with safetensors {safetensors.__version__}, "
          f"torch {torch.__version__}")


if __name__ == "__main__":
    main()
