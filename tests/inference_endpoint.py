"""A real inference endpoint for tests: batching and gRPC on loopback, serving a new learner's weights."""

from __future__ import annotations


def start_inference(
    cfg,
    version: int = 1,
    max_batch: int = 8,
    max_delay_s: float = 0.001,
    max_queue: int = 64,
    security=None,
    max_calls: int = 64,
):
    """A real inference endpoint (``services.learner``: batching + gRPC on loopback) serving a new learner's
    weights for network config ``cfg``: ``(server, inference, "host:port")``; the caller stops both."""
    import torch

    from phylorl.agent.learner import Learner
    from services.learner.inference import BatchingInference
    from services.learner.server import InferenceServer

    learner = Learner(cfg, device="cpu", seed=0)
    inference = BatchingInference(
        cfg, torch.device("cpu"), max_batch=max_batch, max_delay_s=max_delay_s, max_queue=max_queue
    )
    inference.publish(learner.policy_weights(), learner.alpha, version)
    server = InferenceServer(inference, "127.0.0.1", 0, max_calls=max_calls, security=security)
    server.start()
    server.set_serving()
    return server, inference, f"127.0.0.1:{server.port}"
