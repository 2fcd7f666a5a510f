"""Authentication against the real servers: Redis with the generated ACL, gRPC with TLS and the token.

A client without the password, the token or the CA is refused; one with them is served.
"""

from __future__ import annotations

import grpc
import numpy as np
import pytest
import redis
from grpc_health.v1 import health_pb2, health_pb2_grpc
from helpers import serve_replay

from phylorl.nets.config import NetworkConfig
from phylorl.nets.synthetic import random_observation, random_transition
from phylorl.records.codec import encode_observation, encode_transition
from phylorl.replay.rate_limiter import RateLimiter
from phylorl.wire import codec
from phylorl.wire.v1 import inference_pb2, inference_pb2_grpc
from services.common import security
from services.common.security import ClientCredentials, RedisAuth, ServerCredentials
from services.launcher.credentials import REDIS_USER, make_credentials
from services.replay.buffer import PrioritizedReplay
from services.replay.client import ReplayClient
from services.replay.store import RedisStore


@pytest.fixture(scope="module")
def secrets_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("secrets")
    make_credentials(directory)
    return directory


def acl_args(secrets_dir) -> tuple[str, ...]:
    return ("--aclfile", str(secrets_dir / "redis_users.acl"))


@pytest.fixture
def acl_redis(redis_factory, secrets_dir):
    password = (secrets_dir / "redis_password").read_text().strip()
    return redis_factory(extra_args=acl_args(secrets_dir), username=REDIS_USER, password=password)


def server_security(secrets_dir):
    return ServerCredentials(
        tls_cert_file=str(secrets_dir / "server.crt"),
        tls_key_file=str(secrets_dir / "server.key"),
        token_file=str(secrets_dir / "grpc_token"),
    )


def test_redis_refuses_a_client_without_the_password_and_serves_the_replay_table_with_it(
    acl_redis, secrets_dir, redis_factory
):
    for client in (
        redis.Redis(port=acl_redis.port),
        redis.Redis(port=acl_redis.port, username=REDIS_USER, password="wrong"),
    ):
        with pytest.raises((redis.AuthenticationError, redis.ResponseError)):
            client.ping()
    auth = RedisAuth(redis_username=REDIS_USER, redis_password_file=str(secrets_dir / "redis_password"))
    client = security.redis_client(f"redis://127.0.0.1:{acl_redis.port}/0", auth)
    assert client.ping()
    with pytest.raises(redis.exceptions.NoPermissionError):
        client.flushall()  # only the commands replay and the learner use
    with pytest.raises(redis.exceptions.NoPermissionError):
        client.set("elsewhere:key", b"x")  # only keys phylorl:*
    # the replay table's every command (insert, priorities, eviction, reopen) runs as that user
    rng = np.random.default_rng(0)
    records = [encode_transition(random_transition(7, rng)) for _ in range(12)]
    table = PrioritizedReplay(
        RedisStore(client, "phylorl:replay"),
        capacity=8,
        alpha=0.6,
        beta=0.4,
        rate_limiter=RateLimiter(1, 0.0),
    )
    table.insert(records[:6], producer="p", first_sequence=0)
    table.insert(records[6:], producer="p", first_sequence=6)
    batch = table.sample(4)
    table.update_priorities(batch.keys, np.full(4, 2.0))
    table.close()
    # a restart replays the AOF's transactions (Redis 7.0 checks them against the default user's rules)
    acl_redis.stop()
    restarted = redis_factory(
        acl_redis.directory,
        acl_redis.port,
        extra_args=acl_args(secrets_dir),
        username=REDIS_USER,
        password=(secrets_dir / "redis_password").read_text().strip(),
    )
    client = security.redis_client(f"redis://127.0.0.1:{restarted.port}/0", auth)
    reopened = PrioritizedReplay(
        RedisStore(client, "phylorl:replay"),
        capacity=8,
        alpha=0.6,
        beta=0.4,
        rate_limiter=RateLimiter(1, 0.0),
    )
    assert reopened.stats().size == 8 and reopened.priorities()[1].tolist().count(2.0) == 4
    client.set("phylorl:weights:version", 3)  # the learner's publication of its weights version
    assert client.get("phylorl:weights:version") == b"3"


def test_inference_endpoint_wants_tls_and_the_token(inference_factory, secrets_dir):
    address = inference_factory(
        NetworkConfig(hidden=16, action_hidden=16, head_hidden=16), security=server_security(secrets_dir)
    )
    request = inference_pb2.ActRequest(actor_id="t", greedy=True)
    codec.pack_records([encode_observation(random_observation(7, np.random.default_rng(1)))], request.states)
    good = ClientCredentials(
        tls_ca_file=str(secrets_dir / "ca.crt"), token_file=str(secrets_dir / "grpc_token")
    )
    no_token = ClientCredentials(tls_ca_file=str(secrets_dir / "ca.crt"))
    wrong = secrets_dir / "wrong_token"
    wrong.write_text("not-the-token\n")
    wrong_token = ClientCredentials(tls_ca_file=str(secrets_dir / "ca.crt"), token_file=str(wrong))
    for credentials, status in (
        (no_token, grpc.StatusCode.UNAUTHENTICATED),
        (wrong_token, grpc.StatusCode.UNAUTHENTICATED),
        # plaintext to TLS
        (ClientCredentials(token_file=str(secrets_dir / "grpc_token")), grpc.StatusCode.UNAVAILABLE),
    ):
        with security.channel(address, credentials) as channel:
            for call in (
                lambda: next(
                    inference_pb2_grpc.InferenceServiceStub(channel).ActStream(iter([request]), timeout=5)
                ),
                lambda: health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5),
            ):
                with pytest.raises(grpc.RpcError) as refused:
                    call()
                assert refused.value.code() == status
    with security.channel(address, good) as channel:
        replies = list(
            inference_pb2_grpc.InferenceServiceStub(channel).ActStream(iter([request, request]), timeout=30)
        )
        assert [r.weights_version for r in replies] == [1, 1]
        assert all(codec.ndarray_from_proto(r.actions).shape == (1,) for r in replies)
        health = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
        assert health.status == health_pb2.HealthCheckResponse.SERVING


def test_replay_service_wants_the_token(redis_client, secrets_dir):
    table, server = serve_replay(
        redis_client, "test:secure", capacity=16, security=server_security(secrets_dir)
    )
    record = encode_transition(random_transition(7, np.random.default_rng(2)))
    try:
        outsider = ReplayClient(
            f"127.0.0.1:{server.port}", security=ClientCredentials(tls_ca_file=str(secrets_dir / "ca.crt"))
        )
        with pytest.raises(grpc.RpcError) as refused:
            outsider.insert_records([record], np.ones(1))
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED and table.stats().size == 0
        outsider.close()
        member = ReplayClient(
            f"127.0.0.1:{server.port}",
            security=ClientCredentials(
                tls_ca_file=str(secrets_dir / "ca.crt"), token_file=str(secrets_dir / "grpc_token")
            ),
        )
        member.insert_records([record], np.ones(1))
        assert table.stats().size == 1 and len(member.sample(1).records) == 1
        member.close()
    finally:
        server.stop(grace_s=1.0)


def test_a_missing_secret_file_is_named(tmp_path):
    with pytest.raises(ValueError, match=r"cannot read the gRPC token file .*absent"):
        security.grpc_token(ClientCredentials(token_file=str(tmp_path / "absent")))
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(ValueError, match="is empty"):
        security.grpc_token(ClientCredentials(token_file=str(tmp_path / "empty")))
