"""secagg.crypto: published vectors check the wiring; properties check the protocol rules.

Vectors: RFC 7748 sections 5.2 and 6.1 (X25519), RFC 5869 appendix A.1 and A.3 (HKDF-SHA256
test cases 1 and 3), RFC 8439 section 2.8.2 (ChaCha20-Poly1305 AEAD), RFC 8032 section 7.1
TEST 1-3 (Ed25519).
"""
from __future__ import annotations

import hashlib
import hmac
import random
import struct

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.core.randomness import insecure_deterministic_randomness
from secagg import crypto as c
from secagg.errors import CryptoError, ParameterError, SecAggError

H = bytes.fromhex


class FixedRandom:
    """Returns preset bytes (to reproduce a published nonce), then fails loudly."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def token_bytes(self, n: int) -> bytes:
        assert n == len(self.data), "unexpected randomness request"
        out, self.data = self.data, b""
        return out


RNG = insecure_deterministic_randomness(b"test_crypto")


# ------------------------------------------------------------------ X25519 (RFC 7748)

@pytest.mark.parametrize("scalar,u,out", [
    # RFC 7748 section 5.2, first and second test vector
    ("a546e36bf0527c9d3b16154b82465edd62144c0ac1fc5a18506a2244ba449ac4",
     "e6db6867583030db3594c1a424b15f7c726624ec26b3353b10a903a6d0ab1c4c",
     "c3da55379de9c6908e94ea4df28d084f32eccf03491c71f754b4075577a28552"),
    ("4b66e9d4d1b4673c5ad22691957d6af5c11b6421e0ea01d42ca4169e7918ba0d",
     "e5210f12786811d3f4b7959d0538ae2c31dbe7106fc03c3efc4cd549c715a493",
     "95cbde9476e8907d7aade45cb4b873f88b595a68799fa152e6f8f7647aac7957"),
])
def test_x25519_rfc7748_section_5_2(scalar: str, u: str, out: str) -> None:
    assert c.x25519_shared(H(scalar), H(u)) == H(out)


def test_x25519_rfc7748_section_5_2_iterations() -> None:
    # k = u = 9; repeat k, u = X25519(k, u), k. Results after 1 and 1000 iterations.
    k = u = (9).to_bytes(32, "little")
    for i in range(1, 1001):
        k, u = c.x25519_shared(k, u), k
        if i == 1:
            assert k == H("422c8e7a6227d7bca1350b3e2bb7279f7897b87bb6854b783c60e80311ae3079")
    assert k == H("684cf59ba83309552800ef566f2f4d3c1c3887c49360e3875f2eb94d99532c51")


def test_x25519_rfc7748_section_6_1() -> None:
    a = H("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a")
    b = H("5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb")
    a_pub = H("8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a")
    b_pub = H("de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f")
    k = H("4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742")
    assert c.x25519_public(a) == a_pub and c.x25519_public(b) == b_pub
    assert c.x25519_shared(a, b_pub) == k and c.x25519_shared(b, a_pub) == k


def test_x25519_public_is_the_librarys_public_key() -> None:
    """libsodium's fixed-base multiplication gives what OpenSSL's private-key object
    gives, for random secrets and for secrets whose clamped bits are set or clear."""
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

    secrets = [bytes(32), b"\xff" * 32, b"\x07" + bytes(31), bytes(31) + b"\x80"]
    secrets += [bytes(RNG.token_bytes(32)) for _ in range(50)]
    for sk in secrets:
        assert c.x25519_public(sk) == (
            X25519PrivateKey.from_private_bytes(sk).public_key().public_bytes_raw())


def test_x25519_keypair_agrees_and_uses_injected_randomness() -> None:
    sa, pa = c.x25519_keypair(RNG)
    sb, pb = c.x25519_keypair(RNG)
    assert len(sa) == len(pa) == 32 and sa != sb
    assert c.x25519_shared(sa, pb) == c.x25519_shared(sb, pa)
    again = insecure_deterministic_randomness(b"same")
    assert c.x25519_keypair(again) == c.x25519_keypair(insecure_deterministic_randomness(b"same"))


@pytest.mark.parametrize("low_order", [
    bytes(32),                      # u = 0
    (1).to_bytes(32, "little"),     # u = 1
    # a point of order 8 (listed among the small-order points in the X25519 literature)
    H("e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800"),
])
def test_x25519_rejects_low_order_points(low_order: bytes) -> None:
    secret, _ = c.x25519_keypair(RNG)
    with pytest.raises(CryptoError, match="all-zero"):
        c.x25519_shared(secret, low_order)


@pytest.mark.parametrize("secret,pub", [(bytes(31), bytes(32)), (bytes(32), bytes(33)),
                                        ("not bytes", bytes(32)), (bytes(32), None)])
def test_x25519_rejects_bad_lengths_and_types(secret: object, pub: object) -> None:
    with pytest.raises(CryptoError):
        c.x25519_shared(secret, pub)  # type: ignore[arg-type]


# ------------------------------------------------------------------ HKDF (RFC 5869)

def test_hkdf_rfc5869_test_case_1_wiring() -> None:
    # the same primitive our hkdf() calls, with the RFC's salt and info
    ikm = b"\x0b" * 22
    salt = H("000102030405060708090a0b0c")
    info = H("f0f1f2f3f4f5f6f7f8f9")
    okm = HKDF(algorithm=hashes.SHA256(), length=42, salt=salt, info=info).derive(ikm)
    assert okm == H("3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf"
                    "34007208d5b887185865")
    prk = hmac.new(salt, ikm, hashlib.sha256).digest()
    assert prk == H("077709362c2e32df0ddc3f0dc47bba6390b6c73bb50f9c3122ec844ad7c2b3e5")


def _reference_hkdf(ikm: bytes, info: bytes, length: int) -> bytes:
    """RFC 5869 section 2 written out with hmac: empty salt means HashLen zero bytes."""
    prk = hmac.new(bytes(32), ikm, hashlib.sha256).digest()
    out, block, i = b"", b"", 1
    while len(out) < length:
        block = hmac.new(prk, block + info + bytes([i]), hashlib.sha256).digest()
        out += block
        i += 1
    return out[:length]


def test_hkdf_info_construction_matches_the_documented_layout() -> None:
    ikm = H("4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742")
    ctx = b"session\x00\x01\x02"
    info = b"fedhh/secagg/v1\x00" + b"pairwise-mask-seed" + b"\x00" + ctx
    assert c.hkdf_info(c.LABEL_MASK_SEED, ctx) == info
    assert c.hkdf(ikm, label=c.LABEL_MASK_SEED, context=ctx) == _reference_hkdf(ikm, info, 32)
    assert c.hkdf(ikm, label=c.LABEL_MASK_SEED, context=ctx, length=100) == \
        _reference_hkdf(ikm, info, 100)


def test_hkdf_rfc5869_test_case_3_empty_salt() -> None:
    # RFC 5869 A.3: SHA-256, empty salt, empty info: exactly the construction hkdf() uses
    okm = c._hkdf_sha256(b"\x0b" * 22, b"", 42)
    assert okm == H("8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d"
                    "9d201395faa4b61a96c8")


@pytest.mark.parametrize("length", [1, 31, 32, 33, 64, 100, 255 * 32])
def test_hkdf_equals_the_library_hkdf(length: int) -> None:
    # the hashlib-based HMAC against cryptography's HKDF object, over ikm and info of
    # several lengths (an ikm longer than the hash block included)
    rng = random.Random(length)
    for ikm_len, info_len in ((0, 0), (32, 40), (65, 3), (200, 130)):
        ikm, info = rng.randbytes(ikm_len), rng.randbytes(info_len)
        ref = HKDF(algorithm=hashes.SHA256(), length=length, salt=b"", info=info).derive(ikm)
        assert c._hkdf_sha256(ikm, info, length) == ref


def test_hkdf_labels_separate_domains() -> None:
    ikm = bytes(range(32))
    labels = [c.LABEL_MASK_SEED, c.LABEL_SHARE_KEY, c.LABEL_SELF_MASK, c.LABEL_SESSION]
    outs = {c.hkdf(ikm, label=lab, context=b"ctx") for lab in labels}
    assert len(outs) == len(labels)
    assert c.hkdf(ikm, label=c.LABEL_MASK_SEED, context=b"a") != \
        c.hkdf(ikm, label=c.LABEL_MASK_SEED, context=b"b")


@pytest.mark.parametrize("kwargs", [dict(label=b"", context=b""), dict(label=b"a\x00b", context=b""),
                                    dict(label=b"x", context=b"", length=0),
                                    dict(label=b"x", context=b"", length=255 * 32 + 1),
                                    dict(label="str", context=b"")])
def test_hkdf_rejects_bad_parameters(kwargs: dict) -> None:
    with pytest.raises(ParameterError):
        c.hkdf(b"ikm", **kwargs)


# ------------------------------------------------------------------ session id

def _reference_session_id(params: bytes, ids: list[int], ctx: bytes) -> bytes:
    enc = b"fedhh/secagg/v1\x00session-id\x00"
    enc += len(params).to_bytes(8, "big") + params
    enc += len(ids).to_bytes(8, "big") + b"".join(i.to_bytes(8, "big") for i in ids)
    enc += len(ctx).to_bytes(8, "big") + ctx
    return hashlib.sha256(enc).digest()


def test_session_id_layout_and_binding() -> None:
    sid = c.session_id(b"params", [3, 1, 2], b"task-7")
    assert sid == _reference_session_id(b"params", [3, 1, 2], b"task-7")
    assert len(sid) == 32
    others = {
        c.session_id(b"params", [1, 2, 3], b"task-7"),   # order matters
        c.session_id(b"params", [3, 1], b"task-7"),
        c.session_id(b"paramz", [3, 1, 2], b"task-7"),
        c.session_id(b"params", [3, 1, 2], b"task-8"),
        c.session_id(b"params" + b"\x00" * 8, [3, 1, 2], b"task-7"),
    }
    assert sid not in others and len(others) == 5


def test_session_id_length_prefix_prevents_shifting() -> None:
    # moving bytes between params and context must change the id
    assert c.session_id(b"ab", [], b"c") != c.session_id(b"a", [], b"bc")


@pytest.mark.parametrize("ids", [[1, 1], [-1], [1 << 64], [True], ["1"]])
def test_session_id_rejects_bad_participants(ids: list) -> None:
    with pytest.raises(ParameterError):
        c.session_id(b"p", ids, b"")


# ------------------------------------------------------------------ AEAD (RFC 8439)

RFC8439_PT = (b"Ladies and Gentlemen of the class of '99: If I could offer you only one tip "
              b"for the future, sunscreen would be it.")
RFC8439_CT = H("d31a8d34648e60db7b86afbc53ef7ec2a4aded51296e08fea9e2b5a736ee62d6"
               "3dbea45e8ca9671282fafb69da92728b1a71de0a9e060b2905d6a5b67ecd3b36"
               "92ddbd7f2d778b8c9803aee328091b58fab324e4fad675945585808b4831d7bc"
               "3ff4def08e4b7a9de576d26586cec64b6116")
RFC8439_TAG = H("1ae10b594f09e26a7e902ecbd0600691")
RFC8439_KEY = H("808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f")
RFC8439_NONCE = H("070000004041424344454647")
RFC8439_AAD = H("50515253c0c1c2c3c4c5c6c7")


def test_aead_rfc8439_section_2_8_2() -> None:
    blob = c.aead_encrypt(RFC8439_KEY, RFC8439_PT, RFC8439_AAD, FixedRandom(RFC8439_NONCE))
    assert blob == RFC8439_NONCE + RFC8439_CT + RFC8439_TAG
    assert c.aead_decrypt(RFC8439_KEY, blob, RFC8439_AAD) == RFC8439_PT


@settings(max_examples=60, deadline=None)
@given(st.binary(min_size=32, max_size=32), st.binary(min_size=12, max_size=12),
       st.binary(max_size=5000), st.binary(max_size=200))
def test_aead_is_openssls_chacha20_poly1305(key, nonce, pt, ad) -> None:
    """The AEAD runs on libsodium's ChaCha20-Poly1305: the same bytes as
    ``cryptography``'s (OpenSSL's) on any key, nonce, length (past the per-thread
    scratch buffer too) and associated data, and each side opens the other's."""
    from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

    blob = c.aead_encrypt(key, pt, ad, FixedRandom(nonce))
    assert blob == nonce + ChaCha20Poly1305(key).encrypt(nonce, pt, ad)
    assert c.aead_decrypt(key, blob, ad) == pt
    if pt:
        bad = bytearray(blob)
        bad[-1] ^= 0x80
        with pytest.raises(CryptoError, match="authentication"):
            c.aead_decrypt(key, bytes(bad), ad)


