#!/usr/bin/env python3
"""ckpt_forge.py: edits one int64 entry of a checkpoint rank file's header (format
version 2, llmc/host/checkpoint.h) for the attack suite, independently of the C code.

  ckpt_forge.py FILE FIELD VALUE [--keep-sum]   set header entry FIELD (0..127) to VALUE
                                                and recompute the checksum (a forged,
                                                self-consistent header), or keep the old
                                                checksum with --keep-sum
  ckpt_forge.py FILE FIELD flip BIT             flip one bit of entry FIELD (checksum kept)
  ckpt_forge.py FILE resum                      recompute the checksum only

Checksum: FNV-1a 64 over the 1024 header bytes with entry 25 set to 0, then the payload.
"""
import struct
import sys

CHECKSUM = 25


def fnv1a64(data, h=14695981039346656037):
    for b in data:
        h = ((h ^ b) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h


def main():
    path = sys.argv[1]
    b = bytearray(open(path, "rb").read())
    h = list(struct.unpack_from("<128q", b, 0))
    resum = True
    if sys.argv[2] == "resum":
        pass
    elif sys.argv[3] == "flip":
        f, bit = int(sys.argv[2]), int(sys.argv[4])
        u = (h[f] & 0xFFFFFFFFFFFFFFFF) ^ (1 << bit)
        h[f] = u - (1 << 64) if u >= 1 << 63 else u
        resum = False
    else:
        f, v = int(sys.argv[2]), int(sys.argv[3])
        h[f] = v
        resum = "--keep-sum" not in sys.argv
    if resum:
        h[CHECKSUM] = 0
        s = fnv1a64(bytes(b[1024:]), fnv1a64(struct.pack("<128q", *h)))
        h[CHECKSUM] = s - (1 << 64) if s >= 1 << 63 else s
    struct.pack_into("<128q", b, 0, *h)
    open(path, "wb").write(b)


if __name__ == "__main__":
    main()
