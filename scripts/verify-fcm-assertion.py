#!/usr/bin/env python3
"""Check an FCM OAuth assertion signed by Herald's Swift code with an independent
implementation (Python `cryptography`): the RS256 signature against the service account's key,
and the header and claims Google requires (shared/reference/protocols.md §B4).

Usage: verify-fcm-assertion.py DIR
DIR holds assertion.jwt and service-account.json, written by the HeraldFCMTests test
`assertionClaims` when HERALD_FCM_ASSERTION_DIR is set (scripts/test sets it).
Exit status 0 when the assertion verifies, 1 when it does not, 2 on usage errors.
"""
import base64
import json
import os
import sys
import time

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa


def b64url_decode(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def verify(assertion, account, now):
    """Returns a list of problems (empty when the assertion is good)."""
    problems = []
    parts = assertion.split(".")
    if len(parts) != 3:
        return ["not a compact JWT (expected 3 parts, got %d)" % len(parts)]
    header = json.loads(b64url_decode(parts[0]))
    claims = json.loads(b64url_decode(parts[1]))
    signature = b64url_decode(parts[2])

    key = serialization.load_pem_private_key(account["private_key"].encode(), password=None)
    if not isinstance(key, rsa.RSAPrivateKey):
        return ["the service account's key is not RSA"]
    try:
        key.public_key().verify(signature, (parts[0] + "." + parts[1]).encode("ascii"),
                                padding.PKCS1v15(), hashes.SHA256())
    except InvalidSignature:
        problems.append("RS256 signature does not verify")

    expect = {"alg": "RS256", "typ": "JWT"}
    if account.get("private_key_id"):
        expect["kid"] = account["private_key_id"]
    for name, value in expect.items():
        if header.get(name) != value:
            problems.append("header %s is %r, expected %r" % (name, header.get(name), value))
    if claims.get("iss") != account["client_email"]:
        problems.append("iss is %r, expected the client email" % claims.get("iss"))
    if claims.get("aud") != account.get("token_uri", "https://oauth2.googleapis.com/token"):
        problems.append("aud is %r, expected the token_uri" % claims.get("aud"))
    if "https://www.googleapis.com/auth/firebase.messaging" not in str(claims.get("scope", "")).split(" "):
        problems.append("scope %r lacks firebase.messaging" % claims.get("scope"))
    iat, exp = claims.get("iat"), claims.get("exp")
    if not isinstance(iat, int) or not isinstance(exp, int):
        problems.append("iat and exp must be integers")
    else:
        if not 0 < exp - iat <= 3600:
            problems.append("exp - iat is %d s, must be 1..3600" % (exp - iat))
        if abs(iat - now) > 600:
            problems.append("iat is %d s away from now" % (iat - now))
    return problems


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    folder = sys.argv[1]
    with open(os.path.join(folder, "assertion.jwt")) as f:
        assertion = f.read().strip()
    with open(os.path.join(folder, "service-account.json")) as f:
        account = json.load(f)
    now = int(time.time())
    problems = verify(assertion, account, now)
    # The check must be able to fail: a flipped signature byte has to be caught.
    head, body, sig = assertion.split(".")
    raw = bytearray(b64url_decode(sig))
    raw[0] ^= 1
    tampered = head + "." + body + "." + base64.urlsafe_b64encode(bytes(raw)).decode().rstrip("=")
    if "RS256 signature does not verify" not in verify(tampered, account, now):
        problems.append("self-check: a tampered signature was accepted")
    if problems:
        for problem in problems:
            print("verify-fcm-assertion: " + problem, file=sys.stderr)
        return 1
    print("verify-fcm-assertion: RS256 assertion from HeraldFCM verifies with Python cryptography")
    return 0


if __name__ == "__main__":
    sys.exit(main())