def test_aead_in_threads_at_once() -> None:
    """Each thread has its own scratch buffer: many threads encrypting and decrypting
    at once get exactly their own bytes back."""
    from concurrent.futures import ThreadPoolExecutor

    def job(i: int) -> bool:
        key, ad = hashlib.sha256(b"k%d" % i).digest(), b"ad%d" % i
        rng = insecure_deterministic_randomness(i)
        for j in range(300):
            pt = hashlib.sha256(b"%d-%d" % (i, j)).digest() * (1 + j % 3)
            if c.aead_decrypt(key, c.aead_encrypt(key, pt, ad, rng), ad) != pt:
                return False
        return True

    with ThreadPoolExecutor(8) as pool:
        assert all(pool.map(job, range(16)))


def test_aead_rejects_every_modification() -> None:
    key = bytes(range(32))
    ad = c.routing_ad(bytes(32), 1, 4, 9)
    blob = c.aead_encrypt(key, b"share bytes", ad, RNG)
    for i in range(len(blob)):
        bad = bytearray(blob)
        bad[i] ^= 0x01
        with pytest.raises(CryptoError):
            c.aead_decrypt(key, bytes(bad), ad)
    for other_ad in (c.routing_ad(bytes(32), 2, 4, 9), c.routing_ad(bytes(32), 1, 9, 4),
                     c.routing_ad(b"\x01" * 32, 1, 4, 9), b""):
        with pytest.raises(CryptoError, match="authentication"):
            c.aead_decrypt(key, blob, other_ad)
    with pytest.raises(CryptoError):
        c.aead_decrypt(bytes(32), blob, ad)
    for short in (b"", blob[:27]):
        with pytest.raises(CryptoError, match="too short"):
            c.aead_decrypt(key, short, ad)
    with pytest.raises(CryptoError):
        c.aead_decrypt(key[:31], blob, ad)


