"""TLS for gRPC ports and status pages, and a small pool CA (cryptography).

A pool that sets `SEC_DEFAULT_ENCRYPTION = REQUIRED` serves every gRPC port with
grpc.ssl_server_credentials (and its status page over HTTPS) using
AUTH_SSL_SERVER_CERTFILE / _KEYFILE; clients check servers against
AUTH_SSL_SERVER_CAFILE. With AUTH_SSL_REQUIRE_CLIENT_CERTIFICATE (mutual TLS) servers
also demand a certificate issued by AUTH_SSL_CLIENT_CAFILE, and every client (daemons
and the command) shows AUTH_SSL_CLIENT_CERTFILE / _KEYFILE.

`make_ca` and `issue` write what `htcpool tls` makes: a CA (ca.crt, ca.key) and
certificates for servers and clients with the host names and addresses given. Every
certificate also names `htcpool` (SERVER_NAME_ALIAS): with SSL_SKIP_HOST_CHECK = True a
client checks only that the server's certificate comes from the pool's CA and carries
that name, for pools whose daemons advertise addresses not known in advance
(containers). Keys are written 0600 and never overwritten.
"""
from __future__ import annotations

import datetime
import ipaddress
import os
import ssl
from dataclasses import dataclass
from pathlib import Path

import grpc
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from daemons.core.security.config import TlsConfig, TlsError

SERVER_NAME_ALIAS = "htcpool"
CA_DAYS = 3650
CERT_DAYS = 825


def _read(path: Path | None) -> bytes | None:
    if path is None:
        return None
    try:
        return path.read_bytes()
    except OSError as e:
        raise TlsError(f"{path}: {e.strerror}") from None


def server_credentials(cfg: TlsConfig) -> grpc.ServerCredentials:
    return grpc.ssl_server_credentials([(_read(cfg.server_key), _read(cfg.server_cert))],
                                       root_certificates=_read(cfg.client_ca) if cfg.require_client_cert else None,
                                       require_client_auth=cfg.require_client_cert)


def channel_credentials(ca: Path | None, cert: Path | None = None, key: Path | None = None) -> grpc.ChannelCredentials:
    return grpc.ssl_channel_credentials(root_certificates=_read(ca), private_key=_read(key),
                                        certificate_chain=_read(cert))


def client_credentials(cfg: TlsConfig) -> grpc.ChannelCredentials:
    """What a daemon shows and checks when it calls another daemon."""
    return channel_credentials(cfg.server_ca, cfg.client_cert, cfg.client_key)


def status_page_context(cfg: TlsConfig) -> ssl.SSLContext:
    """The status page over HTTPS with the daemon's own certificate (read-only data)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(cfg.server_cert), str(cfg.server_key))
    return ctx


# ---- making a pool CA and certificates ---------------------------------------------------
@dataclass(frozen=True)
class Issued:
    cert: Path
    key: Path


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    data = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise TlsError(f"{path} already exists; it is never overwritten (remove it first)") from None
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def make_ca(directory: Path, name: str = "htcpool pool CA") -> Issued:
    """A new CA in `directory` (ca.crt, ca.key)."""
    directory.mkdir(parents=True, exist_ok=True)
    cert_path, key_path = directory / "ca.crt", directory / "ca.key"
    if cert_path.exists():
        raise TlsError(f"{cert_path} already exists; it is never overwritten (remove it first)")
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(_now() - datetime.timedelta(minutes=5))
            .not_valid_after(_now() + datetime.timedelta(days=CA_DAYS))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False, decipher_only=False),
                           critical=True)
            .sign(key, hashes.SHA256()))
    _write_key(key_path, key)
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return Issued(cert_path, key_path)


def _load_ca(directory: Path) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    try:
        cert = x509.load_pem_x509_certificate((directory / "ca.crt").read_bytes())
        key = serialization.load_pem_private_key((directory / "ca.key").read_bytes(), password=None)
    except (OSError, ValueError) as e:
        raise TlsError(f"no usable CA in {directory} (ca.crt, ca.key): {e}") from None
    return cert, key  # type: ignore[return-value]


def issue(ca_dir: Path, out_dir: Path, name: str, hosts: list[str]) -> Issued:
    """A certificate `name`.crt / `name`.key signed by the CA in `ca_dir`, valid as a server
    for `hosts` (names or addresses) and as a client."""
    ca_cert, ca_key = _load_ca(ca_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    cert_path, key_path = out_dir / f"{name}.crt", out_dir / f"{name}.key"
    if cert_path.exists():
        raise TlsError(f"{cert_path} already exists; it is never overwritten (remove it first)")
    sans: list[x509.GeneralName] = []
    for h in dict.fromkeys(list(hosts) + [SERVER_NAME_ALIAS]):
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(h)))
        except ValueError:
            sans.append(x509.DNSName(h))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0] if hosts else name)]))
            .issuer_name(ca_cert.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(_now() - datetime.timedelta(minutes=5))
            .not_valid_after(_now() + datetime.timedelta(days=CERT_DAYS))
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    _write_key(key_path, key)
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return Issued(cert_path, key_path)
