#!/usr/bin/env python3
"""How few instructions could a WebAssembly stage-1 kernel for crc32 and rabin need?

An estimate, not a measurement: it counts operations per byte for the byte-plane swizzle kernel
that native/core/src/stage1/simd128.rs is, and for a bit-sliced kernel (128 chains, one bit of
every chain per v128, the rolling step a fixed XOR network) that was not built. The XOR network
is sized with Paar's greedy common-subexpression elimination over the step's linear map (the
leaving byte's whole contribution and the table index's, per state bit), for the default windows
(rabin 48, crc32 256). Usage: python3 bench/js/bitsliced-estimate.py (see bench/js/RESULTS.md).
"""
import itertools

RABIN_POLY, RABIN_DEG = 0x003D_A335_8B4D_C173, 53


def rabin_mod(x):
    for b in range(63, RABIN_DEG - 1, -1):
        if x >> b & 1:
            x ^= RABIN_POLY << (b - RABIN_DEG)
    return x


def rabin_u(b, w):  # b·x^(8(W-1)) mod P: the leaving byte's contribution
    h = b
    for _ in range(w - 1):
        h = rabin_mod(h << 8)
    return h


CRC_T = []
for n in range(256):
    c = n
    for _ in range(8):
        c = 0xEDB88320 ^ (c >> 1) if c & 1 else c >> 1
    CRC_T.append(c)


def crc_add(h, c):
    return (h >> 8) ^ CRC_T[(h ^ c) & 0xFF]


def crc_leave(b, w):  # crc_add(crcu[b], 0): the leaving byte's whole contribution to one roll
    h = crc_add(0, b)
    for _ in range(w - 1):
        h = crc_add(h, 0)
    return crc_add(h, 0)


def rows(f, nbits, base):
    """Output bit o of the byte map f as the set of input bits (numbered from `base`) it XORs."""
    return [frozenset(base + i for i in range(8) if f(1 << i) >> o & 1) for o in range(nbits)]


def paar(rs):
    """XOR gates for all rows with Paar's greedy pair extraction."""
    rs = [set(r) for r in rs]
    gates, nxt = 0, 1000
    while True:
        pairs = {}
        for r in rs:
            for p in itertools.combinations(sorted(r), 2):
                pairs[p] = pairs.get(p, 0) + 1
        if not pairs or max(pairs.values()) < 2:
            break
        (a, b), _ = max(pairs.items(), key=lambda kv: kv[1])
        gates += 1
        for r in rs:
            if a in r and b in r:
                r -= {a, b}
                r.add(nxt)
        nxt += 1
    return gates + sum(max(len(r) - 1, 0) for r in rs)


def main():
    # Leaving byte: inputs 0..7; table index: inputs 8..15.
    ru = rows(lambda b: rabin_u(b, 48), RABIN_DEG, 0)
    rt = rows(lambda j: rabin_mod(j << RABIN_DEG), RABIN_DEG, 8)
    rabin_net = paar([u | t for u, t in zip(ru, rt)]) + paar(ru[45:])  # the index needs U's top byte first
    cu = rows(lambda b: crc_leave(b, 256), 32, 0)
    ct = rows(lambda x: CRC_T[x], 32, 8)
    crc_net = paar([u | t for u, t in zip(cu, ct)])
    # Bit-sliced, per 128 chain-steps: the network, the state (53 or 32 planes: V8 has 16 xmm
    # registers, so a load and a store each), 16 input-plane loads, the match test (~14), the
    # state XORs (one per plane) and the input's transposes (16x16 byte transposes as now,
    # 48 per 128 bytes, then 8x8 bit transposes, 72, and 8 plane stores).
    transposes = 48 + 72 + 8
    est = {
        "rabin": dict(swizzle=(28 + 28 + 9 + 4 + 2 + 6) / 16,
                      bitsliced=(rabin_net + 53 + 2 * 53 + 16 + 14 + transposes) / 128, net=rabin_net),
        "crc32": dict(swizzle=(16 + 16 + 8 + 4 + 2 + 6) / 16,
                      bitsliced=(crc_net + 32 + 2 * 32 + 16 + 14 + transposes) / 128, net=crc_net),
    }
    print("family | XOR network per step (Paar) | ops/byte, swizzle kernel (relaxed) | ops/byte, bit-sliced | ratio")
    for fam, e in est.items():
        print(f"{fam} | {e['net']} | {e['swizzle']:.2f} | {e['bitsliced']:.2f} | {e['swizzle'] / e['bitsliced']:.2f}x")


if __name__ == "__main__":
    main()
