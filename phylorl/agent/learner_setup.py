"""How a :class:`~phylorl.agent.learner.Learner` sets itself up on a device: the device's index and the
optimisers' options kept across a loaded state.
"""

from __future__ import annotations

import torch


def with_index(device: torch.device) -> torch.device:
    """``device`` with its index (``cuda`` -> ``cuda:0``, the current one), as a tensor's device names it:
    ``torch.device("cuda") != torch.device("cuda:0")``, and :meth:`Learner.step` would move every batch
    already on the GPU again."""
    if device.type == "cuda" and device.index is None:
        return torch.device("cuda", torch.cuda.current_device())
    return device


def keep_options(optimizer: torch.optim.Optimizer, options: dict) -> None:
    """Set ``options`` (``fused``, ``capturable``) again after a loaded state replaced them, with each step
    count where those implementations keep it (float32 on the parameter's device)."""
    for group in optimizer.param_groups:
        group.update(options)
        for param in group["params"]:
            state = optimizer.state.get(param, {})
            if torch.is_tensor(state.get("step")) and (options["fused"] or options["capturable"]):
                state["step"] = state["step"].to(device=param.device, dtype=torch.float32)