@settings(max_examples=50, deadline=None)
@given(pt=st.binary(max_size=300), ad=st.binary(max_size=100))
def test_aead_round_trip(pt: bytes, ad: bytes) -> None:
    key = hashlib.sha256(ad).digest()
    blob = c.aead_encrypt(key, pt, ad, RNG)
    assert len(blob) == len(pt) + 28
    assert c.aead_decrypt(key, blob, ad) == pt


def test_aead_fresh_nonce_per_call() -> None:
    key = bytes(32)
    assert c.aead_encrypt(key, b"x", b"", RNG) != c.aead_encrypt(key, b"x", b"", RNG)


def test_routing_ad_layout() -> None:
    sid = bytes(range(32))
    ad = c.routing_ad(sid, 3, 17, 2**40)
    assert ad == b"fedhh/secagg/v1\x00routing-ad\x00" + sid + struct.pack(">IQQ", 3, 17, 2**40)
    with pytest.raises(ParameterError):
        c.routing_ad(sid[:31], 0, 0, 0)
    for args in ((-1, 0, 0), (1 << 32, 0, 0), (0, -1, 0), (0, 0, 1 << 64), (0, True, 0)):
        with pytest.raises(ParameterError):
            c.routing_ad(sid, *args)


# ------------------------------------------------------------------ Ed25519 (RFC 8032)

