"""gRPC settings every service and client shares."""

from __future__ import annotations

import grpc
from google.protobuf import message_factory
from google.protobuf.message import DecodeError

MAX_MESSAGE_BYTES = 256 * 1024 * 1024
"""Largest gRPC message sent or received (a batch of sampled records or of observations can be large)."""


def message_options(max_bytes: int = MAX_MESSAGE_BYTES) -> list[tuple[str, int]]:
    """Channel and server options that allow messages of up to ``max_bytes`` both ways."""
    return [("grpc.max_receive_message_length", max_bytes), ("grpc.max_send_message_length", max_bytes)]


def add_servicer(servicer, server, service) -> None:
    """Serve ``servicer``'s unary methods of ``service`` (a protobuf ``ServiceDescriptor``) on ``server``, as
    the generated ``add_*Servicer_to_server`` does, except that a request whose bytes are not a message of its
    type is answered INVALID_ARGUMENT naming the type (gRPC's own deserializer answers INTERNAL)."""
    handlers = {}
    for method in service.methods:
        response_type = message_factory.GetMessageClass(method.output_type)
        handlers[method.name] = grpc.unary_unary_rpc_method_handler(
            _parsing(getattr(servicer, method.name), message_factory.GetMessageClass(method.input_type)),
            response_serializer=response_type.SerializeToString,
        )
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service.full_name, handlers),))


def _parsing(method, message_type):
    """``method`` called with the request its bytes hold."""

    def call(data: bytes, context):
        try:
            request = message_type.FromString(data)
        except DecodeError as exc:
            context.abort(
                grpc.StatusCode.INVALID_ARGUMENT, f"not a {message_type.DESCRIPTOR.full_name} message ({exc})"
            )
        return method(request, context)

    return call
