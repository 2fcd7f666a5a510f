"""TLS, the shared gRPC token and Redis authentication, for every service and client.

Each service config inherits the fields it needs (:class:`ServerTLS`, :class:`ClientTLS`, :class:`GrpcToken`,
:class:`RedisAuth`), set like any other field. Secrets are read from the files those fields name, or from
``PHYLORL_GRPC_TOKEN`` / ``PHYLORL_REDIS_PASSWORD`` when no file is given: a config holds only file names, so
logging a config never logs a secret. A server with ``tls_cert_file`` and ``tls_key_file`` listens with TLS
only; a client with ``tls_ca_file`` checks the server's certificate against that CA. With a token, a server
answers ``UNAUTHENTICATED`` to every call (health checks included) that does not carry ``authorization: Bearer
<token>``, and a client sends it with every call. Redis: ``redis_username`` and its password (an ACL user, see
services/launcher/credentials.py).
"""

from __future__ import annotations

import hmac
import os
from dataclasses import dataclass
from pathlib import Path

import grpc

TOKEN_ENV = "PHYLORL_GRPC_TOKEN"
REDIS_PASSWORD_ENV = "PHYLORL_REDIS_PASSWORD"


@dataclass(frozen=True)
class ServerTLS:
    """TLS fields of a config whose service serves gRPC."""

    tls_cert_file: str = ""
    """PEM certificate (chain) of this service's gRPC port; with tls_key_file the port accepts TLS only ('' =
    plaintext)."""
    tls_key_file: str = ""
    """PEM private key of tls_cert_file."""


@dataclass(frozen=True)
class ClientTLS:
    """TLS fields of a config whose service calls gRPC services."""

    tls_ca_file: str = ""
    """PEM CA certificate that the gRPC services this one calls must be signed by; set, calls use TLS ('' =
    plaintext)."""


@dataclass(frozen=True)
class GrpcToken:
    """The shared token (servers require it, clients send it)."""

    token_file: str = ""
    """File holding the shared gRPC token, required of every call served and sent with every call made ('' =
    $PHYLORL_GRPC_TOKEN if set, else no token)."""


@dataclass(frozen=True)
class ClientCredentials(ClientTLS, GrpcToken):
    """What a client outside the services needs (a launcher's health checks, a test, a benchmark)."""


@dataclass(frozen=True)
class ServerCredentials(ServerTLS, GrpcToken):
    """What a gRPC server built outside a service's entry point needs (a test, a benchmark)."""


@dataclass(frozen=True)
class RedisAuth:
    """Redis fields of a service config."""

    redis_username: str = ""
    """Redis ACL user to authenticate as ('' = Redis' default user)."""
    redis_password_file: str = ""
    """File holding that user's password ('' = $PHYLORL_REDIS_PASSWORD if set, else no password)."""


def read_secret(path: str, env_name: str, what: str) -> str | None:
    """The secret in file ``path`` (stripped), else ``$env_name``, else None. Raises ValueError naming the
    file (never the secret) when it cannot be read or is empty."""
    if not path:
        return os.environ.get(env_name) or None
    value = _read_bytes(path, what).decode().strip()
    if not value:
        raise ValueError(f"the {what} file {path} is empty")
    return value


def grpc_token(cfg: GrpcToken | None) -> str | None:
    return read_secret(getattr(cfg, "token_file", ""), TOKEN_ENV, "gRPC token")


def check(cfg) -> list[str]:
    """Problems with the security fields of a config (for its ``__post_init__``)."""
    if bool(getattr(cfg, "tls_cert_file", "")) != bool(getattr(cfg, "tls_key_file", "")):
        return ["tls_cert_file and tls_key_file go together"]
    return []


def add_port(server: grpc.Server, address: str, cfg: ServerTLS | None) -> int:
    """Bind ``address``, with TLS when ``cfg`` has a certificate; returns the port (0: failed)."""
    if cfg is None or not cfg.tls_cert_file:
        return server.add_insecure_port(address)
    key, cert = _read_bytes(cfg.tls_key_file, "TLS key"), _read_bytes(cfg.tls_cert_file, "TLS cert")
    return server.add_secure_port(address, grpc.ssl_server_credentials([(key, cert)]))


