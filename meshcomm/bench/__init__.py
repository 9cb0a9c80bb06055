"""`meshcomm bench`: nccl-tests-style collective benchmarks, for meshcomm and, side by side, torch's gloo and MPICH."""
