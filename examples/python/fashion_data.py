"""Fashion-MNIST from the Debian package dataset-fashion-mnist, laid out the way torchvision's
FashionMNIST(root, download=False) expects it: ROOT/FashionMNIST/raw/<name> uncompressed.

Every rank may call prepare(): each file is decompressed to a temporary name and renamed into
place, so ranks racing on the same directory never see a partial file.
"""

import gzip
import os
import shutil
import tempfile

DEBIAN_DIR = "/usr/share/datasets/fashion-mnist"
FILES = ["train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
         "t10k-labels-idx1-ubyte"]


def default_root():
    return os.environ.get("FASHION_MNIST_CACHE",
                          os.path.join(os.path.expanduser("~"), ".cache", "chorus-fashion-mnist"))


def prepare(root=None, source=DEBIAN_DIR):
    root = root or default_root()
    raw = os.path.join(root, "FashionMNIST", "raw")
    os.makedirs(raw, exist_ok=True)
    for name in FILES:
        target = os.path.join(raw, name)
        if os.path.exists(target):
            continue
        src = os.path.join(source, name + ".gz")
        if not os.path.exists(src):
            raise FileNotFoundError(f"{src} not found: install dataset-fashion-mnist")
        fd, tmp = tempfile.mkstemp(dir=raw, prefix=name + ".")
        with gzip.open(src, "rb") as fin, os.fdopen(fd, "wb") as fout:
            shutil.copyfileobj(fin, fout)
        os.replace(tmp, target)
    return root
