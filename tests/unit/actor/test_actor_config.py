"""Actor config: the environment's start trees an actor can draw, and the checks that name what is wrong."""

import pytest

from phylorl.env.config import EnvConfig
from services.actor.config import ActorConfig, load


@pytest.mark.parametrize("start", ["random", "nj", "parsimony"])
def test_an_actor_starts_episodes_from_drawn_trees(start):
    assert ActorConfig(env=EnvConfig(start=start)).env.start == start


def test_a_given_start_and_bad_values_are_named_together():
    with pytest.raises(ValueError) as error:
        ActorConfig(env=EnvConfig(start="given"), n_step=0, gamma=1.5)
    message = str(error.value)
    assert message.startswith("invalid actor config: ")
    assert all(part in message for part in ("n_step must be >= 1", "gamma must lie in [0, 1]", "env.start"))


def test_alignments_are_required():
    with pytest.raises(ValueError, match="alignments is required"):
        load([], {})
