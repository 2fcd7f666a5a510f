"""Run the learner: ``python -m services.learner --replay-address H:P --run-dir DIR``.

Start-up: read the config (flags, ``PHYLORL_LEARNER_*``, file; logged as JSON), restore the latest checkpoint
of the run directory (or start fresh), open the inference endpoint (health NOT_SERVING), publish the weights,
then report SERVING and train until ``--updates`` or SIGTERM/SIGINT, which write a final checkpoint, drain the
endpoint and exit 0.
"""

from __future__ import annotations

import logging
import sys

import torch

from phylorl.agent.learner import Learner
from services.common.memory import keep_freed_memory
from services.common.runtime import connect_redis, start_service
from services.learner import metrics
from services.learner.config import PROG, SWITCH_INTERVAL_MS, LearnerConfig, load
from services.learner.inference import BatchingInference
from services.learner.server import InferenceServer
from services.learner.training import Checkpoints, TrainingLoop, continue_published_version
from services.replay.client import ReplayClient

log = logging.getLogger("phylorl.learner")


def pick_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {name} asked for, but torch sees no CUDA device")
    return device


def build_learner(config: LearnerConfig, device: torch.device, checkpoints: Checkpoints) -> Learner:
    latest = checkpoints.latest() if config.resume else None
    if latest is not None:
        learner = Learner.restore(latest, device)
        log.info("resumed from %s at version %d", latest, learner.weights_version)
        return learner
    if config.init_checkpoint:
        learner = Learner.warm_start(config.init_checkpoint, config.agent, device, seed=config.seed)
        if learner.net_cfg.features != config.net.features:
            raise ValueError(
                f"init_checkpoint {config.init_checkpoint} reads {learner.net_cfg.features!r} "
                f"observations, this run's actors send {config.net.features!r}"
            )
        log.info("warm start from %s (network %s)", config.init_checkpoint, learner.net_cfg)
        return learner
    return Learner(config.net, config.agent, device, seed=config.seed)


def main(argv: list[str] | None = None) -> int:
    config, stop = start_service(PROG, load, argv, log)
    if config.torch_threads:
        torch.set_num_threads(config.torch_threads)
    keep_freed_memory()
    device = pick_device(config.device)
    # the threads' hand-overs of the lock
    sys.setswitchinterval(SWITCH_INTERVAL_MS.get(device.type, 5.0) / 1000.0)
    log.info("interpreter switch interval %.3g ms", sys.getswitchinterval() * 1000.0)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = config.tf32
    checkpoints = Checkpoints(config.run_dir, config.keep_checkpoints)
    learner = build_learner(config, device, checkpoints)
    metrics.WEIGHTS_VERSION.set(learner.weights_version)
    log.info("learner on %s, weights version %d", device, learner.weights_version)
    inference = BatchingInference(
        learner.net_cfg,
        device,
        max_batch=config.inference_max_batch,
        max_delay_s=config.inference_max_delay_ms / 1000.0,
        max_queue=config.inference_queue,
        seed=config.seed,
        fused_head=learner.agent_cfg.fused_head,
        cuda_graphs=config.inference_cuda_graphs and device.type == "cuda",
    )
    server = InferenceServer(inference, config.host, config.port, security=config)
    server.start()
    log.info("inference endpoint on %s:%d", config.host, server.port)
    redis_client = None
    if config.redis_url:
        redis_client = connect_redis(config, stop, log)
        if redis_client is None:  # stopped while waiting for Redis
            server.stop(0)
            inference.close()
            return 0
        # a restart resumes from its last checkpoint, maybe older than what was served
        continue_published_version(learner, redis_client, config.weights_key)
    replay = ReplayClient(config.replay_address, security=config)
    loop = TrainingLoop(config, learner, replay, inference, redis_client, checkpoints, stop)
    loop.publish()
    server.set_serving()
    what = "serving inference with weights version %d; training from %s"
    log.info(what, learner.weights_version, config.replay_address)
    try:
        loop.run()
    finally:
        server.stop(config.grace_s)
        inference.close()
        replay.close()
    log.info("stopped after %d updates (weights version %d)", loop.updates_done, learner.weights_version)
    return 0


if __name__ == "__main__":
    sys.exit(main())
