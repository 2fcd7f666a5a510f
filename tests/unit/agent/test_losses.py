import math

import pytest
import torch
from torch import nn

from phylorl.agent.losses import (
    alpha_loss,
    critic_loss,
    demonstration_loss,
    policy_entropy,
    soft_update,
    soft_value,
    target_entropy,
    td_target,
)
from phylorl.nets.segment import segments_from_sizes

# two states with 2 and 3 actions; with alpha = 0.5, Q / alpha = [log 3, log 5 | 0, 0, log 2]
ALPHA = 0.5
Q = torch.tensor([0.5 * math.log(3), 0.5 * math.log(5), 0.0, 0.0, 0.5 * math.log(2)])
STATES = segments_from_sizes(torch.tensor([2, 3]))


def test_soft_value_by_hand():
    # V = alpha * log sum exp(Q / alpha) = 0.5 log(3 + 5), 0.5 log(1 + 1 + 2)
    assert soft_value(Q, STATES, ALPHA).tolist() == pytest.approx([0.5 * math.log(8), 0.5 * math.log(4)])
    uniform = segments_from_sizes(torch.tensor([2, 2]), size=2)
    assert soft_value(Q[:4], uniform, ALPHA).tolist() == pytest.approx([0.5 * math.log(8), 0.5 * math.log(2)])


def test_soft_value_tends_to_max_as_alpha_falls():
    assert soft_value(Q, STATES, 1e-4).tolist() == pytest.approx(
        [0.5 * math.log(5), 0.5 * math.log(2)], abs=1e-3
    )


def test_policy_entropy_by_hand():
    # pi = [3/8, 5/8] and [1/4, 1/4, 1/2]
    h1 = -(3 / 8 * math.log(3 / 8) + 5 / 8 * math.log(5 / 8))
    h2 = -(2 * 0.25 * math.log(0.25) + 0.5 * math.log(0.5))
    assert policy_entropy(Q, STATES, ALPHA).tolist() == pytest.approx([h1, h2])
    assert target_entropy(STATES, 0.5).tolist() == pytest.approx([0.5 * math.log(2), 0.5 * math.log(3)])


def test_td_target_bootstraps_through_truncation_not_terminal():
    reward = torch.tensor([1.0, 1.0, 1.0])
    discount = torch.tensor([0.9, 0.9, 0.81])
    terminal = torch.tensor([False, True, False])  # the first is a truncated (time-limit) step
    v = torch.tensor([2.0, float("-inf"), 2.0])  # a terminal state without actions has V = -inf
    assert td_target(reward, discount, terminal, v).tolist() == pytest.approx(
        [1 + 0.9 * 2, 1.0, 1 + 0.81 * 2]
    )


def test_critic_loss_weights_and_priorities():
    q1 = torch.tensor([1.0, 2.0, 0.0], requires_grad=True)
    q2 = torch.tensor([0.0, 3.0, 1.0], requires_grad=True)
    y = torch.tensor([1.5, 2.0, -1.0])
    w = torch.tensor([1.0, 0.5, 2.0])
    loss, extra = critic_loss(q1, q2, y, w)
    # td1 = [0.5, 0, -1], td2 = [1.5, -1, -2]
    assert extra["priorities"].tolist() == pytest.approx([2.0, 1.0, 3.0])
    assert extra["loss1"].item() == pytest.approx((0.25 + 0 + 2 * 1) / 3)
    assert extra["loss2"].item() == pytest.approx((2.25 + 0.5 * 1 + 2 * 4) / 3)
    assert loss.item() == pytest.approx(extra["loss1"].item() + extra["loss2"].item())
    loss.backward()
    assert q1.grad.tolist() == pytest.approx([-2 * 0.5 / 3, 0.0, 2 * 2 * 1 / 3])


@pytest.mark.parametrize("entropy, direction", [(3.0, -1), (0.5, +1)])
def test_alpha_moves_toward_target_entropy(entropy, direction):
    """Policy more random than the target: alpha falls; less random: alpha rises."""
    log_alpha = nn.Parameter(torch.tensor(0.0))
    opt = torch.optim.SGD([log_alpha], lr=0.1)
    loss = alpha_loss(log_alpha, torch.tensor([entropy, entropy]), torch.tensor([1.0, 1.0]))
    loss.backward()
    opt.step()
    assert math.copysign(1, log_alpha.item()) == direction
    assert log_alpha.item() == pytest.approx(-0.1 * (entropy - 1.0))


def test_soft_update_formula():
    torch.manual_seed(0)
    online, target = nn.Linear(3, 2), nn.Linear(3, 2)
    before = [p.detach().clone() for p in target.parameters()]
    soft_update(target, online, tau=0.1)
    for t, b, o in zip(target.parameters(), before, online.parameters()):
        torch.testing.assert_close(t, 0.1 * o + 0.9 * b, rtol=1e-6, atol=1e-7)
    soft_update(target, online, tau=1.0)
    for t, o in zip(target.parameters(), online.parameters()):
        torch.testing.assert_close(t, o)


def test_demonstration_loss_by_hand_and_ignores_unlabelled_states():
    q = torch.tensor([0.1, 0.5, -0.2, 0.3, 0.0, 0.9], requires_grad=True)
    labels = torch.tensor([0.0, 1.0, -1.0, 0.2, 0.4, 0.0])
    states = segments_from_sizes(torch.tensor([3, 1, 2]))
    labelled = torch.tensor([True, False, True])
    t, w = 0.5, 2.0
    loss, mse, ce = demonstration_loss(q, labels, states, labelled, t, w)
    rows = [(0, 3), (4, 6)]  # the labelled states' moves
    sq = sum(((q[a:b] - labels[a:b]) ** 2).sum() for a, b in rows) / 5
    ces = (
        sum(-(torch.softmax(labels[a:b] / t, 0) * torch.log_softmax(q[a:b] / t, 0)).sum() for a, b in rows)
        / 2
    )
    assert float(mse) == pytest.approx(float(sq), rel=1e-6) and float(ce) == pytest.approx(
        float(ces), rel=1e-6
    )
    assert float(loss) == pytest.approx(float(sq + w * ces), rel=1e-6)
    loss.backward()
    assert float(q.grad[3]) == 0.0  # the unlabelled state's move gets no gradient
    none, _, _ = demonstration_loss(q, labels, states, torch.zeros(3, dtype=torch.bool), t, w)
    assert float(none) == 0.0
