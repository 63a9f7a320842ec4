"""The reference grokking workload behind `tuimon train`, the only part of tuimon using torch.

Import `tuimon.workload.train` (or `.model`, `.data`) explicitly; this package itself stays
import-free so that the monitor process never pulls in torch by accident.
"""
