"""How a :class:`~phylorl.agent.learner.Learner` sets itself up on a device: the device's index, the compiler
``AgentConfig.compile_networks`` needs, the optimisers' options kept across a loaded state.
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


def require_compiler(device: torch.device) -> None:
    """Fail at once, not at the first update, when inductor lacks its code generator for ``device`` (Triton on
    a GPU, a C++ compiler on a CPU), which ``AgentConfig.compile_networks`` needs."""
    if device.type == "cuda":
        from torch.utils._triton import has_triton

        if not has_triton():
            raise ValueError(
                "AgentConfig.compile_networks needs Triton on a CUDA device (CUDA builds of torch ship it)"
            )
        return
    from torch._inductor import cpp_builder

    try:
        cpp_builder.get_cpp_compiler()
    except Exception as exc:  # inductor's InvalidCxxCompiler, whose module path moves between releases
        raise ValueError(
            f"AgentConfig.compile_networks on the {device.type} needs a C++ compiler (g++ or clang++ "
            f"on PATH, or CXX): {str(exc).splitlines()[0]}"
        ) from None


def keep_options(optimizer: torch.optim.Optimizer, options: dict) -> None:
    """Set ``options`` (``fused``, ``capturable``) again after a loaded state replaced them, with each step
    count where those implementations keep it (float32 on the parameter's device)."""
    for group in optimizer.param_groups:
        group.update(options)
        for param in group["params"]:
            state = optimizer.state.get(param, {})
            if torch.is_tensor(state.get("step")) and (options["fused"] or options["capturable"]):
                state["step"] = state["step"].to(device=param.device, dtype=torch.float32)
