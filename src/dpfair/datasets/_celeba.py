"""CelebA attribute annotations (text only, no images)."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd

from dpfair.datasets._files import DataFile, fetch
from dpfair.datasets.base import Column, Dataset, Schema, Table, check_bool, check_choice, finish

CELEBA_URL = "https://mmlab.ie.cuhk.edu.hk/projects/CelebA.html"  # files are on Google Drive: manual download
CELEBA_FILES = (
    DataFile("celeba_attrs", "list_attr_celeba.txt", "f0e5da289d5ccf75ffe8811132694922b60f2af59256ed362afa03fefba324d0",
             None, homepage=f"{CELEBA_URL} (Anno/list_attr_celeba.txt)"),
    DataFile("celeba_attrs", "list_eval_partition.txt",
             "fc955bcb3ef8fbdf7d5640d9a8693a8431b5f2ee291a5c1449a1549e7e073fe7", None,
             homepage=f"{CELEBA_URL} (Eval/list_eval_partition.txt)"),
)
CELEBA_ATTRIBUTES = (
    "5_o_Clock_Shadow Arched_Eyebrows Attractive Bags_Under_Eyes Bald Bangs Big_Lips Big_Nose Black_Hair Blond_Hair "
    "Blurry Brown_Hair Bushy_Eyebrows Chubby Double_Chin Eyeglasses Goatee Gray_Hair Heavy_Makeup High_Cheekbones "
    "Male Mouth_Slightly_Open Mustache Narrow_Eyes No_Beard Oval_Face Pale_Skin Pointy_Nose Receding_Hairline "
    "Rosy_Cheeks Sideburns Smiling Straight_Hair Wavy_Hair Wearing_Earrings Wearing_Hat Wearing_Lipstick "
    "Wearing_Necklace Wearing_Necktie Young"
).split()
CELEBA_GROUP_NAMES = {"Male": ["Female", "Male"], "Young": ["not Young", "Young"]}
CELEBA_ENCODINGS = ("01", "pm1")


def load_celeba(*, sensitive: str = "Male", test_size: float = 0.25, random_state: int = 0, data_home=None,
                path=None, download: bool = True, include_sensitive: bool = False, target: str = "Smiling",
                use_official_split: bool = False, encoding: str = "01") -> Dataset:
    """CelebA face attributes (Liu et al., ICCV 2015), as a tabular task on the 40 annotated attributes.

    ``list_attr_celeba.txt`` (202,599 images × 40 attributes coded -1/1; the mirror stores it as
    ``list_attr_celeba.txt.gz``, checked against the sha256 of the uncompressed file).  Label 1 = the ``target``
    attribute is present (default ``Smiling``; any of the 40).  Sensitive attribute ``Male`` (default; 0 =
    female, 1 = male) or ``Young`` (0 = not young, 1 = young).  Features: the other 38 attributes (39 with
    ``include_sensitive``), not standardised, as 0/1 (``encoding="01"``, default) or as the file's -1/1
    (``encoding="pm1"``: declared numeric columns clipped to [-1, 1]); labels and groups are 0/1 either way.
    ``use_official_split=True`` uses ``list_eval_partition.txt`` (train + valid = 182,637 rows as train, test =
    19,962) instead of a random split.

    Mangold et al. (ICML 2023, Sec. 5 and App. G.1) use label Smiling, 39 features "including one sensitive
    attribute, sex, that is not used for prediction" (so the 38 others; here ``sensitive="Male"``), 90% of the
    rows for training: 182,339 train / 20,260 test.  ``load_dataset("celeba", encoding="pm1", test_size=0.1,
    random_state=42)`` gives those counts (scikit-learn's test part is ceil(0.1 × 202,599) = 20,260 rows).
    Assumed, not stated in the paper: the -1/1 coding, the seed, and the stratification by label × group.

    The files are hosted on Google Drive, so there is no automatic download: fetch them from the project page
    into ``<data home>/celeba_attrs/``.  Licence: CelebA agreement, non-commercial research and education only.
    """
    check_choice(sensitive, "sensitive attribute", tuple(CELEBA_GROUP_NAMES), "celeba")
    check_choice(target, "target", tuple(CELEBA_ATTRIBUTES), "celeba")
    use_official_split = check_bool(use_official_split, "use_official_split")
    check_choice(encoding, "encoding", CELEBA_ENCODINGS, "celeba")
    if target == sensitive:
        raise ValueError(f"target and sensitive are both {target!r}; choose a different target for celeba")
    files = CELEBA_FILES if use_official_split else CELEBA_FILES[:1]
    raws = fetch(files, path=path, data_home=data_home, download=download)
    first, names, body = raws[0].split(b"\n", 2)
    columns = names.decode().split()
    # Values are right-aligned behind one or two spaces: a single-space separator skipping repeated spaces is
    # the C parser's fast path.
    frame = pd.read_csv(io.BytesIO(body), sep=" ", skipinitialspace=True, header=None, names=["image", *columns],
                        index_col=0, dtype={c: np.int8 for c in columns})
    if len(frame) != int(first):
        raise ValueError(f"list_attr_celeba.txt announces {int(first)} rows but holds {len(frame)}")
    y, s = (frame[target] > 0).to_numpy().astype(np.int64), (frame[sensitive] > 0).to_numpy().astype(np.int64)
    if encoding == "01":
        frame = (frame > 0).astype(np.int8)
    features = [c for c in columns if c != target and (include_sensitive or c != sensitive)]
    coding = "-1/1 read as 0/1" if encoding == "01" else "-1/1 kept"
    table = Table(
        name="celeba", y=y, s=s,
        label_names=[f"not {target}", target], group_names=list(CELEBA_GROUP_NAMES[sensitive]),
        sensitive=sensitive,
        description=(
            f"CelebA attribute annotations ({len(frame):,} images, none dropped). Label 1 = "
            f"{target}. Groups by {sensitive}: 0 = {CELEBA_GROUP_NAMES[sensitive][0]}, "
            f"1 = {CELEBA_GROUP_NAMES[sensitive][1]}. Features: the other attributes ({coding}, not standardised); "
            f"{sensitive} {'kept as' if include_sensitive else 'not used as'} a feature. No images are used."
        ),
        licence="CelebA agreement: non-commercial research and educational use only",
        n_dropped=0, frame=frame, encodes_sensitive=[sensitive] if include_sensitive else [],
    )
    if encoding == "01":
        table.binary = features
    else:
        table.schema = Schema(tuple(Column.numeric(c, -1, 1, 0, 1) for c in features),
                              "the file's -1/1 attribute codes, kept")
    if use_official_split:
        partition = pd.read_csv(io.BytesIO(raws[1]), sep=r"\s+", header=None, names=["image", "split"])
        if not np.array_equal(partition["image"].to_numpy(), frame.index.to_numpy()):
            raise ValueError("list_eval_partition.txt does not list the images in the order of list_attr_celeba.txt")
        table.test_mask = (partition["split"] == 2).to_numpy()
        table.split_note = "official CelebA split (train + valid = train, test = test; test_size ignored)"
    return finish(table, test_size, random_state)
