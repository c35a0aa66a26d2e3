"""MNIST digits with the class as the group (per-class fairness), and its unbalanced variant."""

from __future__ import annotations

import gzip

import numpy as np

from dpfair.datasets._files import DataFile, fetch
from dpfair.datasets.base import Dataset, Table, finish
from dpfair.exceptions import DataNotFoundError

# torchvision's mirror of http://yann.lecun.com/exdb/mnist/ (the original site often refuses downloads).
MNIST_URL = "https://ossci-datasets.s3.amazonaws.com/mnist"
MNIST_TEST_FILES = (
    DataFile("mnist", "t10k-images-idx3-ubyte.gz", "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6",
             f"{MNIST_URL}/t10k-images-idx3-ubyte.gz"),
    DataFile("mnist", "t10k-labels-idx1-ubyte.gz", "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6",
             f"{MNIST_URL}/t10k-labels-idx1-ubyte.gz"),
)
MNIST_TRAIN_FILES = (
    DataFile("mnist", "train-images-idx3-ubyte.gz", None, f"{MNIST_URL}/train-images-idx3-ubyte.gz",
             md5="f68b3c2dcbeaaa9fbdd348bbdeb94873"),
    DataFile("mnist", "train-labels-idx1-ubyte.gz", "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c",
             f"{MNIST_URL}/train-labels-idx1-ubyte.gz"),
)
MNIST_N_TRAIN = 60_000
UNBALANCED_CLASS = 8
UNBALANCED_KEEP = 500
IMAGE_SHAPE = (1, 28, 28)


def read_idx(raw: bytes) -> np.ndarray:
    """Decode a gzip-compressed IDX file of unsigned bytes (big-endian header: magic, then one uint32 per dim)."""
    data = gzip.decompress(raw)
    magic = int.from_bytes(data[:4], "big")
    if magic >> 8 != 0x08:
        raise ValueError(f"not an IDX file of unsigned bytes (magic {magic:#010x})")
    ndim = magic & 0xFF
    shape = tuple(int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim))
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(shape)


#: share of the images inverted (x → 1 − x) for the image-derived group ``sensitive="inverted"``
INVERTED_SHARE = 0.3


