"""Make the secrets of a secured stack: a CA and a server certificate for gRPC TLS, the shared gRPC token,
and a Redis ACL user with its password.

    python -m services.launcher.credentials DIR [--hosts replay,learner,...] [--owner UID]

(``scripts/make_secrets.sh`` runs it for the compose and swarm stacks; ``phylorl train --secure`` for a
local run.) Files, each mode 0600 (``--owner`` hands them to the containers' user):

    ca.crt            the CA certificate clients verify servers with (its key is discarded after signing)
    server.crt/.key   the services' certificate (EC P-256), valid for every name in ``hosts``
    grpc_token        the shared token every gRPC call carries
    redis_password    the password of Redis user ``phylorl``
    redis_users.acl   Redis ACL file: the default user off (no login); ``phylorl`` may run only
                      REDIS_COMMANDS, on keys ``phylorl:*`` (its password stored as a SHA-256 hash)
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import ipaddress
import os
import secrets
import sys
from pathlib import Path

REDIS_USER = "phylorl"
REDIS_COMMANDS = (
    "ping info select multi exec discard get set getrange del hset hget hmget hgetall hdel rpush lrange "
    "ltrim eval evalsha rename persist"
)
"""What the replay service and the learner send (space-separated; MULTI/EXEC transactions, the replay store's
guarded writes: one Lua script that checks the key range, renames the staged batch string into place and
writes the index list, the priority, mark and origin hashes; the published weights); anything else is
refused. Redis checks the commands a script runs against these rules too."""
KEY_PATTERN = "phylorl:*"
DEFAULT_HOSTS = ("localhost", "127.0.0.1", "replay", "learner")


def redis_acl(password: str) -> str:
    digest = hashlib.sha256(password.encode()).hexdigest()
    commands = " ".join(f"+{c}" for c in REDIS_COMMANDS.split())
    # The default user is off (nobody can log in as it) and has no "nopass", so protected mode stays on. It
    # keeps every permission because Redis 7.0 checks the transactions it replays from the AOF at start
    # against the default user's rules: without them a restart would drop every MULTI/EXEC insert.
    return (
        f"user default off resetpass ~* &* +@all\n"
        f"user {REDIS_USER} on #{digest} ~{KEY_PATTERN} resetchannels -@all {commands}\n"
    )


def make_credentials(
    directory: str | os.PathLike, hosts=DEFAULT_HOSTS, owner: int | None = None, days: int = 825
) -> dict[str, Path]:
    """Write the files above into ``directory`` (created); returns their paths by name."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "phylorl CA")])

    def certificate(subject, public_key, *extensions):
        """A certificate for ``public_key`` signed by the CA, valid from 5 minutes ago for ``days`` days."""
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(ca_name)
            .public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=days))
        )
        for extension, critical in extensions:
            builder = builder.add_extension(extension, critical=critical)
        return builder.sign(ca_key, hashes.SHA256())

    unused = "content_commitment key_encipherment data_encipherment key_agreement encipher_only decipher_only"
    usage = x509.KeyUsage(
        digital_signature=True, key_cert_sign=True, crl_sign=True, **dict.fromkeys(unused.split(), False)
    )
    ca = certificate(
        ca_name, ca_key.public_key(), (x509.BasicConstraints(ca=True, path_length=0), True), (usage, True)
    )
    names = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    cert = certificate(
        x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "phylorl services")]),
        key.public_key(),
        (x509.SubjectAlternativeName(names), False),
        (x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), False),
    )
    password = secrets.token_urlsafe(32)
    contents = {
        "ca.crt": ca.public_bytes(serialization.Encoding.PEM),
        "server.crt": cert.public_bytes(serialization.Encoding.PEM),
        "server.key": key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ),
        "grpc_token": secrets.token_urlsafe(32).encode() + b"\n",
        "redis_password": password.encode() + b"\n",
        "redis_users.acl": redis_acl(password).encode(),
    }
    for name, data in contents.items():
        path = directory / name
        with open(path, "wb", opener=lambda file, flags: os.open(file, flags, 0o600)) as handle:
            handle.write(data)
        os.chmod(path, 0o600)
        if owner is not None:
            os.chown(path, owner, owner)
    return {name: directory / name for name in contents}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m services.launcher.credentials", description=__doc__.split("\n")[0]
    )
    parser.add_argument("directory", help="where the files go (created; existing files are replaced)")
    parser.add_argument(
        "--hosts",
        default=",".join(DEFAULT_HOSTS),
        help="comma-separated names and addresses the server certificate is valid for",
    )
    parser.add_argument(
        "--owner",
        type=int,
        help="uid (and gid) to own the files, e.g. 10001, the containers' user (needs root)",
    )
    args = parser.parse_args(argv)
    try:
        paths = make_credentials(args.directory, [h for h in args.hosts.split(",") if h], args.owner)
    except OSError as e:
        print(f"error: cannot write the secrets into {args.directory}: {e.strerror}", file=sys.stderr)
        return 2
    print(f"wrote {', '.join(sorted(paths))} into {args.directory}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
