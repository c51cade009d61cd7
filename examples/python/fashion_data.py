"""Fashion-MNIST from the Debian package dataset-fashion-mnist, laid out the way torchvision's
FashionMNIST(root, download=False) expects it: ROOT/FashionMNIST/raw/<name> uncompressed.

normalized() gives the training or test set as the examples train on it. Every rank may
call prepare(): each file is decompressed to a temporary name and renamed into
place, so ranks racing on the same directory never see a partial file.
"""

import gzip
import os
import shutil
import tempfile

import torch.utils.data
from torchvision import datasets, transforms

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


def add_arguments(parser):
    """The options the example trainers share: where the data goes, how much of it they
    train on, and the test accuracy below which they exit 1 (for the tests)."""
    parser.add_argument("--data-dir", default=None, help="cache for the uncompressed dataset")
    parser.add_argument("--limit", type=int, default=0,
                        help="use only the first N training images (0: all)")
    parser.add_argument("--min-accuracy", type=float, default=0.0,
                        help="exit with status 1 if the final test accuracy (%%) is lower")


def normalized(data_dir=None, train=True, limit=0):
    """The training (or test) set, as tensors normalized by the training pixels' mean and
    standard deviation; the first `limit` images only when `limit` is given."""
    normalize = transforms.Compose([transforms.ToTensor(),
                                    transforms.Normalize((0.2860,), (0.3530,))])
    dataset = datasets.FashionMNIST(prepare(data_dir), train=train, download=False,
                                    transform=normalize)
    if limit:
        dataset = torch.utils.data.Subset(dataset, range(limit))
    return dataset