def _invert_minority(images: np.ndarray, share: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Invert a seeded random ``share`` of the images (independently of the digit); the group is 1 for those."""
    inverted = (np.random.default_rng(seed).random(len(images)) < share).astype(np.int64)
    images = images.copy()
    images[inverted == 1] = 255 - images[inverted == 1]
    return images, inverted


def _load(name: str, unbalanced: bool, test_size: float, random_state: int, data_home, path,
          download: bool, sensitive: str = "class", inverted_share: float = INVERTED_SHARE) -> Dataset:
    test_images, test_labels = (read_idx(b) for b in fetch(MNIST_TEST_FILES, path=path, data_home=data_home,
                                                           download=download))
    try:
        train_images, train_labels = (read_idx(b) for b in fetch(MNIST_TRAIN_FILES, path=path, data_home=data_home,
                                                                 download=download))
    except DataNotFoundError:
        train_images = train_labels = None

    if train_images is not None:
        images = np.concatenate([train_images, test_images])
        labels = np.concatenate([train_labels, test_labels]).astype(np.int64)
        test_mask = np.arange(len(labels)) >= len(train_labels)
        source = (f"MNIST (LeCun et al.), official split: {len(train_labels):,} training and "
                  f"{len(test_labels):,} test images (test_size ignored).")
    else:
        images, labels, test_mask = test_images, test_labels.astype(np.int64), None
        source = (f"MNIST (LeCun et al.) built from the {len(test_labels):,} official test images only, because "
                  "train-images-idx3-ubyte.gz is missing (and could not be downloaded): both the train and the "
                  "test part come from a stratified split of the 10,000 test images.")
    if sensitive == "class":
        s, group_names = labels.copy(), [str(d) for d in range(10)]
        group_text = "group = the class itself (per-class fairness)"
    elif sensitive == "inverted":
        if not 0.0 < inverted_share < 1.0:
            raise ValueError(f"inverted_share must lie in (0, 1), got {inverted_share}")
        images, s = _invert_minority(images, inverted_share, 20_231_123)
        group_names = ["original", "inverted"]
        group_text = (f"group = whether the image was inverted (x → 1 − x): a fixed random {inverted_share:.0%} of "
                      "the images (seed 20231123, independent of the digit), a minority domain the model must "
                      "also serve")
    else:
        raise ValueError(f"unknown sensitive attribute {sensitive!r} for MNIST; valid: class, inverted")
    pixels = [f"pixel{i}" for i in range(28 * 28)]
    table = Table(
        name=name, y=labels, s=s, label_names=[str(d) for d in range(10)],
        group_names=group_names, sensitive=sensitive,
        description=(f"{source} Label = digit 0-9; {group_text}. X = the 784 "
                     "pixels scaled to [0, 1] as float32, image_shape (1, 28, 28)."),
        licence="CC BY-SA 3.0 (as usually cited)", n_dropped=0,
        X=images.reshape(len(labels), -1).astype(np.float32) / np.float32(255.0),
        feature_names=pixels, test_mask=test_mask,
        split_note="official MNIST split" if test_mask is not None else None, image_shape=IMAGE_SHAPE,
        # an inverted image shows its group: every pixel is a function of s (and of the original image)
        encodes_sensitive=pixels if sensitive == "inverted" else [],
    )
    data = finish(table, test_size, random_state)
    if unbalanced:
        n_train = len(data.y_train)
        keep = min(UNBALANCED_KEEP, int(np.floor(UNBALANCED_KEEP * n_train / MNIST_N_TRAIN + 0.5)))
        rng = np.random.default_rng(random_state)
        eights = np.flatnonzero(data.y_train == UNBALANCED_CLASS)
        dropped = rng.choice(eights, size=len(eights) - keep, replace=False)
        rows = np.setdiff1d(np.arange(n_train), dropped)
        data.X_train, data.y_train, data.s_train = data.X_train[rows], data.y_train[rows], data.s_train[rows]
        scaled = ("" if keep == UNBALANCED_KEEP else
                  f" ({UNBALANCED_KEEP} × {n_train:,} / {MNIST_N_TRAIN:,} rounded, scaled because only "
                  f"{n_train:,} training images are available)")
        data.description += (f" Unbalanced variant: class {UNBALANCED_CLASS} in the training part subsampled at "
                             f"random (seed {random_state}) to {keep} images{scaled}, leaving {len(rows):,} training "
                             "images; the test part is untouched.")
    return data


def load_mnist(*, sensitive: str = "inverted", inverted_share: float = INVERTED_SHARE, test_size: float = 0.25,
               random_state: int = 0, data_home=None, path=None, download: bool = True) -> Dataset:
    """MNIST handwritten digits (LeCun, Cortes & Burges), with an image-derived group.

    X holds the 784 pixels scaled to [0, 1] (float32; reshape with ``image_shape`` = (1, 28, 28)); y is the
    digit.  With all four IDX files the official 60,000/10,000 split is used.  If ``train-images-idx3-ubyte.gz``
    is missing and cannot be downloaded (the offline mirror lacks it), both parts are built from the 10,000 test
    images by a stratified ``test_size`` split, and the description says so.  Licence CC BY-SA 3.0 (as usually
    cited).

    ``sensitive="inverted"`` (the default): an image-derived group for fair image classification: a fixed
    random ``inverted_share`` of the images have their pixels inverted, and the group says which.  Every pixel
    then encodes the group (``sensitive_columns`` lists all 784), so methods under ``privacy_unit="sensitive"``,
    which treat X as public, refuse it: train them under ``privacy_unit="record"``.
    ``sensitive="class"``: the digit itself as the group, for per-class fairness (FairDP's accuracy
    disparity across classes); then the group is the label, so group-fairness notions such as
    demographic parity are not meaningful — only per-group accuracy is.
    """
    return _load("mnist", False, test_size, random_state, data_home, path, download, sensitive, inverted_share)


def load_mnist_unbalanced(*, test_size: float = 0.25, random_state: int = 0, data_home=None, path=None,
                          download: bool = True) -> Dataset:
    """MNIST with class 8 under-represented in training (the DP-SGD disparate-impact benchmark).

    As :func:`load_mnist`, but class 8 in the training part is randomly subsampled (seeded by ``random_state``)
    to 500 of the 60,000 training images.  When built from the 10,000 test images only, the cut is scaled
    proportionally: round(500 × n_train / 60,000) (63 for a 7,500-image training part).  The test part is not
    changed.
    """
    return _load("mnist-unbalanced", True, test_size, random_state, data_home, path, download)