RFC8032 = [
    # TEST 1, 2, 3 of RFC 8032 section 7.1: (secret key, public key, message, signature)
    ("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
     "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a", "",
     "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e06522490155"
     "5fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"),
    ("4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
     "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c", "72",
     "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da"
     "085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00"),
    ("c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7",
     "fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025", "af82",
     "6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac"
     "18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a"),
]


@pytest.mark.parametrize("sk,pk,msg,sig", RFC8032)
def test_ed25519_rfc8032_section_7_1(sk: str, pk: str, msg: str, sig: str) -> None:
    assert c.ed25519_public(H(sk)) == H(pk)
    assert c.ed25519_sign(H(sk), H(msg)) == H(sig)
    c.ed25519_verify(H(pk), H(msg), H(sig))


def test_ed25519_verify_raises_on_forgeries() -> None:
    sk, pk = c.ed25519_keypair(RNG)
    msg = b"surviving set {1, 2, 5}"
    sig = c.ed25519_sign(sk, msg)
    assert c.ed25519_verify(pk, msg, sig) is None
    with pytest.raises(CryptoError):
        c.ed25519_verify(pk, msg + b"!", sig)
    bad = bytearray(sig)
    bad[5] ^= 1
    with pytest.raises(CryptoError):
        c.ed25519_verify(pk, msg, bytes(bad))
    _, other_pk = c.ed25519_keypair(RNG)
    with pytest.raises(CryptoError):
        c.ed25519_verify(other_pk, msg, sig)
    for bad_sig in (sig[:63], b""):
        with pytest.raises(CryptoError):
            c.ed25519_verify(pk, msg, bad_sig)
    with pytest.raises(CryptoError):
        c.ed25519_verify(pk[:31], msg, sig)


