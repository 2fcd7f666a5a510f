"""An update's values and priorities reach the host in one compiled call and are read there with numpy."""

from __future__ import annotations

import numpy as np
import torch

from phylorl.agent.update_results import _gathered, split, to_host


def test_values_and_priorities_come_back_as_one_host_tensor_and_split():
    values = torch.tensor([0.5, -1.25, 3.0, 1.0])
    priorities = torch.tensor([0.1, 2.0, 7.5], dtype=torch.float64)  # cast to the values' dtype
    both = to_host(values, priorities)
    assert both.device.type == "cpu" and both.dtype == torch.float32 and both.shape == (7,)
    host, prios = split(both, 4)
    assert host == [0.5, -1.25, 3.0, 1.0]
    assert prios.dtype == np.float32 and np.array_equal(prios, np.array([0.1, 2.0, 7.5], np.float32))
    assert isinstance(_gathered(), torch.jit.ScriptFunction)  # one call, not five
    kept = _gathered()(values, priorities, False)[1]  # the arguments kept to the end (phylorl/nets/one_call.py)
    assert [t.data_ptr() for t in kept] == [values.data_ptr(), priorities.data_ptr()]