def server_interceptors(cfg: GrpcToken | None, aio: bool = False) -> list:
    """The interceptors requiring ``cfg``'s token of every call (none without one); ``aio``: for grpc.aio."""
    token = grpc_token(cfg)
    return [(AsyncTokenInterceptor if aio else TokenInterceptor)(token)] if token else []


DENIED = "missing or wrong token (authorization metadata)"


class _TokenCheck:
    def __init__(self, token: str):
        self._expected = f"Bearer {token}".encode()

    def _checked(self, handler, details):
        """``handler`` when the call's metadata holds ``authorization: Bearer <token>`` (compared in constant
        time), else a handler of its kind (unary or streaming request and response: a streaming call refused
        by a unary handler would end INTERNAL) that refuses the call UNAUTHENTICATED."""
        if any(
            key == "authorization" and hmac.compare_digest(str(value).encode(), self._expected)
            for key, value in details.invocation_metadata or ()
        ):
            return handler
        streams = (handler and handler.request_streaming, handler and handler.response_streaming)
        kind = "_".join("stream" if streaming else "unary" for streaming in streams)  # e.g. unary_stream
        return getattr(grpc, f"{kind}_rpc_method_handler")(self._deny)


class TokenInterceptor(_TokenCheck, grpc.ServerInterceptor):
    """Lets a call through only with ``authorization: Bearer <token>`` (compared in constant time)."""

    def intercept_service(self, continuation, handler_call_details):
        return self._checked(continuation(handler_call_details), handler_call_details)

    @staticmethod
    def _deny(request, context):
        context.abort(grpc.StatusCode.UNAUTHENTICATED, DENIED)


class AsyncTokenInterceptor(_TokenCheck, grpc.aio.ServerInterceptor):
    """:class:`TokenInterceptor` for a ``grpc.aio`` server."""

    async def intercept_service(self, continuation, handler_call_details):
        return self._checked(await continuation(handler_call_details), handler_call_details)

    @staticmethod
    async def _deny(request, context):
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, DENIED)


def channel(target: str, cfg=None, options: list | None = None) -> grpc.Channel:
    """A channel to ``target``: TLS when ``cfg`` (a :class:`ClientTLS` and/or :class:`GrpcToken`) has a CA
    file, its token added to every call."""
    options = list(options or [])
    if ca_file := getattr(cfg, "tls_ca_file", ""):
        credentials = grpc.ssl_channel_credentials(root_certificates=_read_bytes(ca_file, "TLS CA"))
        chan = grpc.secure_channel(target, credentials, options=options)
    else:
        chan = grpc.insecure_channel(target, options=options)
    token = grpc_token(cfg)
    return grpc.intercept_channel(chan, _AddToken(token)) if token else chan


class _AddToken(
    grpc.UnaryUnaryClientInterceptor,
    grpc.UnaryStreamClientInterceptor,
    grpc.StreamUnaryClientInterceptor,
    grpc.StreamStreamClientInterceptor,
):
    def __init__(self, token: str):
        self._pair = ("authorization", f"Bearer {token}")

    def _intercept(self, continuation, details, request_or_requests):
        # grpc's call details are a namedtuple: the same details with the token added to the metadata
        metadata = [*(details.metadata or ()), self._pair]
        return continuation(details._replace(metadata=metadata), request_or_requests)

    intercept_unary_unary = intercept_unary_stream = intercept_stream_unary = intercept_stream_stream = (
        _intercept
    )


def redis_client(url: str, cfg: RedisAuth):
    """A ``redis.Redis`` for ``url`` that authenticates as ``cfg``'s user (the password is not in the URL,
    so it never appears in a logged config)."""
    import redis

    password = read_secret(cfg.redis_password_file, REDIS_PASSWORD_ENV, "Redis password")
    return redis.Redis.from_url(url, username=cfg.redis_username or None, password=password)


def _read_bytes(path: str, what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise ValueError(f"cannot read the {what} file {path}: {e.strerror}") from None