def test_ed25519_undecodable_public_key_raises_crypto_error() -> None:
    # y = 2^255 - 1 (all ones, sign bit clear) is not a field element encoding < p
    sk, _ = c.ed25519_keypair(RNG)
    sig = c.ed25519_sign(sk, b"m")
    with pytest.raises(CryptoError):
        c.ed25519_verify(b"\xff" * 31 + b"\x7f", b"m", sig)


def test_constant_time_equal() -> None:
    assert c.constant_time_equal(b"abc", b"abc")
    assert not c.constant_time_equal(b"abc", b"abd")
    assert not c.constant_time_equal(b"abc", b"ab")
    with pytest.raises(CryptoError):
        c.constant_time_equal("abc", b"abc")  # type: ignore[arg-type]


def test_error_hierarchy() -> None:
    assert issubclass(CryptoError, SecAggError) and issubclass(ParameterError, SecAggError)
    assert issubclass(ParameterError, ValueError) and not issubclass(CryptoError, ValueError)


# ------------------------------------------------------------------ malformed input

@settings(max_examples=200, deadline=None)
@given(key=st.binary(min_size=0, max_size=40), blob=st.binary(max_size=80),
       ad=st.binary(max_size=20))
def test_aead_decrypt_of_garbage_raises_only_crypto_error(key: bytes, blob: bytes, ad: bytes) -> None:
    with pytest.raises(CryptoError):
        c.aead_decrypt(key, blob, ad)


@settings(max_examples=200, deadline=None)
@given(pub=st.binary(min_size=0, max_size=40), sig=st.binary(min_size=0, max_size=70),
       msg=st.binary(max_size=20))
def test_ed25519_verify_of_garbage_raises_only_crypto_error(pub: bytes, sig: bytes, msg: bytes) -> None:
    with pytest.raises(CryptoError):
        c.ed25519_verify(pub, msg, sig)


@settings(max_examples=200, deadline=None)
@given(peer=st.binary(min_size=0, max_size=40))
def test_x25519_with_arbitrary_peer_bytes_returns_or_raises_crypto_error(peer: bytes) -> None:
    secret = bytes(range(32))
    try:
        out = c.x25519_shared(secret, peer)
    except CryptoError:
        return
    assert len(peer) == 32 and len(out) == 32 and out != bytes(32)


def test_ed25519_on_libsodium_equals_the_cryptography_library() -> None:
    """Keys and signatures come from libsodium; they are the bytes OpenSSL's Ed25519
    (through ``cryptography``) gives for the same seed and message."""
    import os

    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    for size in (0, 1, 64, 200):
        seed, msg = os.urandom(32), os.urandom(size)
        ref = Ed25519PrivateKey.from_private_bytes(seed)
        assert c.ed25519_public(seed) == ref.public_key().public_bytes_raw()
        assert c.ed25519_sign(seed, msg) == ref.sign(msg)


def test_aead_encrypt_many_is_aead_encrypt_in_order() -> None:
    """The same ciphertexts, byte for byte, as one aead_encrypt per item drawing from
    the same stream; each decrypts under its own key and associated data only."""
    from secagg.crypto import aead_decrypt, aead_encrypt, aead_encrypt_many, routing_ad, \
        routing_ads

    session = bytes(range(32))
    peers = [1, 7, 300, 2**40]
    keys = [bytes([i]) * 32 for i in range(len(peers))]
    pts = [bytes([i]) * (76 + i) for i in range(len(peers))]
    ads = routing_ads(session, 1, [(5, v) for v in peers])
    assert ads == [routing_ad(session, 1, 5, v) for v in peers]
    one = insecure_deterministic_randomness(11)
    many = insecure_deterministic_randomness(11)
    singles = [aead_encrypt(k, p, a, one) for k, p, a in zip(keys, pts, ads)]
    assert aead_encrypt_many(keys, pts, ads, many) == singles
    assert one.token_bytes(8) == many.token_bytes(8)   # both streams read as far
    for k, p, a, ct in zip(keys, pts, ads, singles):
        assert aead_decrypt(k, ct, a) == p
        with pytest.raises(CryptoError):
            aead_decrypt(k, ct, ads[0] if a != ads[0] else ads[1])
    assert aead_encrypt_many([], [], [], many) == [] and routing_ads(session, 1, []) == []


