"""Replay config: defaults < file < environment < flags, conversions and validation."""

import json

import pytest

from services.replay.config import ReplayConfig, config_json, load_config


def test_defaults():
    config = load_config([], {})
    assert config == ReplayConfig()
    assert config.port == 50051 and config.capacity == 100_000


def test_precedence_file_env_flags(tmp_path):
    path = tmp_path / "replay.yaml"
    path.write_text("capacity: 5000\nalpha: 0.9\nbeta: 0.7\nkey_prefix: from-file\n")
    environ = {
        "PHYLORL_REPLAY_CONFIG": str(path),
        "PHYLORL_REPLAY_ALPHA": "0.3",
        "PHYLORL_REPLAY_BETA": "1",
        "OTHER_VARIABLE": "ignored",
    }
    config = load_config(["--beta", "0.2", "--redis-url", "redis://r:6379/1"], environ)
    assert (config.capacity, config.alpha, config.beta, config.key_prefix, config.redis_url) == (
        5000,
        0.3,
        0.2,
        "from-file",
        "redis://r:6379/1",
    )
    assert isinstance(config.alpha, float) and isinstance(config.capacity, int)


def test_json_file_via_flag(tmp_path):
    path = tmp_path / "replay.json"
    path.write_text(json.dumps({"samples_per_insert": 4, "error_buffer": 64, "min_size_to_sample": 10}))
    config = load_config(["--config", str(path)], {})
    assert (config.samples_per_insert, config.error_buffer, config.min_size_to_sample) == (4.0, 64.0, 10)
    assert json.loads(config_json(config))["samples_per_insert"] == 4.0


def test_config_is_frozen():
    with pytest.raises(AttributeError):
        ReplayConfig().capacity = 3


@pytest.mark.parametrize(
    "argv, environ, message",
    [
        (["--capacity", "ten"], {}, "capacity expects int, got 'ten'"),
        ([], {"PHYLORL_REPLAY_CAPACTIY": "5"}, "unknown environment variable PHYLORL_REPLAY_CAPACTIY"),
        (
            ["--capacity", "10", "--min-size-to-sample", "20"],
            {},
            "min_size_to_sample must lie in 1..capacity=10",
        ),
        (["--samples-per-insert", "2", "--error-buffer", "0"], {}, "error_buffer must be > 0"),
        (["--alpha", "-1"], {}, "alpha and beta must be >= 0"),
        (["--port", "70000"], {}, "ports must lie in 0..65535"),
    ],
)
def test_bad_values_name_the_field(argv, environ, message):
    with pytest.raises(ValueError, match=message):
        load_config(argv, environ)


def test_unknown_file_field(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("capacity: 5\ncapasity: 6\n")
    with pytest.raises(ValueError, match=r"unknown config field capasity"):
        load_config(["--config", str(path)], {})


def test_malloc_tuning_is_applied_on_glibc_and_optional():
    import platform

    from services.common.memory import keep_freed_memory

    assert keep_freed_memory(0) is False
    if platform.system() == "Linux" and platform.libc_ver()[0] == "glibc":
        assert keep_freed_memory(64) is True
