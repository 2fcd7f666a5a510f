"""The network tests run tiny tensors: one intra-op thread avoids thread contention on the shared
2-core machine (two threads competing with another process are many times slower)."""

import torch

torch.set_num_threads(1)
