"""gRPC settings every service and client shares."""

from __future__ import annotations

MAX_MESSAGE_BYTES = 256 * 1024 * 1024
"""Largest gRPC message sent or received (a batch of sampled records or of observations can be large)."""


def message_options(max_bytes: int = MAX_MESSAGE_BYTES) -> list[tuple[str, int]]:
    """Channel and server options that allow messages of up to ``max_bytes`` both ways."""
    return [("grpc.max_receive_message_length", max_bytes), ("grpc.max_send_message_length", max_bytes)]