def test_aead_encrypt_many_and_routing_ads_refuse_bad_items() -> None:
    from secagg.crypto import aead_encrypt_many, routing_ad, routing_ads

    rand = insecure_deterministic_randomness(12)
    key, pt, ad = b"k" * 32, b"p" * 10, b"a" * 5
    with pytest.raises(CryptoError):
        aead_encrypt_many([key, b"short"], [pt, pt], [ad, ad], rand)
    with pytest.raises(CryptoError):
        aead_encrypt_many([key, key], [pt, "text"], [ad, ad], rand)  # type: ignore[list-item]
    with pytest.raises(ParameterError):
        aead_encrypt_many([key, key], [pt], [ad, ad], rand)
    session = bytes(32)
    for bad in (-1, 2**64, True, 1.0):
        with pytest.raises(ParameterError):
            routing_ads(session, 1, [(5, 3), (5, bad)])  # type: ignore[list-item]
        with pytest.raises(ParameterError):
            routing_ads(session, 1, [(5, 3), (bad, 3)])  # type: ignore[list-item]
    with pytest.raises(ParameterError):
        routing_ads(b"short", 1, [(5, 3)])
    assert routing_ads(session, 2, [(9, 4), (4, 9)]) == [routing_ad(session, 2, 9, 4),
                                                         routing_ad(session, 2, 4, 9)]


def test_aead_decrypt_many_opens_in_order_and_names_the_first_failure() -> None:
    from secagg.crypto import AeadBatchError, aead_decrypt_many, aead_encrypt

    rand = insecure_deterministic_randomness(13)
    keys = [bytes([i + 1]) * 32 for i in range(5)]
    pts = [bytes([i]) * (70 + i) for i in range(5)]
    ads = [b"ad%d" % i for i in range(5)]
    cts = [aead_encrypt(k, p, a, rand) for k, p, a in zip(keys, pts, ads)]
    assert aead_decrypt_many(keys, cts, ads) == pts
    assert aead_decrypt_many([bytearray(k) for k in keys], [memoryview(c) for c in cts],
                             ads) == pts
    assert aead_decrypt_many([], [], []) == []
    # an item longer than the others, and one whose view counts 4-byte elements: each
    # gets a buffer as long as its plaintext
    long_ct = aead_encrypt(keys[0], b"L" * 501, ads[0], rand)
    assert aead_decrypt_many([keys[0], keys[1]], [long_ct, cts[1]], [ads[0], ads[1]]) == [
        b"L" * 501, pts[1]]
    assert len(long_ct) % 4 == 1
    wide = memoryview(bytearray(long_ct + bytes(3))).cast("I")
    with pytest.raises(AeadBatchError):   # the padding breaks the tag: refused, no overflow
        aead_decrypt_many([keys[1], keys[0]], [cts[1], wide], [ads[1], ads[0]])
    exact = aead_encrypt(keys[0], b"W" * (400 - 28), ads[0], rand)
    assert len(exact) % 4 == 0
    assert aead_decrypt_many([keys[1], keys[0]], [cts[1], memoryview(exact).cast("I")],
                             [ads[1], ads[0]]) == [pts[1], b"W" * 372]
    flipped = cts[3][:20] + bytes([cts[3][20] ^ 1]) + cts[3][21:]
    for bad_keys, bad_cts, bad_ads, index in (
            (keys, cts[:3] + [flipped] + cts[4:], ads, 3),     # a tampered ciphertext
            (keys, cts, ads[:1] + [b"other"] + ads[2:], 1),     # other associated data
            (keys[:2] + [keys[0]] + keys[3:], cts, ads, 2),     # the wrong key
            (keys, cts[:4] + [cts[4][:27]], ads, 4),            # too short for a tag
            (keys[:1] + [b"short"] + keys[2:], cts, ads, 1)):   # a malformed key
        with pytest.raises(AeadBatchError) as info:
            aead_decrypt_many(bad_keys, bad_cts, bad_ads)
        assert isinstance(info.value, CryptoError) and info.value.index == index
        assert info.value.done == pts[:index]
    with pytest.raises(ParameterError):
        aead_decrypt_many(keys, cts[:4], ads)
