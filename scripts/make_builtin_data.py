#!/usr/bin/env python3
"""Generates the built-in training data: a stratified subset of Fashion-MNIST
(the first TRAIN_PER_CLASS / TEST_PER_CLASS images of each class, in file
order) written as gzip'd IDX files under data/fashion-mnist-mini/, from the
files of Debian's `dataset-fashion-mnist` package. Deterministic: the same
source files give byte-identical output (gzip mtime 0). Standard library only.

    apt-get install dataset-fashion-mnist
    python3 scripts/make_builtin_data.py [SRC_DIR] [OUT_DIR]
"""
import gzip
import os
import struct
import sys

SRC = sys.argv[1] if len(sys.argv) > 1 else "/usr/share/datasets/fashion-mnist"
OUT = sys.argv[2] if len(sys.argv) > 2 else os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "data", "fashion-mnist-mini")
TRAIN_PER_CLASS = 200
TEST_PER_CLASS = 100
CLASSES = 10


def read_idx(path):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    zero, dtype, ndim = struct.unpack(">HBB", raw[:4])
    assert zero == 0 and dtype == 0x08, f"{path}: not an unsigned-byte IDX file"
    dims = struct.unpack(">" + "I" * ndim, raw[4:4 + 4 * ndim])
    return dims, raw[4 + 4 * ndim:]


def write_idx(path, dims, payload):
    header = struct.pack(">HBB", 0, 0x08, len(dims)) + struct.pack(">" + "I" * len(dims), *dims)
    with open(path, "wb") as f:
        # mtime=0: reproducible bytes.
        with gzip.GzipFile(fileobj=f, mode="wb", mtime=0, compresslevel=9, filename="") as g:
            g.write(header + payload)


def subset(split, per_class):
    idims, images = read_idx(os.path.join(SRC, f"{split}-images-idx3-ubyte.gz"))
    _, labels = read_idx(os.path.join(SRC, f"{split}-labels-idx1-ubyte.gz"))
    n, h, w = idims
    taken = [0] * CLASSES
    keep = []
    for i in range(n):
        c = labels[i]
        if taken[c] < per_class:
            taken[c] += 1
            keep.append(i)
    assert all(t == per_class for t in taken), taken
    px = h * w
    imgs = b"".join(images[i * px:(i + 1) * px] for i in keep)
    labs = bytes(labels[i] for i in keep)
    write_idx(os.path.join(OUT, f"{split}-images-idx3-ubyte.gz"), (len(keep), h, w), imgs)
    write_idx(os.path.join(OUT, f"{split}-labels-idx1-ubyte.gz"), (len(keep),), labs)
    return len(keep)


def main():
    os.makedirs(OUT, exist_ok=True)
    ntr = subset("train", TRAIN_PER_CLASS)
    nte = subset("t10k", TEST_PER_CLASS)
    print(f"wrote {ntr} train / {nte} test images to {os.path.normpath(OUT)}")


if __name__ == "__main__":
    main()
