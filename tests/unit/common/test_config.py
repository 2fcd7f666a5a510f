"""The one config loader: nested sections from files, environment variables and flags, documented once."""

from __future__ import annotations

import json

import pytest

from services.common.config import build, field_docs, write_config
from services.launcher.cli import build_config, build_parser
from services.launcher.config import TrainConfig
from services.learner.config import LearnerConfig
from services.learner.config import load as load_learner


def test_sections_come_from_files_environment_and_flags_later_ones_winning(tmp_path):
    path = tmp_path / "learner.yaml"
    path.write_text("batch_size: 8\nagent: {lr: 0.001, tau: 0.02}\nnet: {hidden: 32, heads: 2}\n")
    config = load_learner(
        ["--config", str(path), "--agent.lr", "0.002", "--net.dropout", "0.1"],
        {"PHYLORL_LEARNER_AGENT__TAU": "0.05", "PHYLORL_LEARNER_NET__HIDDEN": "48"},
    )
    assert (config.batch_size, config.agent.lr, config.agent.tau) == (8, 0.002, 0.05)
    assert (config.net.hidden, config.net.heads, config.net.dropout) == (48, 2, 0.1)
    assert config.net.features == "rich" and config.agent.demo_weight == 1.0  # the section defaults stay
    # fields the old flat config could not reach in a distributed run
    assert (
        load_learner(["--agent.max-grad-norm", "none", "--agent.alpha-lr", "1e-3"], {}).agent.max_grad_norm
        is None
    )


def test_a_written_config_reads_back_equal(tmp_path):
    config = load_learner(["--net.features", "basic", "--agent.lr", "1e-4"], {})
    assert (config.net.node_features, config.net.action_meta) == (1, 3)  # sizes follow the feature set
    assert load_learner(["--config", str(write_config(config, tmp_path / "c.json"))], {}) == config


@pytest.mark.parametrize(
    "argv, environ, message",
    [
        (["--agent.lr", "fast"], {}, "agent.lr expects float"),
        ([], {"PHYLORL_LEARNER_AGENT__LEARNING_RATE": "1"}, "unknown environment variable"),
        (["--net.hidden", "30", "--net.heads", "4"], {}, "divisible"),
        (
            ["--agent.entropy-networks", "both"],
            {},
            r"agent.entropy_networks must be one of \['online', 'target'\]",
        ),
    ],
)
def test_bad_values_are_named(argv, environ, message):
    with pytest.raises(ValueError, match=message):
        load_learner(argv, environ)


def test_an_unknown_field_of_a_section_is_named(tmp_path):
    with pytest.raises(ValueError, match=r"unknown config field agent.lrate"):
        build(LearnerConfig, {"agent": {"lrate": 1}})


def test_every_field_is_documented_once_and_listed_by_help():
    for cls in (TrainConfig, LearnerConfig):
        docs = field_docs(cls)
        assert all(docs.get(f) for f in cls.__dataclass_fields__), [
            f for f in cls.__dataclass_fields__ if not docs.get(f)
        ]
    core, text = build_parser().format_help(), build_parser(advanced=True).format_help()
    assert "--hidden" in core and "--learner.agent.lr" not in core and "--help --advanced" in core
    assert "--learner.agent.lr" in text and "Adam learning rate of the Q networks" in text
    assert "--actor.env.local-depth" in text and "PHYLORL_TRAIN_ACTOR__ENV__LOCAL_DEPTH" in text
    assert "--replay.port" not in text and "--actor.spool-dir" not in text  # the launcher's own
    # unlisted
    assert build_parser().parse_args(["--learner.agent.lr", "0.1"]).__dict__["learner.agent.lr"] == "0.1"


def test_train_short_fields_set_their_sections_and_the_launcher_fields_are_refused(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text(
        json.dumps({"hidden": 32, "learner": {"agent": {"lr": 1e-4}}, "actor": {"send_batch": 4}})
    )
    args = build_parser().parse_args(
        [
            "--config",
            str(path),
            "--horizon",
            "7",
            "--features",
            "basic",
            "--alignments",
            "a",
            "b",
            "--alignments",
            "c",
            "--secure",
            "--prometheus",
        ]
    )
    config = build_config(args, {"PHYLORL_TRAIN_REPLAY__CAPACITY": "900"})
    replay, learner, actor = config.sections()
    assert (learner.net.hidden, learner.net.head_hidden, learner.agent.lr, learner.net.features) == (
        32,
        32,
        1e-4,
        "basic",
    )
    assert (actor.env.horizon, actor.env.features, actor.send_batch) == (7, "basic", 4)
    assert (replay.capacity, replay.min_size_to_sample) == (900, 128)
    assert config.alignments == "a,b,c" and config.secure and config.prometheus == 9090
    with pytest.raises(ValueError, match="replay.port is set by the launcher"):
        build_config(build_parser().parse_args([]), {"PHYLORL_TRAIN_REPLAY__PORT": "1"})
    with pytest.raises(ValueError, match="must be the same feature set"):
        TrainConfig(
            actor=TrainConfig().actor.__class__(env=TrainConfig().actor.env.__class__(features="basic"))
        )
