#!/usr/bin/env python3
"""Verify an APNs provider token (ES256 JWT) made by Herald with an independent implementation
(Python `cryptography`), so a bug shared by Herald's signer and the simulator's verifier (both on
HeraldCrypto) cannot hide.

Two ways to run it:

  verify-apns-jwt.py --token JWT --p8 KEY.p8 --key-id KID --team-id TEAM [--iat N]
      checks one token against the .p8 key it was signed with (HeraldAPNsTests does this for
      tokens from APNsProviderToken);
  verify-apns-jwt.py --herald PATH/TO/herald
      makes a .p8 key with `cryptography`, has `herald sim token --state-dir` sign a token with
      it, and checks that token (scripts/test does this).

Checks: three base64url parts; header exactly {alg: ES256, kid}; claims exactly {iss, iat} with
an integer iat; a 64-byte r||s signature that verifies over "header.claims" with ECDSA P-256 and
SHA-256. Exit 0 when valid, 1 with a message when not, 2 on usage errors.
"""
import argparse
import base64
import json
import os
import subprocess
import sys
import tempfile
import time

try:
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
except ImportError:
    print("verify-apns-jwt.py: the Python 'cryptography' package is missing (run scripts/setup)", file=sys.stderr)
    sys.exit(2)


def b64url(text):
    if any(c in text for c in "+/="):
        raise ValueError("not base64url without padding")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def verify(token, key_pem, key_id, team_id, iat=None):
    """Returns None when valid, else why not."""
    parts = token.split(".")
    if len(parts) != 3:
        return f"expected 3 parts, got {len(parts)}"
    try:
        header = json.loads(b64url(parts[0]))
        claims = json.loads(b64url(parts[1]))
        signature = b64url(parts[2])
    except ValueError as error:
        return f"undecodable token: {error}"
    if header != {"alg": "ES256", "kid": key_id}:
        return f"header is {header}, expected alg ES256 and kid {key_id}"
    if set(claims) != {"iss", "iat"} or claims["iss"] != team_id:
        return f"claims are {claims}, expected iss {team_id} and iat"
    if not isinstance(claims["iat"], int) or isinstance(claims["iat"], bool):
        return f"iat {claims['iat']!r} is not an integer"
    if iat is not None and claims["iat"] != iat:
        return f"iat is {claims['iat']}, expected {iat}"
    if len(signature) != 64:
        return f"signature is {len(signature)} bytes, expected 64 (JOSE r||s)"
    private_key = serialization.load_pem_private_key(key_pem, password=None)
    if not isinstance(private_key, ec.EllipticCurvePrivateKey) or private_key.curve.name != "secp256r1":
        return "the .p8 key is not a P-256 key"
    der = encode_dss_signature(int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big"))
    try:
        private_key.public_key().verify(der, f"{parts[0]}.{parts[1]}".encode(), ec.ECDSA(hashes.SHA256()))
    except InvalidSignature:
        return "the ES256 signature does not verify"
    return None


def from_herald(herald):
    with tempfile.TemporaryDirectory(prefix="herald-jwt-") as directory:
        key = ec.generate_private_key(ec.SECP256R1())
        pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
        with open(os.path.join(directory, "apns-key.p8"), "wb") as file:
            file.write(pem)
        before = int(time.time())
        result = subprocess.run([herald, "sim", "token", "--state-dir", directory], capture_output=True, text=True, timeout=60)
        if result.returncode != 0:
            return f"herald sim token failed ({result.returncode}): {result.stderr.strip()}"
        with open(os.path.join(directory, "apns.json")) as file:
            info = json.load(file)
        token = result.stdout.strip()
        problem = verify(token, pem, info["key_id"], info["team_id"])
        if problem is None:
            iat = json.loads(b64url(token.split(".")[1]))["iat"]
            if not before - 5 <= iat <= int(time.time()) + 5:
                problem = f"iat {iat} is not the current time"
        return problem


def main():
    parser = argparse.ArgumentParser(description="Verify a Herald APNs provider token with Python cryptography.")
    parser.add_argument("--herald", help="the herald binary: sign a token with `herald sim token` and verify it")
    parser.add_argument("--token")
    parser.add_argument("--p8", help="PKCS#8 PEM file of the signing key")
    parser.add_argument("--key-id")
    parser.add_argument("--team-id")
    parser.add_argument("--iat", type=int)
    args = parser.parse_args()
    if args.herald:
        problem = from_herald(args.herald)
    elif args.token and args.p8 and args.key_id and args.team_id:
        with open(args.p8, "rb") as file:
            problem = verify(args.token, file.read(), args.key_id, args.team_id, args.iat)
    else:
        parser.print_usage(sys.stderr)
        return 2
    if problem:
        print(f"verify-apns-jwt.py: INVALID: {problem}", file=sys.stderr)
        return 1
    print("verify-apns-jwt.py: ES256 provider token verified with Python cryptography")
    return 0


if __name__ == "__main__":
    sys.exit(main())
